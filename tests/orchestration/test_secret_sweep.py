"""After every other test of this suite (the fault matrix included; conftest orders this module last):
the planted secrets (the backend API key, NetBox's API token, the Proxmox token secret) appear in no log,
no database and no job row of any part. They were sent through every fault the suite injects.

What is read: every file of the backend's data directory (its SQLite database, WAL, log); every log of
the NetBox instance (gunicorn, RQ worker, access log); a data dump of NetBox's database except
`users_token`, where NetBox itself keeps its own tokens (in plaintext for v1 tokens: NetBox's design, not
hvsync's); every job row through the REST API (data, log entries, error).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import REPO, NetBox, Plugin


def leaks(text: str, planted: tuple[str, ...]) -> list[int]:
    """Which planted secrets (by position: never print them) occur in `text`."""
    return [i for i, secret in enumerate(planted) if secret in text]


def test_planted_secrets_are_in_no_log_database_or_job(netbox: NetBox, plugin: Plugin, backend: Any) -> None:
    planted = plugin.planted
    assert len(planted) == 3 and all(len(s) >= 20 for s in planted)
    found: dict[str, list[int]] = {}

    files = [p for p in Path(backend.data_dir).rglob("*") if p.is_file()]
    assert any(p.suffix in (".db", ".sqlite", ".sqlite3") for p in files), [p.name for p in files]
    assert any(p.name == "backend.log" for p in files)
    logs = sorted((REPO / ".netbox" / "instances" / netbox.instance / "logs").glob("*.log"))
    assert netbox.instance and logs, "the NetBox instance's logs were not found"
    for path in [*files, *logs]:
        if hit := leaks(path.read_bytes().decode("utf-8", "replace"), planted):
            found[str(path)] = hit

    assert netbox.db
    dump = subprocess.run(
        [
            "pg_dump",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "--data-only",
            "--exclude-table-data=users_token",
            netbox.db,
        ],
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout.decode("utf-8", "replace")
    assert "COPY public.core_job" in dump and "netbox_hvsync" in dump  # the dump holds what we look for
    if hit := leaks(dump, planted):
        found[f"database {netbox.db}"] = hit

    jobs = netbox.get("core/jobs/", limit=1000)
    assert jobs["count"] >= 10, "the sweep should run after the suite's sync jobs"
    rows = [netbox.get(f"core/jobs/{row['id']}/") for row in jobs["results"]]
    if hit := leaks(json.dumps(rows), planted):
        found["job rows"] = hit
    assert found == {}, f"planted secrets (by index) found in: {found}"
