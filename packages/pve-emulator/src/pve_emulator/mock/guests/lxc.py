"""What only LXC containers have: their create-only and hot-plug options, default config, interfaces."""

from __future__ import annotations

import re
from typing import Any

from pve_emulator.errors import ApiError
from pve_emulator.mock.guests.common import NET, guest_nics, guest_of
from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import Guest

# Create-time parameters that steer the creation and are not stored in the guest config.
CREATE_ONLY = {
    "node",
    "vmid",
    "start",
    "storage",
    "ostemplate",
    "force",
    "unique",
    "pool",
    "bwlimit",
    "restore",
    "ignore-unpack-errors",
    "password",
    "ssh-public-keys",
    "ha-managed",
}


# Options applied at once even to a running container (pve-container's FASTPLUG list).
FAST_PLUG = {
    "description",
    "onboot",
    "startup",
    "protection",
    "hostname",
    "hookscript",
    "cores",
    "tags",
    "lock",
    "cpulimit",
    "cpuunits",
    "memory",
    "swap",
}


def lxc_interfaces(call: Call) -> list[dict[str, Any]]:
    guest = guest_of(call, "lxc")
    if guest.status != "running":
        raise ApiError(500, f"CT {guest.vmid} not running")
    lo = _lxc_iface("lo", "00:00:00:00:00:00", "127.0.0.1/8", "::1/128")
    out = [lo]
    for _, nic in guest_nics(guest):
        ip, ip6 = nic.get("ip", ""), nic.get("ip6", "")
        out.append(
            _lxc_iface(
                nic.get("name", "eth0"),
                nic.get("hwaddr", "").lower(),
                ip if ip and ip not in ("dhcp", "manual") else None,
                ip6 if ip6 and ip6 not in ("dhcp", "auto", "manual") else None,
            )
        )
    return out


def _lxc_iface(name: str, hwaddr: str, inet: str | None, inet6: str | None) -> dict[str, Any]:
    """PVE 9 reports both the classic (hwaddr/inet/inet6) and the agent-style keys."""
    addrs = []
    for cidr, family in ((inet, "inet"), (inet6, "inet6")):
        if cidr:
            address, _, prefix = cidr.partition("/")
            addrs.append({"ip-address": address, "ip-address-type": family, "prefix": int(prefix or 0)})
    entry: dict[str, Any] = {
        "name": name,
        "hwaddr": hwaddr,
        "hardware-address": hwaddr,
        "ip-addresses": addrs,
    }
    if inet:
        entry["inet"] = inet
    if inet6:
        entry["inet6"] = inet6
    return entry


def default_config(config: dict[str, Any], vmid: int) -> None:
    """What pve-container fills in when the create call leaves it out."""
    config.setdefault("memory", 512)
    config.setdefault("swap", 512)
    config.setdefault("cores", 1)
    config.setdefault("arch", "amd64")
    config.setdefault("ostype", "debian")
    config.setdefault("hostname", f"CT{vmid}")


def hot_pluggable(guest: Guest, key: str, deleting: bool = False) -> bool:
    """pve-container: fast-plug options and NICs at once; a new mount point too, a changed one waits."""
    if key in FAST_PLUG or NET.match(key):
        return True
    # a new mount point is hot-plugged; replacing or removing one waits
    return bool(re.match(r"^mp\d+$", key)) and not deleting and key not in guest.config
