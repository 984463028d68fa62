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


def test_template_upgrades_go_forward_and_the_default_release_is_a_new_install() -> None:
    # a release's template may start from an older release's (an operator's upgrade), never a newer one,
    # and the default release, where every suite runs, is migrated from an empty database
    import netbox_instance

    def release_key(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split("."))

    releases = netbox_instance.RELEASES
    assert releases[netbox_instance.DEFAULT_VERSION].upgraded_from is None
    upgraded = {v: r.upgraded_from for v, r in releases.items() if r.upgraded_from}
    assert upgraded == {"4.6.8": "4.5.8", "4.7.0": "4.6.8"}
    for version, older in upgraded.items():
        assert release_key(older) < release_key(version)
        assert release_key(releases[older].branching) <= release_key(releases[version].branching)


def test_a_pytest_run_takes_a_stopped_instances_redis_databases_and_refuses_a_live_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # make test runs two in-NetBox suites at once, the default release's on the `test` instance's Redis
    # databases (HVSYNC_PYTEST_REDIS_OF=test) before that instance starts: their queues must not meet
    import netbox_instance

    sent: list[tuple[int, tuple[str, ...]]] = []
    live: list[str] = []
    monkeypatch.setattr(netbox_instance, "redis_command", lambda db, *cmd: sent.append((db, cmd)))
    monkeypatch.setattr(netbox_instance, "live_rq_workers", lambda base: list(live))

    monkeypatch.delenv("HVSYNC_PYTEST_REDIS_OF", raising=False)
    assert netbox_instance.pytest_redis_base() == netbox_instance.PYTEST_REDIS_BASE == 10
    assert sent == []

    monkeypatch.setenv("HVSYNC_PYTEST_REDIS_OF", "test")
    assert netbox_instance.pytest_redis_base() == 4  # the test instance's slot, emptied for this run
    assert sent == [(4, ("FLUSHDB",)), (5, ("FLUSHDB",))]

    live.append("rq:worker:still-running")
    sent.clear()
    with pytest.raises(SystemExit, match="Redis database 4 is used by 1 live RQ worker"):
        netbox_instance.pytest_redis_base()
    assert sent == []  # nothing emptied under a live worker
