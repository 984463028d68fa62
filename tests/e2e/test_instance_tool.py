"""tools/netbox_instance.py reports the instance these tests started as it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest
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


def test_pytest_gets_every_argument_its_options_first_included(monkeypatch: pytest.MonkeyPatch) -> None:
    # `make test PYTEST_ARGS=--durations=25` puts an option right after `pytest`; argparse refused it
    import netbox_instance

    passed: list[list[str]] = []
    monkeypatch.setattr(netbox_instance, "run_pytest", lambda args: passed.append(list(args)) or 0)
    assert netbox_instance.main(["pytest", "--durations=25", "-x", "packages/x", "-k", "a or b"]) == 0
    assert passed == [["--durations=25", "-x", "packages/x", "-k", "a or b"]]
