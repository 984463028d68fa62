"""GET /hv/guests/{vmid}: the read the plugin re-checks a deletion request with (issue 40): whether a guest
exists, on which node, and its config keys (never their values); faked Proxmox answers."""

from __future__ import annotations

import httpx
from hvsync_backend.endpoints.service import HvTarget
from test_hv_reconcile_reads import add, only

RESOURCES = [
    {"vmid": 101, "type": "qemu", "node": "a1", "name": "web"},
    {"vmid": 102, "type": "lxc", "node": "a2", "name": "ct"},
    {"vmid": 103, "type": "qemu", "node": "a1", "name": "racing"},
    {"storage": "local", "type": "storage", "node": "a1"},
]
CONFIGS = {
    "/api2/json/nodes/a1/qemu/101/config": {
        "name": "web",
        "scsi0": "local:vm-101-disk-0,size=8G",
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        "cipassword": "s3cret-ci",
        "digest": "abc",
    },
    "/api2/json/nodes/a2/lxc/102/config": {"hostname": "ct", "rootfs": "local:8", "net0": "name=eth0"},
}


def fake(target: HvTarget) -> httpx.AsyncBaseTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api2/json/cluster/resources":
            return httpx.Response(200, json={"data": RESOURCES})
        if path in CONFIGS:
            return httpx.Response(200, json={"data": CONFIGS[path]})
        # 103 was destroyed between the two reads: Proxmox answers 500 "does not exist"
        return httpx.Response(500, json={"data": None, "message": "Configuration file does not exist"})

    return httpx.MockTransport(handler)


def test_a_guest_that_exists_is_named_with_its_config_keys_only(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake
    c = backend.client
    a = add(c, auth, "192.0.2.21", "alpha (inv:1)")
    r = c.get("/hv/guests/101", headers=auth, params={"hv_endpoint_ids": str(a)})
    assert only(r, a) == {
        "vmid": 101,
        "exists": True,
        "node": "a1",
        "type": "qemu",
        "config_keys": ["cipassword", "name", "net0", "scsi0"],
    }
    assert "s3cret-ci" not in r.text and "BC:24:11" not in r.text
    ct = only(c.get("/hv/guests/102", headers=auth), a)
    assert (
        ct["exists"] is True and ct["type"] == "lxc" and ct["config_keys"] == ["hostname", "net0", "rootfs"]
    )


def test_a_missing_or_just_destroyed_guest_is_absent(backend, auth) -> None:
    backend.context.proxmox.transport_factory = fake
    c = backend.client
    a = add(c, auth, "192.0.2.21", "alpha (inv:1)")
    absent = {"exists": False, "node": None, "type": None, "config_keys": []}
    assert only(c.get("/hv/guests/999", headers=auth), a) == {"vmid": 999, **absent}
    assert only(c.get("/hv/guests/103", headers=auth), a) == {"vmid": 103, **absent}


def test_an_unreadable_endpoint_is_a_failure_not_an_absence(backend, auth) -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    backend.context.proxmox.transport_factory = lambda target: httpx.MockTransport(refused)
    c = backend.client
    down = add(c, auth, "192.0.2.99", "down (inv:9)")
    r = c.get("/hv/guests/101", headers=auth, params={"hv_endpoint_ids": str(down)})
    assert r.status_code == 502
    [entry] = r.json()["endpoints"]
    assert entry["ok"] is False and entry["data"] is None and entry["error"]["kind"] == "unreachable"


def test_a_bad_vmid_is_a_422_naming_it(backend, auth) -> None:
    c = backend.client
    for bad in ("99", "abc", "1000000000"):
        r = c.get(f"/hv/guests/{bad}", headers=auth)
        assert r.status_code == 422, bad
        assert r.json()["detail"][0]["loc"] == ["path", "vmid"]
