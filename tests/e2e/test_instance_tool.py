"""tools/netbox_instance.py reports the instance these tests started as it runs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

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


def _shared_dumps(tmp_path: Path, name: str, content: bytes, listed_sum: str) -> Path:
    """A shared/netbox-dumps folder as the project's owner lays it: the dump and its PROVENANCE.md row."""
    folder = tmp_path / "netbox-dumps"
    folder.mkdir()
    (folder / name).write_bytes(content)
    (folder / "PROVENANCE.md").write_text(
        "| file | NetBox | netbox-branching | sha256 |\n|---|---|---|---|\n"
        f"| {name} | 4.7.3 | 1.2.2 | {listed_sum} |\n",
        encoding="utf-8",
    )
    return folder


@pytest.mark.parametrize("checksum_matches", [True, False])
def test_a_shared_template_dump_is_used_only_when_its_checksum_matches(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    checksum_matches: bool,
) -> None:
    # make test restores each release's migrated template from ../shared/netbox-dumps instead of
    # migrating for minutes, but only a dump whose sha256 is the one PROVENANCE.md lists
    import netbox_instance

    content = b"PGDMP not really a dump"
    name = f"{netbox_instance.RELEASE.template_db}.dump"
    listed = hashlib.sha256(content).hexdigest() if checksum_matches else "0" * 64
    monkeypatch.setattr(netbox_instance, "NETBOX_DUMPS", _shared_dumps(tmp_path, name, content, listed))
    monkeypatch.setattr(netbox_instance, "CACHE", tmp_path / "cache")
    cached = tmp_path / "cache" / name

    netbox_instance._copy_shared_dump(cached)

    out = capsys.readouterr().out
    if checksum_matches:
        assert cached.read_bytes() == content
        assert "using the shared dump" in out
    else:
        assert not cached.exists()
        assert "ignored, migrating" in out


def test_without_a_shared_dump_the_template_is_migrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import netbox_instance

    monkeypatch.setattr(netbox_instance, "NETBOX_DUMPS", tmp_path / "absent")
    monkeypatch.setattr(netbox_instance, "CACHE", tmp_path / "cache")
    netbox_instance._copy_shared_dump(tmp_path / "cache" / "x.dump")
    assert not (tmp_path / "cache").exists()
    assert "no shared dump x.dump" in capsys.readouterr().out


def test_the_shared_dumps_provenance_lists_every_release_the_tool_makes() -> None:
    # the dumps shipped beside the project are named as this tool names its cache files; a release whose
    # name is missing there would silently migrate for minutes on CI
    import netbox_instance

    provenance = netbox_instance.NETBOX_DUMPS / "PROVENANCE.md"
    if not provenance.exists():
        if os.environ.get("HVSYNC_REQUIRE_SOURCE_DATA"):  # CI has ../shared: missing there is a failure
            pytest.fail(f"no {provenance}")
        pytest.skip(f"no {provenance} on this machine (CI and developers have ../shared)")
    sums = netbox_instance.shared_dump_sums(provenance)
    for release in netbox_instance.RELEASES.values():
        assert sums.get(f"{release.template_db}.dump", "").isalnum(), release.version
