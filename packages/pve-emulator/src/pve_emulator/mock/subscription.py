"""A node's subscription: the demo nodes have no key, so they answer as pve-manager does without one."""

from __future__ import annotations

import hashlib
from typing import Any

from pve_emulator.mock.access import privileges
from pve_emulator.mock.registry import Call, route

PRICING_URL = "https://www.proxmox.com/en/proxmox-virtual-environment/pricing"


def server_id(node: str) -> str:
    """The 32-hex-digit server id Proxmox derives from the host's hardware address; stable per node."""
    return hashlib.md5(f"server-id:{node}".encode()).hexdigest().upper()


@route("GET", "/nodes/{node}/subscription")
def read_subscription(call: Call) -> dict[str, Any]:
    """No /etc/subscription: status ``notfound``; the server id only for Sys.Audit on the node."""
    node = call.params["node"]
    info: dict[str, Any] = {
        "status": "notfound",
        "message": "There is no subscription key",
        "url": PRICING_URL,
    }
    if "Sys.Audit" in privileges(call.state, call.identity, f"/nodes/{node}"):
        info["serverid"] = server_id(node)
    return info
