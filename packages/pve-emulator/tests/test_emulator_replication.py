"""Replication views (``/nodes/{node}/replication``, status, log, schedule_now) against the state they derive
from: the job config (``state.replication_jobs``) and pvesr's run state (``state.replication_state``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.mock.calendar import next_event, parse
from pve_emulator.mock.state import ClusterState
from pve_emulator.testing import EmulatorHandle, running_emulator


@pytest.fixture
def pve() -> Iterator[EmulatorHandle]:
    """A fresh demo per test: runs change the replication state (conftest's `api` client talks to it)."""
    with running_emulator() as handle:
        yield handle


def _data(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def _run(state: ClusterState, job_id: str) -> dict[str, Any]:
    job = state.replication_jobs[job_id]
    return state.replication_state[int(job["guest"])][f"local/{job['target']}"]


def _expected(state: ClusterState, job_id: str, next_sync: int) -> dict[str, Any]:
    """A node entry as pve-manager builds it: config + vmtype + next_sync + the reported run state."""
    job = state.replication_jobs[job_id]
    run = _run(state, job_id)
    entry = {**job, "vmtype": state.guests[int(job["guest"])].kind, "next_sync": next_sync}
    entry.update(
        {k: run[k] for k in ("last_sync", "last_try", "fail_count", "error", "duration") if k in run}
    )
    return entry


def test_demo_jobs_as_the_source_node_reports_them(pve: EmulatorHandle, api: httpx.Client) -> None:
    state = pve.state
    good, bad = _run(state, "103-0"), _run(state, "200-0")
    listed = {j["id"]: j for j in _data(api.get("/nodes/pve1/replication"))}
    assert listed == {
        "103-0": _expected(state, "103-0", next_event(parse("*/15"), good["last_try"])),
        "200-0": _expected(state, "200-0", bad["last_try"] + 2 * 5 * 60),  # back-off after two failures
    }
    assert listed["103-0"]["fail_count"] == 0 and "error" not in listed["103-0"]
    assert listed["103-0"]["last_sync"] == good["last_try"] > time.time() - 1800
    assert listed["200-0"]["fail_count"] == 2 and listed["200-0"]["last_sync"] == 0
    assert "pvesr prepare-local-job 200-0" in listed["200-0"]["error"]
    assert listed["200-0"]["vmtype"] == "lxc" and listed["103-0"]["vmtype"] == "qemu"
    for job_id, entry in listed.items():
        assert _data(api.get(f"/nodes/pve1/replication/{job_id}/status")) == entry
    # the other nodes hold none of these guests; a job of a guest elsewhere is not known there
    assert _data(api.get("/nodes/pve2/replication")) == []
    assert api.get("/nodes/pve2/replication/103-0/status").status_code == 404
    assert [j["id"] for j in _data(api.get("/nodes/pve1/replication", params={"guest": 200}))] == ["200-0"]
    assert {e["name"] for e in _data(api.get("/nodes/pve1/replication/103-0"))} == {
        "schedule_now",
        "log",
        "status",
    }


def test_log_is_the_last_run(pve: EmulatorHandle, api: httpx.Client) -> None:
    log = _data(api.get("/nodes/pve1/replication/103-0/log"))
    assert [line["t"] for line in log] == pve.state.replication_logs["103-0"]
    assert [line["n"] for line in log] == list(range(1, len(log) + 1))
    assert log[0]["t"].endswith("103-0: start replication job") and log[-1]["t"].endswith(
        "end replication job"
    )
    assert any("incremental sync 'local-lvm:vm-103-disk-0'" in line["t"] for line in log)
    assert not any("ceph-vm" in line["t"] for line in log), "shared storage is not replicated"
    page = _data(api.get("/nodes/pve1/replication/103-0/log", params={"start": 2, "limit": 2}))
    assert page == log[2:4]
    failed = _data(api.get("/nodes/pve1/replication/200-0/log"))
    assert failed[-1]["t"].endswith(f"end replication job with error: {_run(pve.state, '200-0')['error']}")


def test_schedule_now_runs_a_failing_job_again(pve: EmulatorHandle, api: httpx.Client) -> None:
    before = dict(_run(pve.state, "200-0"))
    assert _data(api.post("/nodes/pve1/replication/200-0/schedule_now")) is None
    run = _run(pve.state, "200-0")
    assert run["last_try"] > before["last_try"] and run["last_sync"] == run["last_try"]
    assert run["fail_count"] == 0 and "error" not in run
    status = _data(api.get("/nodes/pve1/replication/200-0/status"))
    assert status == _expected(pve.state, "200-0", next_event(parse("*/30"), run["last_try"]))
    assert "error" not in status and status["fail_count"] == 0
    log = [line["t"] for line in _data(api.get("/nodes/pve1/replication/200-0/log"))]
    assert any(
        f"full sync 'local-lvm:vm-200-disk-0' (__replicate_200-0_{run['last_try']}__)" in t for t in log
    )
    assert log[-1].endswith("200-0: end replication job")


def test_target_offline_fails_and_backs_off(pve: EmulatorHandle, api: httpx.Client) -> None:
    state = pve.state
    synced = _run(state, "103-0")["last_sync"]
    state.set_node_online("pve2", False)
    assert api.post("/nodes/pve1/replication/103-0/schedule_now").status_code == 200
    run = _run(state, "103-0")
    assert run["fail_count"] == 1 and run["last_sync"] == synced and "root@10.10.0.12" in run["error"]
    assert _data(api.get("/nodes/pve1/replication/103-0/status"))["next_sync"] == 0, "no retry while down"
    state.set_node_online("pve2", True)
    status = _data(api.get("/nodes/pve1/replication/103-0/status"))
    assert status == _expected(state, "103-0", run["last_try"] + 5 * 60)
    run["fail_count"] = 4  # beyond three failures pvesr retries every half hour
    assert _data(api.get("/nodes/pve1/replication/103-0/status"))["next_sync"] == run["last_try"] + 30 * 60


def test_disabled_job_is_listed_but_not_run(pve: EmulatorHandle, api: httpx.Client) -> None:
    assert api.put("/cluster/replication/103-0", data={"disable": 1}).status_code == 200
    before = dict(_run(pve.state, "103-0"))
    entry = {j["id"]: j for j in _data(api.get("/nodes/pve1/replication"))}["103-0"]
    assert entry["disable"] == 1
    assert api.post("/nodes/pve1/replication/103-0/schedule_now").status_code == 200
    run = _run(pve.state, "103-0")
    assert run["last_sync"] == before["last_sync"] and run["last_try"] == 0, "only marked due"
    assert _data(api.get("/nodes/pve1/replication/103-0/status"))["next_sync"] == next_event(parse("*/15"), 0)


def test_new_job_has_never_run(pve: EmulatorHandle, api: httpx.Client) -> None:
    created = {"id": "103-3", "type": "local", "target": "pve3", "schedule": "*/5", "rate": 10}
    assert api.post("/cluster/replication", data=created).status_code == 200
    entry = _data(api.get("/nodes/pve1/replication/103-3/status"))
    assert entry == {
        "id": "103-3",
        "type": "local",
        "target": "pve3",
        "guest": 103,
        "jobnum": 3,
        "source": "pve1",
        "schedule": "*/5",
        "rate": 10,
        "vmtype": "qemu",
        "next_sync": 300,  # the first */5 event after last_try 0: due at once
        "last_sync": 0,
        "last_try": 0,
        "fail_count": 0,
    }
    assert _data(api.get("/nodes/pve1/replication/103-3/log")) == []
    duplicate = {**created, "id": "103-4"}
    assert api.post("/cluster/replication", data=duplicate).status_code == 400, "one job per guest and target"
    api.post("/nodes/pve1/replication/103-3/schedule_now")
    assert _data(api.get("/nodes/pve1/replication/103-3/status"))["last_sync"] > 0


def test_moved_guest_switches_source_and_target(pve: EmulatorHandle, api: httpx.Client) -> None:
    state = pve.state
    moved = dict(_run(state, "103-0"))
    state.guests[103].node = "pve2"  # migrated to its replication target
    state.bump()
    assert _data(api.get("/nodes/pve1/replication", params={"guest": 103})) == []
    entry = _data(api.get("/nodes/pve2/replication/103-0/status"))
    assert (entry["source"], entry["target"]) == ("pve2", "pve1")
    assert state.replication_jobs["103-0"]["source"] == "pve2", "written back to the config"
    assert state.replication_state[103] == {"local/pve1": moved}, "the run state moves with the job"
    assert entry["last_sync"] == moved["last_sync"]


def test_delete_removes_job_and_its_state(pve: EmulatorHandle, api: httpx.Client) -> None:
    resp = api.delete("/cluster/replication/200-0", params={"force": 1, "keep": 1})
    assert resp.status_code == 400 and "keep" in resp.json()["errors"]
    assert api.delete("/cluster/replication/200-0").status_code == 200
    assert api.get("/cluster/replication/200-0").status_code == 404
    assert [j["id"] for j in _data(api.get("/nodes/pve1/replication"))] == ["103-0"]
    assert 200 not in pve.state.replication_state
    assert pve.state.replication_logs["200-0"][-2].endswith("200-0: job removed")
    assert api.delete("/cluster/replication/103-0", params={"force": 1}).status_code == 200
    assert pve.state.replication_jobs == {} and pve.state.replication_state == {}


def test_cluster_list_is_the_config(pve: EmulatorHandle, api: httpx.Client) -> None:
    listed = _data(api.get("/cluster/replication"))
    assert listed == [pve.state.replication_jobs[k] for k in sorted(pve.state.replication_jobs)]
    assert all("next_sync" not in j and "fail_count" not in j for j in listed), "run state is per node"


@pytest.mark.parametrize(
    ("spec", "last", "expected"),
    [
        ("*/15", 0, 900),
        ("*/15", 900, 1800),
        ("*/15", 901, 1800),
        ("5", 0, 300),  # a single part is the minute
        ("02:30", 0, 2 * 3600 + 1800),
        ("daily", 100, 86400),
        ("hourly", 3599, 3600),
        ("sat 02:00", 0, 2 * 86400 + 2 * 3600),  # 1970-01-01 was a Thursday
        ("mon..fri 8..17:0/30", 0, 8 * 3600),
        ("sat..mon 0:0", 86400, 2 * 86400),  # a range wrapping round the week
        ("mon,wed 12:00", 0, 4 * 86400 + 12 * 3600),
    ],
)
def test_calendar_next_event(spec: str, last: int, expected: int) -> None:
    assert next_event(parse(spec), last) == expected


@pytest.mark.parametrize("spec", ["", "25:00", "*/0", "2026-01-01 00:00", "funday 02:00", "1 2 3"])
def test_calendar_refuses(spec: str) -> None:
    with pytest.raises(ValueError):
        parse(spec)


def test_destroying_a_replicated_guest_needs_purge(pve: EmulatorHandle, api: httpx.Client) -> None:
    """qemu-server's destroy refuses a guest with replication jobs unless `purge` removes them with it."""
    pve.state.guests[103].status = "stopped"
    resp = api.delete("/nodes/pve1/qemu/103")
    assert resp.status_code == 500
    assert resp.json()["message"].rstrip("\n") == (
        "There is a replication job '103-0' for guest '103' - Please remove that first."
    )
    assert 103 in pve.state.guests and "103-0" in pve.state.replication_jobs
    assert _data(api.delete("/nodes/pve1/qemu/103", params={"purge": 1})).startswith("UPID:pve1:")
    assert 103 not in pve.state.guests
    assert "103-0" not in pve.state.replication_jobs and 103 not in pve.state.replication_state
    assert [j["id"] for j in _data(api.get("/nodes/pve1/replication"))] == ["200-0"]
