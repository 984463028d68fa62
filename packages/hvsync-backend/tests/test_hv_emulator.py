"""The Proxmox client and the hv read routes against the real emulator (packages/pve-emulator)."""

from __future__ import annotations

import httpx
import pytest
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.hv.errors import ProxmoxAuthError, ProxmoxUnreachable
from stage_harness import emu_target

STABLE = ("node", "name", "id", "type", "status", "maxcpu", "maxmem", "nodeid", "online", "quorate")


def stable(items: list[dict]) -> list[dict]:
    """The parts of Proxmox lists that do not move between two reads (uptime, cpu and mem do)."""
    return [{k: v for k, v in item.items() if k in STABLE} for item in items]


def direct(emu, path: str):
    headers = {"Authorization": f"PVEAPIToken={emu.token_id}={emu.token_secret}"}
    r = httpx.get(emu.api_url + path, headers=headers, verify=emu.verify, timeout=5)
    r.raise_for_status()
    return r.json()["data"]


@pytest.mark.parametrize("methods", [("token",), ("password",)])
async def test_client_reads_emulator(pve_emulator, methods) -> None:
    async with ProxmoxClient(emu_target(pve_emulator, methods)) as c:
        nodes = await c.get("/nodes")
        status = await c.get("/cluster/status")
        version = await c.get("/version")
    assert stable(nodes) == stable(direct(pve_emulator, "/nodes")) and len(nodes) >= 1
    assert {n["node"] for n in nodes} == {s["name"] for s in status if s["type"] == "node"}
    assert "version" in version


async def test_ticket_write_needs_csrf_and_works(pve_emulator_factory) -> None:
    emu = pve_emulator_factory(scenario="demo")
    async with ProxmoxClient(emu_target(emu, ("password",))) as c:
        node = (await c.get("/nodes"))[0]["node"]
        pools_before = {p["poolid"] for p in await c.get("/pools")}
        await c.post("/pools", data={"poolid": "hvsync-test"})
        pools_after = {p["poolid"] for p in await c.get("/pools")}
    assert pools_after - pools_before == {"hvsync-test"} and node


async def test_wrong_credentials_are_auth_errors(pve_emulator) -> None:
    for methods, kw in (
        (("token",), {"token_value": "wrong-secret"}),
        (("password",), {"password": "wrong-pw"}),
    ):
        async with ProxmoxClient(emu_target(pve_emulator, methods, **kw)) as c:
            with pytest.raises(ProxmoxAuthError) as info:
                await c.get("/nodes")
        assert "emu (inv:1)" in str(info.value) and "wrong-" not in str(info.value)


async def test_unreachable_endpoint_named(pve_emulator) -> None:
    target = emu_target(pve_emulator, max_retries=0, api_url="http://127.0.0.1:9/api2/json", port=9)
    async with ProxmoxClient(target) as c:
        with pytest.raises(ProxmoxUnreachable) as info:
            await c.get("/nodes")
    assert "emu (inv:1)" in str(info.value) and pve_emulator.token_secret not in str(info.value)


def test_routes_read_emulator_and_name_the_unreachable_one(backend, auth, pve_emulator) -> None:
    emu = pve_emulator
    user, token_name = emu.token_id.split("!", 1)
    c = backend.client
    good = c.post(
        "/hv/endpoints",
        headers=auth,
        json={
            "name": "emu (inv:11)",
            "ip_address": emu.host,
            "port": emu.port,
            "scheme": emu.url.split(":")[0],
            "verify_ssl": emu.verify,
            "username": user,
            "token_name": token_name,
            "token_value": emu.token_secret,
            "access_methods": ["token"],
            "timeout": 5,
            "max_retries": 0,
        },
    ).json()
    pw = c.post(
        "/hv/endpoints",
        headers=auth,
        json={
            "name": "emu-pw (inv:12)",
            "ip_address": emu.host,
            "port": emu.port,
            "scheme": emu.url.split(":")[0],
            "verify_ssl": emu.verify,
            "username": emu.user,
            "password": emu.password,
            "timeout": 5,
        },
    ).json()
    dead = c.post(
        "/hv/endpoints",
        headers=auth,
        json={
            "name": "dead (inv:13)",
            "ip_address": "127.0.0.1",
            "port": 9,
            "scheme": "http",
            "username": user,
            "token_name": token_name,
            "token_value": emu.token_secret,
            "timeout": 2,
            "max_retries": 0,
        },
    ).json()

    r = c.get("/hv/nodes/", headers=auth, params={"hv_endpoint_ids": f"{good['id']},{pw['id']}"})
    assert r.status_code == 200
    expected = stable(direct(emu, "/nodes"))
    assert [stable(e["data"]) for e in r.json()["endpoints"]] == [expected, expected]
    assert all(n["node"] and "maxcpu" in n for n in r.json()["endpoints"][0]["data"])

    r = c.get("/hv/cluster/status", headers=auth)
    assert r.status_code == 200
    by_id = {e["endpoint_id"]: e for e in r.json()["endpoints"]}
    assert stable(by_id[good["id"]]["data"]) == stable(direct(emu, "/cluster/status"))
    assert by_id[dead["id"]]["ok"] is False
    assert (
        "dead (inv:13)" in by_id[dead["id"]]["error"]["detail"]
        and by_id[dead["id"]]["error"]["kind"] == "unreachable"
    )

    r = c.get("/hv/cluster/status", headers=auth, params={"hv_endpoint_ids": str(dead["id"])})
    assert r.status_code == 502 and "dead (inv:13)" in r.json()["detail"]
    assert emu.token_secret not in r.text and emu.password not in r.text
