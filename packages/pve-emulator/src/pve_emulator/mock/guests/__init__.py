"""QEMU VMs and LXC containers: lists, create, config, power state, snapshots, agent data, delete.

A package in moto's manner (``ec2/models/``): importing it registers every guest handler. The routes
are bound here, once per kind, to the behaviour in the modules beside it: ``common`` (disks, NICs,
lookups, usage), ``qemu`` and ``lxc`` (what only one kind has), ``config``, ``lifecycle``, ``clone``
and ``snapshots``; ``agent`` (the QEMU guest agent's commands) registers its own routes. Other mock
modules import what they read of guests from ``common``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pve_emulator.mock.guests import agent, clone, config, lifecycle, lxc, snapshots
from pve_emulator.mock.guests.common import disk_entries, guest_nics, guest_usage, list_guests, mac_for
from pve_emulator.mock.registry import Call, Handler, route
from pve_emulator.mock.state import GuestKind

__all__ = [
    "KINDS",
    "POWER_ACTIONS",
    "ROUTES",
    "agent",
    "disk_entries",
    "guest_nics",
    "guest_usage",
    "mac_for",
]

KINDS: tuple[GuestKind, ...] = ("qemu", "lxc")
#: (method, path below ``/nodes/{node}/<kind>``, behaviour called as ``f(call, kind)``), for both kinds
ROUTES: tuple[tuple[str, str, Callable[[Call, GuestKind], Any]], ...] = (
    ("GET", "", list_guests),
    ("POST", "", config.create_guest),
    ("GET", "/{vmid}/config", config.read_config),
    ("PUT", "/{vmid}/config", config.update_config),
    ("GET", "/{vmid}/pending", config.read_pending),
    ("DELETE", "/{vmid}", lifecycle.delete_guest),
    ("GET", "/{vmid}/status/current", lifecycle.guest_status),
    ("POST", "/{vmid}/migrate", lifecycle.migrate),
    ("POST", "/{vmid}/clone", clone.clone),
    ("POST", "/{vmid}/template", lifecycle.make_template),
    ("PUT", "/{vmid}/resize", lifecycle.resize),
    ("GET", "/{vmid}/snapshot", snapshots.list_snapshots),
    ("POST", "/{vmid}/snapshot", snapshots.create_snapshot),
    ("GET", "/{vmid}/snapshot/{snapname}", snapshots.snapshot_index),
    ("DELETE", "/{vmid}/snapshot/{snapname}", snapshots.delete_snapshot),
    ("GET", "/{vmid}/snapshot/{snapname}/config", snapshots.snapshot_config),
    ("PUT", "/{vmid}/snapshot/{snapname}/config", snapshots.update_snapshot),
    ("POST", "/{vmid}/snapshot/{snapname}/rollback", snapshots.rollback_snapshot),
)
#: ``POST .../status/<action>`` per kind (only QEMU has ``reset``)
POWER_ACTIONS: dict[GuestKind, tuple[str, ...]] = {
    "qemu": ("start", "stop", "shutdown", "reboot", "suspend", "resume", "reset"),
    "lxc": ("start", "stop", "shutdown", "reboot", "suspend", "resume"),
}


def _bound(operation: Callable[..., Any], *args: Any) -> Handler:
    """A handler that calls ``operation(call, *args)`` (made here, so the registry names this package)."""

    def handler(call: Call) -> Any:
        return operation(call, *args)

    return handler


for _kind in KINDS:
    _base = f"/nodes/{{node}}/{_kind}"
    for _method, _path, _operation in ROUTES:
        route(_method, _base + _path)(_bound(_operation, _kind))
    for _action in POWER_ACTIONS[_kind]:
        route("POST", f"{_base}/{{vmid}}/status/{_action}")(_bound(lifecycle.power, _kind, _action))
route("POST", "/nodes/{node}/qemu/{vmid}/config")(_bound(config.update_config_task, "qemu"))
route("GET", "/nodes/{node}/lxc/{vmid}/interfaces")(_bound(lxc.lxc_interfaces))
