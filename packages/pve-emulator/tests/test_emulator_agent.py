"""The QEMU guest agent (``/nodes/{node}/qemu/{vmid}/agent/*``) as qemu-server relays it: answers
derived from the VM's config and scenario, state that sticks (files, processes, fsfreeze), and
Proxmox's 500s when the agent cannot be asked."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from in_process import InProcess
from pve_emulator.mock.guests.common import guest_nics

BASE = "/nodes/{node}/qemu/{vmid}/agent"


@pytest.fixture(scope="module")
def pve() -> Iterator[InProcess]:
    emulator = InProcess()
    yield emulator
    emulator.close()


def vm(pve: InProcess, *, ostype: str = "l26", agent: str = "1", status: str = "running") -> Any:
    """A demo VM of that kind (the scenario has running Linux and Windows VMs with and without agent)."""
    return next(
        g
        for g in sorted(pve.state.guests.values(), key=lambda g: g.vmid)
        if g.kind == "qemu"
        and g.status == status
        and g.config.get("ostype") == ostype
        and g.config.get("agent") == agent
        and not g.is_template
    )


def agent_url(guest: Any, command: str = "") -> str:
    return BASE.format(node=guest.node, vmid=guest.vmid) + (f"/{command}" if command else "")


def result(pve: InProcess, guest: Any, command: str, method: str = "GET", **kwargs: Any) -> Any:
    answer = pve.request(method, agent_url(guest, command), **kwargs)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["result"]


def agent_operations(pve: InProcess) -> list[Any]:
    return [op for op in pve.app.schema.operations if op.path.startswith(BASE + "/")]


def test_info_lists_version_and_supported_commands(pve: InProcess) -> None:
    info = result(pve, vm(pve), "info")
    assert info["version"]
    names = {c["name"] for c in info["supported_commands"]}
    # every command the API relays is one the agent says it supports
    relayed = {"guest-" + op.path.rsplit("/", 1)[1] for op in agent_operations(pve)}
    assert relayed - {"guest-file-read", "guest-file-write"} <= names
    assert all(c["enabled"] for c in info["supported_commands"])


def test_every_relayed_command_answers_a_result(pve: InProcess) -> None:
    guest = vm(pve)
    plain = [
        op
        for op in agent_operations(pve)
        if not (set(op.params) - {"node", "vmid"})
        and op.path.rsplit("/", 1)[1] not in ("shutdown", "suspend-disk", "suspend-ram", "suspend-hybrid")
    ]
    assert len(plain) >= 16
    for op in plain:
        answer = pve.request(op.method, agent_url(guest, op.path.rsplit("/", 1)[1]))
        assert answer.status_code == 200, (op.key, answer.text)
        assert set(answer.json()["data"]) == {"result"}, op.key
    legacy = pve.post(agent_url(guest), data={"command": "get-host-name"})
    assert legacy.json()["data"] == {"result": {"host-name": guest.name}}


def test_network_interfaces_follow_the_nics_and_the_scenarios_addresses(pve: InProcess) -> None:
    guest = next(
        g for g in pve.state.guests.values() if g.kind == "qemu" and "net1" in g.config and g.guest_ips
    )
    ifaces = result(pve, guest, "network-get-interfaces")
    assert ifaces[0]["name"] == "lo"
    nics = ifaces[1:]
    assert [i["hardware-address"] for i in nics] == [nic["macaddr"].lower() for _, nic in guest_nics(guest)]
    reported = {(i["name"], a["ip-address"], a["prefix"]) for i in nics for a in i["ip-addresses"]}
    assert reported == set(guest.guest_ips)
    resources = pve.get("/cluster/resources", params={"type": "vm"}).json()["data"]
    entry = next(r for r in resources if r["vmid"] == guest.vmid)
    assert sum(i["statistics"]["rx-bytes"] for i in nics) == entry["netin"]
    assert sum(i["statistics"]["tx-bytes"] for i in nics) == entry["netout"]


def test_osinfo_and_host_name_follow_ostype(pve: InProcess) -> None:
    linux, windows = vm(pve), vm(pve, ostype="win11")
    assert result(pve, linux, "get-osinfo")["id"] == "debian"
    osinfo = result(pve, windows, "get-osinfo")
    assert osinfo["id"] == "mswindows" and "Windows 11" in osinfo["pretty-name"]
    assert result(pve, linux, "get-host-name") == {"host-name": linux.name}
    assert result(pve, windows, "get-host-name")["host-name"].lower() == windows.name.lower()
    refused = pve.get(agent_url(windows, "get-memory-blocks"))
    assert refused.status_code == 500
    assert refused.json()["message"] == (
        f"VM {windows.vmid} qga command 'guest-get-memory-blocks' failed - "
        "this feature or command is not currently supported\n"
    )


def test_fsinfo_vcpus_memory_and_time_follow_the_config(pve: InProcess) -> None:
    guest = next(
        g
        for g in pve.state.guests.values()
        if g.kind == "qemu" and "scsi1" in g.config and g.status == "running"
    )
    filesystems = result(pve, guest, "get-fsinfo")
    assert [fs["disk"][0]["serial"] for fs in filesystems] == ["drive-scsi0", "drive-scsi1"]
    assert filesystems[0]["mountpoint"] == "/"
    assert all(0 < fs["used-bytes"] < fs["total-bytes"] for fs in filesystems)
    cores = int(guest.config["cores"]) * int(guest.config["sockets"])
    assert [c["logical-id"] for c in result(pve, guest, "get-vcpus")] == list(range(cores))
    blocks = result(pve, guest, "get-memory-blocks")
    size = result(pve, guest, "get-memory-block-info")["size"]
    assert len(blocks) * size == int(guest.config["memory"]) * 1024**2
    now = pve.clock.now()
    assert abs(result(pve, guest, "get-time") / 1e9 - now) < 5
    assert result(pve, guest, "get-timezone") == {"zone": "UTC", "offset": 0}
    assert result(pve, guest, "get-users")[0]["user"] == "root"


def test_exec_runs_until_exited_and_reports_once(pve: InProcess) -> None:
    guest = vm(pve)
    started = pve.post(agent_url(guest, "exec"), json={"command": ["sh", "-c", "echo hello world"]})
    pid = started.json()["data"]["pid"]
    assert isinstance(pid, int)
    status = pve.get(agent_url(guest, "exec-status"), params={"pid": pid}).json()["data"]
    assert status == {"exited": 1, "exitcode": 0, "out-data": "hello world\n"}
    again = pve.get(agent_url(guest, "exec-status"), params={"pid": pid})
    assert again.status_code == 500
    assert (
        again.json()["message"]
        == f"VM {guest.vmid} qga command 'guest-exec-status' failed - Invalid parameter 'pid'\n"
    )


def test_exec_follows_the_emulator_clock_and_exit_codes(pve: InProcess) -> None:
    guest = vm(pve)
    sleeper = pve.post(agent_url(guest, "exec"), json={"command": ["sleep", "30"]}).json()["data"]["pid"]
    failing = pve.post(agent_url(guest, "exec"), json={"command": ["false"]}).json()["data"]["pid"]
    stdin = pve.post(agent_url(guest, "exec"), json={"command": ["cat"], "input-data": "piped"}).json()[
        "data"
    ]["pid"]
    assert pve.get(agent_url(guest, "exec-status"), params={"pid": sleeper}).json()["data"] == {"exited": 0}
    assert pve.get(agent_url(guest, "exec-status"), params={"pid": failing}).json()["data"] == {
        "exited": 1,
        "exitcode": 1,
    }
    assert (
        pve.get(agent_url(guest, "exec-status"), params={"pid": stdin}).json()["data"]["out-data"] == "piped"
    )
    pve.clock.advance(31)
    try:
        done = pve.get(agent_url(guest, "exec-status"), params={"pid": sleeper}).json()["data"]
    finally:
        pve.clock.advance(-31)
    assert done == {"exited": 1, "exitcode": 0}


def test_files_written_are_read_back(pve: InProcess) -> None:
    guest = vm(pve)
    written = pve.post(agent_url(guest, "file-write"), data={"file": "/etc/motd", "content": "welcome\n"})
    assert written.status_code == 200 and written.json()["data"] is None
    read = pve.get(agent_url(guest, "file-read"), params={"file": "/etc/motd"}).json()["data"]
    assert read == {"content": "welcome\n", "bytes-read": 8}
    raw = base64.b64encode(b"pre-encoded").decode()
    pve.post(agent_url(guest, "file-write"), data={"file": "/tmp/b", "content": raw, "encode": 0})
    assert (
        pve.get(agent_url(guest, "file-read"), params={"file": "/tmp/b"}).json()["data"]["content"]
        == "pre-encoded"
    )
    catted = pve.post(agent_url(guest, "exec"), json={"command": ["cat", "/etc/motd"]}).json()["data"]["pid"]
    assert (
        pve.get(agent_url(guest, "exec-status"), params={"pid": catted}).json()["data"]["out-data"]
        == "welcome\n"
    )
    hostname = pve.get(agent_url(guest, "file-read"), params={"file": "/etc/hostname"}).json()["data"]
    assert hostname["content"] == f"{guest.name}\n"
    missing = pve.get(agent_url(guest, "file-read"), params={"file": "/nope"})
    assert missing.status_code == 500
    assert "failed to open file '/nope' (mode: 'r'): No such file or directory" in missing.json()["message"]


def test_fsfreeze_keeps_its_state_and_blocks_other_commands(pve: InProcess) -> None:
    guest = vm(pve)
    assert result(pve, guest, "fsfreeze-status", "POST") == "thawed"
    mounted = len(result(pve, guest, "get-fsinfo"))
    frozen = result(pve, guest, "fsfreeze-freeze", "POST")
    assert frozen == mounted >= 1
    assert result(pve, guest, "fsfreeze-status", "POST") == "frozen"
    blocked = pve.get(agent_url(guest, "get-osinfo"))
    assert blocked.status_code == 500
    assert blocked.json()["message"].endswith(
        "Command guest-get-osinfo has been disabled: the agent is in frozen state\n"
    )
    disabled = {c["name"] for c in result(pve, guest, "info")["supported_commands"] if not c["enabled"]}
    assert "guest-get-osinfo" in disabled and "guest-fsfreeze-thaw" not in disabled
    assert result(pve, guest, "fsfreeze-thaw", "POST") == frozen
    assert result(pve, guest, "fsfreeze-status", "POST") == "thawed"
    assert result(pve, guest, "fsfreeze-thaw", "POST") == 0


def test_an_agent_that_cannot_be_asked_answers_proxmoxs_500(pve: InProcess) -> None:
    """assert_agent_available, in its order: no ``agent`` key, VM not running, agent not answering."""
    stopped, silent = vm(pve, status="stopped"), vm(pve, agent="0")
    unconfigured = next(
        g for g in pve.state.guests.values() if g.kind == "qemu" and g.status == "running" and g is not silent
    )
    saved = unconfigured.config.pop("agent")
    try:
        cases = [
            (unconfigured, "No QEMU guest agent configured\n"),
            (stopped, f"VM {stopped.vmid} is not running\n"),
            (silent, "QEMU guest agent is not running\n"),
        ]
        for guest, message in cases:
            for op in agent_operations(pve):
                params = (
                    {"pid": 1}
                    if "pid" in op.params
                    else {"file": "/etc/hostname"}
                    if "file" in op.params
                    else {}
                )
                body = {
                    "command": ["true"],
                    "content": "x",
                    "username": "root",
                    "password": "secret-password",
                }
                body = {k: v for k, v in body.items() if k in op.params} | (
                    params if op.method == "POST" else {}
                )
                answer = pve.request(
                    op.method,
                    agent_url(guest, op.path.rsplit("/", 1)[1]),
                    params=params if op.method == "GET" else None,
                    json=body if op.method == "POST" else None,
                )
                assert (answer.status_code, answer.json()["message"]) == (500, message), op.key
    finally:
        unconfigured.config["agent"] = saved


def test_agent_shutdown_stops_the_vm(pve: InProcess) -> None:
    guest = vm(pve)
    try:
        assert result(pve, guest, "shutdown", "POST") is None
        assert (
            pve.get(f"/nodes/{guest.node}/qemu/{guest.vmid}/status/current").json()["data"]["status"]
            == "stopped"
        )
    finally:
        guest.status, guest.started = "running", pve.clock.now() - 3600
