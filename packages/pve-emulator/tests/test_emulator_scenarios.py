"""Scenarios seed coherent, deterministic models; the fixture plugin starts and stops emulators."""

from __future__ import annotations

import time

import httpx
from pve_emulator.config import DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET
from pve_emulator.mock.guests import disk_entries, guest_nics
from pve_emulator.mock.scenarios import build, large


def _large(n: int):
    return large(n, "root@pam", DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET)


def test_large_is_quick_deterministic_and_exact() -> None:
    started = time.perf_counter()
    state = _large(1000)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5, elapsed
    assert len(state.guests) == 1000
    assert {g.node for g in state.guests.values()} == {"pve1", "pve2", "pve3"}
    again = _large(1000)
    assert [(g.vmid, g.name, g.node, g.config) for g in state.guests.values()] == [
        (g.vmid, g.name, g.node, g.config) for g in again.guests.values()
    ]
    assert len({g.name for g in state.guests.values()}) == 1000
    ips: set[str] = set()
    for guest in state.guests.values():
        nics = guest_nics(guest)
        assert len(nics) == 2 and all(n[1]["bridge"].startswith("vmbr") for n in nics)
        assert len(disk_entries(guest)) == 2
        if guest.kind == "qemu":
            assert len(guest.guest_ips) == 1 and guest.config["agent"] == "1"
            ips.add(guest.guest_ips[0][1])
        else:
            assert guest.guest_ips == []
            addrs = [n[1]["ip"] for n in nics if n[1].get("ip") not in (None, "manual", "dhcp")]
            assert len(addrs) == 1
            ips.add(addrs[0].split("/")[0])
    assert len(ips) == 1000
    assert any("tag" in n[1] for g in state.guests.values() for n in guest_nics(g))


def test_demo_mix() -> None:
    state = build(
        "demo",
        vms=None,
        nodes=None,
        user="root@pam",
        password="p",
        token_id=DEFAULT_TOKEN_ID,
        token_secret=DEFAULT_TOKEN_SECRET,
    )
    kinds = [g.kind for g in state.guests.values()]
    assert kinds.count("qemu") == 20 and kinds.count("lxc") == 10
    assert len(state.nodes) == 3 and state.backup_jobs and state.replication_jobs
    assert any(v.content == "backup" for v in state.volumes.values())
    assert any(g.snapshots for g in state.guests.values())
    assert len({s for g in state.guests.values() for _, s, _, _ in disk_entries(g)}) >= 2


def test_factory_fixture_starts_large_scenario(pve_emulator_factory) -> None:
    pve = pve_emulator_factory(scenario="large", vms=30, user="admin@pve", password="s3cret-admin")
    assert pve.token_id == "admin@pve!hvsync" and pve.api_url.endswith("/api2/json")
    headers = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
    vms = httpx.get(pve.api_url + "/nodes/pve1/qemu", headers=headers, timeout=10).json()["data"]
    assert [vm["name"] for vm in vms][:2] == ["vm-00000", "vm-00003"]
    ips = httpx.get(
        pve.api_url + f"/nodes/pve1/qemu/{vms[0]['vmid']}/agent/network-get-interfaces",
        headers=headers,
        timeout=10,
    ).json()["data"]["result"]
    assert [a["ip-address"] for i in ips if i["name"] == "eth0" for a in i["ip-addresses"]] == ["10.128.0.10"]
    login = httpx.post(
        pve.api_url + "/access/ticket", data={"username": "admin@pve", "password": "s3cret-admin"}, timeout=10
    )
    assert login.status_code == 200
