"""GET /hv/cluster/firewall, /hv/cluster/options and /hv/templates: against the demo emulator, and with
MockTransport fakes for partial failures, unreadable bodies and secrets in guest configs."""

from __future__ import annotations

import httpx
from hvsync_backend.endpoints.service import HvTarget


def direct(emu, path: str):
    headers = {"Authorization": f"PVEAPIToken={emu.token_id}={emu.token_secret}"}
    r = httpx.get(emu.api_url + path, headers=headers, verify=emu.verify, timeout=5)
    r.raise_for_status()
    return r.json()["data"]


def add(c, auth, ip: str, name: str) -> int:
    body = {
        "name": name,
        "ip_address": ip,
        "port": 8006,
        "username": "root@pam",
        "token_name": "hvsync",
        "token_value": f"secret-{ip}",
        "max_retries": 0,
        "timeout": 2,
    }
    r = c.post("/hv/endpoints", headers=auth, json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


ROUTES = ("/hv/cluster/firewall", "/hv/cluster/options", "/hv/templates")


def emu_endpoint(c, auth, emu, name: str = "emu (inv:21)") -> int:
    user, token_name = emu.token_id.split("!", 1)
    r = c.post(
        "/hv/endpoints",
        headers=auth,
        json={
            "name": name,
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
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def only(r: httpx.Response, endpoint_id: int) -> dict:
    assert r.status_code == 200, r.text
    [entry] = [e for e in r.json()["endpoints"] if e["endpoint_id"] == endpoint_id]
    assert entry["ok"] is True and entry["error"] is None, entry
    return entry["data"]


def test_firewall_options_and_templates_from_demo_emulator(backend, auth, pve_emulator) -> None:
    emu, c = pve_emulator, backend.client
    eid = emu_endpoint(c, auth, emu)
    q = {"hv_endpoint_ids": str(eid)}

    fw = only(c.get("/hv/cluster/firewall", headers=auth, params=q), eid)
    assert set(fw) == {"options", "groups", "rules", "aliases", "ipsets"}
    assert fw["options"] == direct(emu, "/cluster/firewall/options") and fw["options"]["enable"] == 1
    assert [g["group"] for g in fw["groups"]] == ["mgmt", "web"]  # sorted, as pve-firewall lists groups
    web = next(g for g in fw["groups"] if g["group"] == "web")
    assert web["rules"] == direct(emu, "/cluster/firewall/groups/web")
    assert [r["dport"] for r in web["rules"]] == ["443", "80"]
    assert fw["rules"] == direct(emu, "/cluster/firewall/rules") and len(fw["rules"]) == 3
    assert {a["name"] for a in fw["aliases"]} == {"gateway", "monitoring"}
    assert [(s["name"], [e["cidr"] for e in s["entries"]]) for s in fw["ipsets"]] == [
        ("mgmt-nets", ["10.10.0.0/24", "192.168.100.0/24"])
    ]

    options = only(c.get("/hv/cluster/options", headers=auth, params=q), eid)
    assert options == direct(emu, "/cluster/options")
    assert options["keyboard"] == "en-us" and options["console"] == "html5"

    templates = only(c.get("/hv/templates", headers=auth, params=q), eid)
    expected = [
        r for r in direct(emu, "/cluster/resources?type=vm") if r.get("template") == 1
    ]  # the demo cluster's two QEMU templates
    assert [t["vmid"] for t in templates] == sorted(r["vmid"] for r in expected) == [118, 119]
    for t in templates:
        assert set(t) == {"node", "vmid", "type", "name", "config"}
        assert t["type"] == "qemu" and t["config"]["template"] == 1
        assert t["config"] == direct(emu, f"/nodes/{t['node']}/qemu/{t['vmid']}/config")
    assert [t["name"] for t in templates] == ["debian-13-template", "win11-template"]
    for route in ROUTES:
        assert emu.token_secret not in c.get(route, headers=auth).text


CLUSTER_A = {
    "/api2/json/cluster/firewall/options": {"enable": 0},
    "/api2/json/cluster/firewall/groups": [{"group": "g1", "digest": "d"}],
    "/api2/json/cluster/firewall/groups/g1": [{"pos": 0, "type": "in", "action": "DROP"}],
    "/api2/json/cluster/firewall/rules": [],
    "/api2/json/cluster/firewall/aliases": [],
    "/api2/json/cluster/firewall/ipset": [],
    "/api2/json/cluster/options": {"keyboard": "de"},
    "/api2/json/cluster/resources": [
        {"vmid": 900, "type": "lxc", "node": "a1", "template": 1, "name": "ct-tpl"},
        {"vmid": 100, "type": "qemu", "node": "a1", "template": 0, "name": "vm"},
        {"vmid": 901, "type": "qemu", "node": "a1", "template": 1, "name": "vm-tpl"},
    ],
    "/api2/json/nodes/a1/lxc/900/config": {"hostname": "ct-tpl", "template": 1, "password": "hunter22"},
    "/api2/json/nodes/a1/qemu/901/config": {
        "name": "vm-tpl",
        "template": 1,
        "cipassword": "s3cret-ci",
        "description": "uses secret-192.0.2.21 for x",
    },
}


def fake(target: HvTarget) -> httpx.AsyncBaseTransport:
    """192.0.2.21 answers CLUSTER_A; 192.0.2.22 refuses every firewall group read; others are down."""

    def handler(request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        if host == "192.0.2.22":
            if path.startswith("/api2/json/cluster/firewall/groups/"):
                return httpx.Response(403, json={"data": None, "message": "Permission check failed"})
            if path == "/api2/json/cluster/firewall/groups":
                return httpx.Response(200, json={"data": [{"group": "g1"}]})
            if path.endswith("/options"):
                return httpx.Response(200, json={"data": {}})
            if path == "/api2/json/cluster/resources":
                return httpx.Response(200, json={"data": {"not": "a list"}})
            return httpx.Response(200, json={"data": []})
        if host != "192.0.2.21":
            raise httpx.ConnectError("connection refused")
        if path not in CLUSTER_A:
            return httpx.Response(404, json={"data": None})
        return httpx.Response(200, json={"data": CLUSTER_A[path]})

    return httpx.MockTransport(handler)


def test_templates_include_containers_and_redact_config_secrets(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake
    c = backend.client
    a = add(c, auth, "192.0.2.21", "alpha (inv:1)")
    r = c.get("/hv/templates", headers=auth)
    assert only(r, a) == [
        {
            "node": "a1",
            "vmid": 900,
            "type": "lxc",
            "name": "ct-tpl",
            "config": {"hostname": "ct-tpl", "template": 1, "password": "[redacted]"},
        },
        {
            "node": "a1",
            "vmid": 901,
            "type": "qemu",
            "name": "vm-tpl",
            "config": {
                "name": "vm-tpl",
                "template": 1,
                "cipassword": "[redacted]",
                "description": "uses [redacted] for x",
            },
        },
    ]
    assert "hunter22" not in r.text and "s3cret-ci" not in r.text
    fw = only(c.get("/hv/cluster/firewall", headers=auth), a)
    assert fw["groups"] == [
        {"group": "g1", "digest": "d", "rules": [{"pos": 0, "type": "in", "action": "DROP"}]}
    ]
    assert only(c.get("/hv/cluster/options", headers=auth), a) == {"keyboard": "de"}


def test_one_failed_part_fails_only_that_endpoint(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake
    c = backend.client
    a = add(c, auth, "192.0.2.21", "alpha (inv:1)")
    b = add(c, auth, "192.0.2.22", "beta (inv:2)")
    r = c.get("/hv/cluster/firewall", headers=auth, params={"hv_endpoint_ids": f"{a},{b}"})
    assert r.status_code == 200
    by_id = {e["endpoint_id"]: e for e in r.json()["endpoints"]}
    assert by_id[a]["ok"] is True and by_id[a]["data"]["options"] == {"enable": 0}
    assert by_id[b]["ok"] is False and by_id[b]["data"] is None
    assert by_id[b]["error"]["kind"] == "auth" and by_id[b]["error"]["status"] == 403
    assert "beta (inv:2)" in by_id[b]["error"]["detail"]

    r = c.get("/hv/templates", headers=auth, params={"hv_endpoint_ids": str(b)})
    assert r.status_code == 502
    body = r.json()
    assert "beta (inv:2)" in body["detail"] and "expected a list" in body["detail"]
    assert body["endpoints"][0]["ok"] is False and body["endpoints"][0]["error"]["kind"] == "http"


def test_unreachable_and_validation(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake
    c = backend.client
    dead = add(c, auth, "192.0.2.99", "dead (inv:9)")
    for route in ROUTES:
        r = c.get(route, headers=auth)
        assert r.status_code == 502, route
        assert r.json()["endpoints"][0]["error"]["kind"] == "unreachable"
        assert "dead (inv:9)" in r.json()["detail"] and "secret-192.0.2.99" not in r.text
        assert c.get(route, headers=auth, params={"hv_endpoint_ids": "x"}).json()["detail"][0]["loc"] == [
            "query",
            "hv_endpoint_ids",
        ]
        assert c.get(route, headers=auth, params={"hv_endpoint_ids": str(dead + 50)}).status_code == 404
        assert c.get(route).status_code == 401
