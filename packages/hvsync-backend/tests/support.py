"""What several test modules share (no test module imports another): the endpoints they register,
a fake Proxmox cluster, and a Proxmox target."""

from __future__ import annotations

import httpx
from hvsync_backend.endpoints.service import HvTarget
from hvsync_backend.sse.frames import Frame, decode_frames
from hvsync_backend.wire.sse import split_lines

__all__ = [
    "CLUSTER",
    "HV",
    "INV",
    "NODES",
    "PASSWORD",
    "PROXMOX_OBJECTS",
    "SECRET",
    "fake_proxmox",
    "parse_stream",
    "target",
]

INV = {
    "name": "netbox",
    "ip_address": "192.0.2.10",
    "domain": "netbox.example.com",
    "port": 8000,
    "token_version": 2,
    "verify_ssl": False,
    "enabled": True,
    "token": "tok-secret-1",
    "token_key": "keyid1",
}
HV = {
    "name": "pve-a (inv:7)",
    "ip_address": "192.0.2.20",
    "domain": "",
    "port": 8006,
    "username": "root@pam",
    "token_name": "hvsync",
    "token_value": "pve-token-secret",
    "verify_ssl": False,
}
#: The Proxmox cluster the fake answers: one cluster, two online nodes.
CLUSTER = [
    {"type": "cluster", "name": "alpha", "nodes": 2, "quorate": 1},
    {"type": "node", "name": "a1", "online": 1, "nodeid": 1, "ip": "192.0.2.31"},
    {"type": "node", "name": "a2", "online": 1, "nodeid": 2, "ip": "192.0.2.32"},
]
NODES = [{"node": "a1", "status": "online", "maxcpu": 8}, {"node": "a2", "status": "online", "maxcpu": 8}]
PROXMOX_OBJECTS = ("/options", "/config", "/version", "/status/current")


def fake_proxmox(request: httpx.Request) -> httpx.Response:
    """The cluster above; every other read is empty. A wrong token is refused like Proxmox does."""
    if request.headers.get("Authorization") != f"PVEAPIToken=root@pam!hvsync={HV['token_value']}":
        return httpx.Response(401, json={"data": None})
    path = request.url.path.removeprefix("/api2/json")
    if path == "/cluster/status":
        return httpx.Response(200, json={"data": CLUSTER})
    if path == "/nodes":
        return httpx.Response(200, json={"data": NODES})
    return httpx.Response(200, json={"data": {} if path.endswith(PROXMOX_OBJECTS) else []})


SECRET = "tok-3f1c-secret"
PASSWORD = "pw-9a8b-secret"


def target(**kw) -> HvTarget:
    base = dict(
        id=3,
        name="pve-a (inv:7)",
        host="192.0.2.20",
        port=8006,
        scheme="https",
        api_url="https://192.0.2.20:8006/api2/json",
        username="root@pam",
        token_name="hvsync",
        access_methods=("token",),
        verify_ssl=False,
        enabled=True,
        allow_template_builds=False,
        timeout=2.0,
        max_retries=2,
        retry_backoff=0.0,
        token_value=SECRET,
        password=PASSWORD,
    )
    base.update(kw)
    return HvTarget(**base)


def parse_stream(text: str) -> list[Frame]:
    """A whole SSE body the tests read at once, decoded by the terminal runner's reader."""
    return list(decode_frames(split_lines([text])))
