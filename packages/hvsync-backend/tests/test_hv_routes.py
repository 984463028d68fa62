"""GET /hv/cluster/status and /hv/nodes/ through stored endpoints (network replaced by MockTransport fakes)."""

from __future__ import annotations

import httpx
from hvsync_backend.endpoints.service import HvTarget

CLUSTERS = {
    "192.0.2.21": {
        "cluster": [
            {"type": "cluster", "name": "alpha", "nodes": 1, "quorate": 1},
            {"type": "node", "name": "a1", "online": 1, "nodeid": 1},
        ],
        "nodes": [{"node": "a1", "status": "online", "maxcpu": 8}],
    },
    "192.0.2.22": {
        "cluster": [
            {"type": "cluster", "name": "beta", "nodes": 1, "quorate": 1},
            {"type": "node", "name": "b1", "online": 1, "nodeid": 1},
        ],
        "nodes": [{"node": "b1", "status": "online", "maxcpu": 4}],
    },
}


def fake_proxmox(target: HvTarget) -> httpx.AsyncBaseTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host not in CLUSTERS:
            raise httpx.ConnectError("connection refused")
        if request.headers.get("Authorization") != f"PVEAPIToken=root@pam!hvsync=secret-{host}":
            return httpx.Response(401, json={"data": None})
        key = {"/api2/json/cluster/status": "cluster", "/api2/json/nodes": "nodes"}[request.url.path]
        return httpx.Response(200, json={"data": CLUSTERS[host][key]})

    return httpx.MockTransport(handler)


def add(c, auth, ip: str, name: str, **kw) -> int:
    body = {
        "name": name,
        "ip_address": ip,
        "port": 8006,
        "username": "root@pam",
        "token_name": "hvsync",
        "token_value": f"secret-{ip}",
        "max_retries": 0,
        "timeout": 2,
        **kw,
    }
    r = c.post("/hv/endpoints", headers=auth, json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_cluster_status_and_nodes_from_all_enabled(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake_proxmox
    c = backend.client
    a = add(c, auth, "192.0.2.21", "alpha (inv:1)")
    b = add(c, auth, "192.0.2.22", "beta (inv:2)")
    add(c, auth, "192.0.2.23", "off (inv:3)", enabled=False)
    r = c.get("/hv/cluster/status", headers=auth)
    assert r.status_code == 200
    assert r.json() == {
        "endpoints": [
            {
                "endpoint_id": a,
                "endpoint_name": "alpha (inv:1)",
                "ok": True,
                "data": CLUSTERS["192.0.2.21"]["cluster"],
                "error": None,
            },
            {
                "endpoint_id": b,
                "endpoint_name": "beta (inv:2)",
                "ok": True,
                "data": CLUSTERS["192.0.2.22"]["cluster"],
                "error": None,
            },
        ]
    }
    r = c.get("/hv/nodes/", headers=auth, params={"hv_endpoint_ids": str(b)})
    assert r.json()["endpoints"] == [
        {
            "endpoint_id": b,
            "endpoint_name": "beta (inv:2)",
            "ok": True,
            "data": [{"node": "b1", "status": "online", "maxcpu": 4}],
            "error": None,
        }
    ]


def test_partial_failure_is_reported_per_endpoint(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake_proxmox
    c = backend.client
    a = add(c, auth, "192.0.2.21", "alpha (inv:1)")
    dead = add(c, auth, "192.0.2.99", "dead (inv:9)")
    r = c.get("/hv/nodes/", headers=auth, params={"hv_endpoint_ids": f"{a},{dead}"})
    assert r.status_code == 200
    results = {e["endpoint_id"]: e for e in r.json()["endpoints"]}
    assert results[a]["ok"] is True
    assert results[dead]["ok"] is False and results[dead]["error"]["kind"] == "unreachable"
    assert (
        "dead (inv:9)" in results[dead]["error"]["detail"]
        and "192.0.2.99:8006" in results[dead]["error"]["detail"]
    )


def test_all_failed_is_502_naming_each_endpoint(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake_proxmox
    c = backend.client
    dead = add(c, auth, "192.0.2.99", "dead (inv:9)")
    bad = add(c, auth, "192.0.2.21", "wrongtoken (inv:4)", token_value="nope")
    r = c.get("/hv/cluster/status", headers=auth)
    assert r.status_code == 502
    body = r.json()
    assert "dead (inv:9)" in body["detail"] and "wrongtoken (inv:4)" in body["detail"]
    kinds = {e["endpoint_id"]: e["error"]["kind"] for e in body["endpoints"]}
    assert kinds == {dead: "unreachable", bad: "auth"}
    assert "nope" not in r.text


def test_endpoint_ids_validation(backend, auth) -> None:
    c = backend.client
    r = c.get("/hv/nodes/", headers=auth, params={"hv_endpoint_ids": "1,x"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "hv_endpoint_ids"]
    r = c.get("/hv/nodes/", headers=auth, params={"hv_endpoint_ids": "77"})
    assert r.status_code == 404 and "77" in r.json()["detail"]
    r = c.get("/hv/nodes/", headers=auth)
    assert r.status_code == 200 and r.json() == {"endpoints": []}


def test_client_rebuilt_when_endpoint_changes(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake_proxmox
    c = backend.client
    a = add(c, auth, "192.0.2.21", "alpha (inv:1)", token_value="stale")
    assert c.get("/hv/nodes/", headers=auth).status_code == 502
    c.put(f"/hv/endpoints/{a}", headers=auth, json={"token_value": "secret-192.0.2.21"})
    r = c.get("/hv/nodes/", headers=auth)
    assert r.status_code == 200 and r.json()["endpoints"][0]["data"][0]["node"] == "a1"
