"""Faults on demand: the model (in-process), the control API, and each fault as a client sees it.

One emulator with a control secret serves the module; every test sets its faults through the control
API (or the handle, in-process) and clears them at the end, so the tests stay independent and fast.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.cli import main as cli_main
from pve_emulator.config import EmulatorConfig
from pve_emulator.errors import ParameterError
from pve_emulator.mock.faults import Faults, merge_cli_faults, parse_cli_fault
from pve_emulator.server import create_app
from pve_emulator.testing import EmulatorHandle, running_emulator

SECRET = "fault-control-secret"


@pytest.fixture(scope="module")
def pve() -> Iterator[EmulatorHandle]:
    with running_emulator(control_secret=SECRET, task_duration=0.05) as handle:
        yield handle


@pytest.fixture
def api(pve: EmulatorHandle) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=pve.api_url,
        timeout=10,
        headers={"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"},
    ) as client:
        yield client


@pytest.fixture
def control(pve: EmulatorHandle) -> Iterator[httpx.Client]:
    """The control API, faults cleared after the test whatever it left."""
    with httpx.Client(
        base_url=pve.url + "/_emulator/faults", timeout=10, headers={"X-PVE-Emulator-Secret": SECRET}
    ) as client:
        yield client
        assert client.delete("").status_code == 200


def _data(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def _model() -> Faults:
    return Faults(create_app(EmulatorConfig(response_cache=False)).backend.state, seed=7)


# --- the model, in-process ------------------------------------------------------------------------


def test_a_bad_setting_is_a_400_naming_the_field_and_changes_nothing() -> None:
    faults = _model()
    faults.update({"drop_rate": 0.5})
    for settings, field in [
        ({"drop_rate": 0.1, "nodes_offline": ["pve2"]}, "nodes_offline"),
        ({"drop_rate": 0.1, "node_offline": ["pve9"]}, "node_offline"),
        ({"drop_rate": 0.1, "locked": {"100": "holiday"}}, "locked"),
        ({"drop_rate": 0.1, "locked": {"999": "backup"}}, "locked"),
        ({"drop_rate": 0.1, "storage_unavailable": ["tape"]}, "storage_unavailable"),
        ({"drop_rate": 2}, "drop_rate"),
        ({"drop_rate": 0.1, "latency": {"nodes/*": 1}}, "latency"),
        ({"drop_rate": 0.1, "task_error": {"vzdump": ""}}, "task_error"),
    ]:
        with pytest.raises(ParameterError) as caught:
            faults.update(settings)
        assert [e.field for e in caught.value.errors] == [field]
    assert faults.drop_rate == 0.5 and not faults.offline and not faults.locked


def test_latency_patterns_match_segments_and_jitter_repeats_with_the_seed() -> None:
    faults = _model()
    faults.update({"latency": {"/nodes/*/qemu/*/config": [1.0, 0.5], "/cluster/**": 0.25}})
    first = [faults.delay("/nodes/pve1/qemu/100/config") for _ in range(5)]
    assert all(1.0 <= d <= 1.5 for d in first) and len(set(first)) > 1
    assert faults.delay("/nodes/pve1/qemu/100/status/current") == 0.0  # `*` is one segment
    assert faults.delay("/nodes/pve1/qemu") == 0.0
    assert faults.delay("/cluster/ha/resources") == 0.25  # `**` crosses segments
    again = _model()
    again.update({"latency": {"/nodes/*/qemu/*/config": [1.0, 0.5]}})
    assert [again.delay("/nodes/pve1/qemu/100/config") for _ in range(5)] == first


def test_drops_happen_at_the_rate_and_repeat_with_the_seed() -> None:
    faults = _model()
    faults.update({"drop_rate": 0.25})
    draws = [faults.drop() for _ in range(2000)]
    assert 400 < sum(draws) < 600
    again = _model()
    again.update({"drop_rate": 0.25})
    assert [again.drop() for _ in range(2000)] == draws


def test_cli_fault_options_parse_into_one_update() -> None:
    assert parse_cli_fault("no-quorum") == ("no_quorum", True)
    merged = merge_cli_faults(
        [
            "node-offline=pve2",
            "node_offline=pve3",
            "latency=/nodes/*/qemu/*/config:2.0~0.5",
            "latency=/cluster/resources:0.1",
            "locked=101:backup",
            "task-error=vzdump:backup storage full: no space left",
            "time-scale=0.1",
        ]
    )
    assert merged == {
        "node_offline": "pve2,pve3",
        "latency": {"/nodes/*/qemu/*/config": ["2.0", "0.5"], "/cluster/resources": "0.1"},
        "locked": {"101": "backup"},
        "task_error": {"vzdump": "backup storage full: no space left"},
        "time_scale": "0.1",
    }
    faults = _model()
    faults.update(merged)
    assert faults.offline == {"pve2", "pve3"} and faults.locked == {101: "backup"}
    for bad in ("nodes-offline=pve2", "latency=2.0", "locked=101", "drop-rate"):
        with pytest.raises(ValueError):
            merge_cli_faults([bad])


def test_cli_refuses_a_bad_fault_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for flags, text in [
        (["--fault", "node-offline=pve9"], "node_offline: no node 'pve9'"),
        (["--fault", "meteor=1"], "unknown fault 'meteor'"),
        (["--fault", "drop-rate=0.5", "--mode", "real"], "--fault is mock mode's"),
    ]:
        with pytest.raises(SystemExit) as exited:
            cli_main(["serve", "--port", "0", *flags])
        assert exited.value.code == 2
        assert text in capsys.readouterr().err


# --- the control API -------------------------------------------------------------------------------


def test_control_api_needs_its_secret(pve: EmulatorHandle) -> None:
    url = pve.url + "/_emulator/faults"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"X-PVE-Emulator-Secret": "guess"}).status_code == 403
    # the API's own credentials are not the control secret
    token = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
    assert httpx.get(url, headers=token).status_code == 401
    assert pve.faults["node_offline"] == []


def test_control_api_is_a_404_when_the_emulator_runs_without_a_secret() -> None:
    with running_emulator() as plain:
        for method in ("GET", "POST", "DELETE"):
            resp = httpx.request(
                method, plain.url + "/_emulator/faults", headers={"X-PVE-Emulator-Secret": "x"}
            )
            assert resp.status_code == 404
        assert plain.app.fault_gate is None


def test_control_api_sets_merges_replaces_and_clears(control: httpx.Client) -> None:
    assert _data(control.get(""))["drop_rate"] == 0
    set_ = _data(control.post("", json={"no_quorum": True, "locked": {"100": "backup"}}))
    assert set_["no_quorum"] is True and set_["locked"] == {"100": "backup"}
    merged = _data(control.post("", json={"time_scale": 0.5}))
    assert merged["no_quorum"] is True and merged["time_scale"] == 0.5
    replaced = _data(control.put("", json={"storage_unavailable": ["nfs-backup"]}))
    assert replaced["no_quorum"] is False and replaced["locked"] == {} and replaced["time_scale"] == 1.0
    assert replaced["storage_unavailable"] == ["nfs-backup"]
    bad = control.post("", json={"node_offline": ["pve7"]})
    assert bad.status_code == 400
    assert bad.json()["errors"] == [{"field": "node_offline", "message": "no node 'pve7'"}]
    assert _data(control.get(""))["node_offline"] == []
    assert control.post("", content=b"{", headers={"content-type": "application/json"}).status_code == 400
    cleared = _data(control.delete(""))
    assert cleared["storage_unavailable"] == []


# --- each fault as a client sees it -----------------------------------------------------------------


def test_node_offline_answers_595_after_the_connect_delay_and_shows_offline(
    control: httpx.Client, api: httpx.Client
) -> None:
    _data(control.post("", json={"node_offline": ["pve2"], "connect_delay": 0.3}))
    started = time.perf_counter()
    down = api.get("/nodes/pve2/qemu/101/config")
    assert down.status_code == 595 and time.perf_counter() - started >= 0.3
    assert "no route to host" in down.reason_phrase + down.text
    started = time.perf_counter()
    assert api.get("/nodes/pve1/qemu/100/config").status_code == 200
    assert time.perf_counter() - started < 0.3  # the other nodes answer at once
    status = {e["name"]: e for e in _data(api.get("/cluster/status")) if e["type"] == "node"}
    assert status["pve2"]["online"] == 0 and status["pve1"]["online"] == 1
    assert {n["node"]: n["status"] for n in _data(api.get("/nodes"))}["pve2"] == "offline"
    resources = _data(api.get("/cluster/resources"))
    node = next(r for r in resources if r["id"] == "node/pve2")
    assert node["status"] == "offline" and "cpu" not in node
    guests = [r for r in resources if r["type"] in ("qemu", "lxc") and r["node"] == "pve2"]
    assert guests and {g["status"] for g in guests} == {"unknown"}
    assert {g["status"] for g in resources if g["type"] == "qemu" and g["node"] == "pve1"} <= {
        "running",
        "stopped",
    }
    _data(control.post("", json={"node_offline": []}))
    assert api.get("/nodes/pve2/qemu/101/config").status_code == 200


def test_lost_quorum_fails_writes_as_proxmox_and_reads_still_work(
    pve: EmulatorHandle, control: httpx.Client, api: httpx.Client
) -> None:
    _data(control.post("", json={"no_quorum": True}))
    refused = api.put("/nodes/pve1/qemu/100/config", data={"description": "x"})
    assert refused.status_code == 500 and refused.json()["message"] == "cluster not ready - no quorum?\n"
    assert api.post("/nodes/pve1/qemu/100/status/start").status_code == 500
    assert "description" not in _data(api.get("/nodes/pve1/qemu/100/config"))
    cluster = next(e for e in _data(api.get("/cluster/status")) if e["type"] == "cluster")
    assert cluster["quorate"] == 0
    login = httpx.post(pve.api_url + "/access/ticket", data={"username": pve.user, "password": pve.password})
    assert login.status_code == 200  # logging in needs no quorum
    _data(control.delete(""))
    assert next(e for e in _data(api.get("/cluster/status")) if e["type"] == "cluster")["quorate"] == 1


def test_tickets_expire_after_the_configured_lifetime(pve: EmulatorHandle, control: httpx.Client) -> None:
    _data(control.post("", json={"ticket_lifetime": 30}))
    login = _data(
        httpx.post(pve.api_url + "/access/ticket", data={"username": pve.user, "password": pve.password})
    )
    cookies = {"PVEAuthCookie": login["ticket"]}
    assert httpx.get(pve.api_url + "/nodes", cookies=cookies).status_code == 200
    pve.clock.advance(31)
    try:
        expired = httpx.get(pve.api_url + "/nodes", cookies=cookies)
        assert expired.status_code == 401
        fresh = _data(
            httpx.post(pve.api_url + "/access/ticket", data={"username": pve.user, "password": pve.password})
        )
        assert (
            httpx.get(pve.api_url + "/nodes", cookies={"PVEAuthCookie": fresh["ticket"]}).status_code == 200
        )
        _data(control.delete(""))
        assert httpx.get(pve.api_url + "/nodes", cookies=cookies).status_code == 200  # PVE's two hours again
    finally:
        pve.clock.reset()


def test_latency_holds_matching_routes_only(control: httpx.Client, api: httpx.Client) -> None:
    _data(control.post("", json={"latency": {"/nodes/*/qemu/*/config": 0.4}}))
    started = time.perf_counter()
    assert api.get("/nodes/pve1/qemu/100/config").status_code == 200
    assert time.perf_counter() - started >= 0.4
    started = time.perf_counter()
    assert api.get("/nodes/pve1/qemu").status_code == 200
    assert time.perf_counter() - started < 0.4


def test_dropped_connections_get_no_answer(control: httpx.Client, api: httpx.Client) -> None:
    _data(control.post("", json={"drop_rate": 1}))
    with pytest.raises(httpx.TransportError):
        api.get("/nodes")
    _data(control.post("", json={"drop_rate": 0}))
    assert api.get("/nodes").status_code == 200


def test_a_locked_guest_shows_its_lock_and_refuses_writes(control: httpx.Client, api: httpx.Client) -> None:
    _data(control.post("", json={"locked": {"103": "backup"}}))
    assert _data(api.get("/nodes/pve1/qemu/103/config"))["lock"] == "backup"
    assert _data(api.get("/nodes/pve1/qemu/103/status/current"))["lock"] == "backup"
    listed = next(r for r in _data(api.get("/cluster/resources", params={"type": "vm"})) if r["vmid"] == 103)
    assert listed["lock"] == "backup"
    refused = api.put("/nodes/pve1/qemu/103/config", data={"description": "x"})
    assert refused.status_code == 500 and refused.json()["message"] == "VM is locked (backup)\n"
    _data(control.post("", json={"locked": {}}))
    assert "lock" not in _data(api.get("/nodes/pve1/qemu/103/config"))


def _wait_task(api: httpx.Client, node: str, upid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        status = _data(api.get(f"/nodes/{node}/tasks/{upid}/status"))
        if status["status"] == "stopped" or time.monotonic() > deadline:
            return status
        time.sleep(0.02)


def test_a_task_ends_in_task_error_with_the_message(control: httpx.Client, api: httpx.Client) -> None:
    _data(control.post("", json={"task_error": {"vzdump": "backup storage full"}}))
    upid = _data(api.post("/nodes/pve1/vzdump", data={"vmid": "100", "storage": "nfs-backup"}))
    status = _wait_task(api, "pve1", upid)
    assert status["status"] == "stopped" and status["exitstatus"] == "backup storage full"
    log = _data(api.get(f"/nodes/pve1/tasks/{upid}/log"))
    assert log[-1]["t"] == "TASK ERROR: backup storage full"
    errors = _data(api.get("/nodes/pve1/tasks", params={"errors": 1, "typefilter": "vzdump"}))
    assert upid in [t["upid"] for t in errors]
    other = _data(api.post("/nodes/pve1/qemu/106/status/suspend"))  # another task type is unaffected
    assert _wait_task(api, "pve1", other)["exitstatus"] == "OK"


def test_an_unavailable_storage_is_inactive_and_its_content_fails(
    control: httpx.Client, api: httpx.Client
) -> None:
    _data(control.post("", json={"storage_unavailable": ["nfs-backup"]}))
    listed = {s["storage"]: s for s in _data(api.get("/nodes/pve1/storage"))}
    assert listed["nfs-backup"]["active"] == 0 and listed["nfs-backup"]["total"] == 0
    assert listed["local"]["active"] == 1
    assert _data(api.get("/nodes/pve1/storage/nfs-backup/status"))["active"] == 0
    content = api.get("/nodes/pve1/storage/nfs-backup/content")
    assert content.status_code == 500 and content.json()["message"] == "storage 'nfs-backup' is not online\n"
    assert api.get("/nodes/pve1/storage/local/content").status_code == 200
    entry = next(r for r in _data(api.get("/cluster/resources")) if r["id"] == "storage/pve1/nfs-backup")
    assert entry["status"] == "unknown" and "disk" not in entry


def test_time_scale_stretches_and_shrinks_task_durations(
    pve: EmulatorHandle, control: httpx.Client, api: httpx.Client
) -> None:
    _data(control.post("", json={"time_scale": 100}))
    upid = _data(api.post("/nodes/pve1/qemu/106/status/suspend"))
    assert pve.state.tasks[upid].duration == pytest.approx(0.05 * 100)
    assert _data(api.get(f"/nodes/pve1/tasks/{upid}/status"))["status"] == "running"
    _data(control.post("", json={"time_scale": 0}))
    upid = _data(api.post("/nodes/pve1/qemu/106/status/resume"))
    assert _data(api.get(f"/nodes/pve1/tasks/{upid}/status"))["status"] == "stopped"


def test_handle_sets_faults_in_process_without_the_control_api() -> None:
    with running_emulator() as plain:
        assert plain.faults is None
        assert plain.set_faults(node_offline=["pve3"])["node_offline"] == ["pve3"]
        with httpx.Client(
            base_url=plain.api_url,
            headers={"Authorization": f"PVEAPIToken={plain.token_id}={plain.token_secret}"},
        ) as client:
            assert client.get("/nodes/pve3/status").status_code == 595
            assert httpx.get(plain.url + "/_emulator/faults").status_code == 404  # still no control API
            plain.clear_faults()
            assert client.get("/nodes/pve3/status").status_code == 200


def test_the_cli_starts_with_faults_and_serves_the_control_api_with_the_secret_from_the_environment() -> None:
    """``pve-emulator serve --fault ...``: the faults hold from the first request; the secret may come from
    ``PVE_EMULATOR_CONTROL_SECRET`` so it stays out of the process list."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "pve_emulator", "serve", "--port", str(port)]
    cmd += ["--fault", "node-offline=pve2", "--fault", "locked=100:snapshot", "--fault", "seed=3"]
    env = {**os.environ, "PVE_EMULATOR_CONTROL_SECRET": SECRET}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}"
    token = {"Authorization": "PVEAPIToken=root@pam!hvsync=5f0c8a52-3b1e-4d6f-9a7c-2e8b1d4f6a90"}
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                listed = httpx.get(
                    url + "/_emulator/faults", headers={"X-PVE-Emulator-Secret": SECRET}, timeout=2
                )
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "emulator did not start"
                time.sleep(0.05)
        assert _data(listed)["node_offline"] == ["pve2"] and _data(listed)["seed"] == 3
        assert _data(listed)["locked"] == {"100": "snapshot"}
        assert httpx.get(url + "/api2/json/nodes/pve2/status", headers=token).status_code == 595
        config = _data(httpx.get(url + "/api2/json/nodes/pve1/qemu/100/config", headers=token))
        assert config["lock"] == "snapshot"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
