"""tools/netbox_instance.py reports the instance these tests started as it runs."""

from __future__ import annotations

import subprocess
import sys

from conftest import INSTANCE, PORT, REPO, NetBox


def test_status_names_the_port_the_instance_was_started_at(netbox: NetBox) -> None:
    # `up --port` puts this instance outside its slot's port; status must show where it answers
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "netbox_instance.py"), "status"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    lines = [line for line in out.splitlines() if line.startswith(f"{INSTANCE}:")]
    assert lines == [f"{INSTANCE}: pids=yes http=up port={PORT}"], out
    assert netbox.url.endswith(f":{PORT}")
