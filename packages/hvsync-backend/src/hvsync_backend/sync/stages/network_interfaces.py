"""network-interfaces: node interfaces (physical NICs, bridges, bonds, VLANs) as dcim interfaces,
with bond members pointing at their LAG and bridge ports at their bridge."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.focused import focus_nodes, node_allowed
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.plan import Desired
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader
from hvsync_backend.sync.reads import clusters, report_silent_nodes
from hvsync_backend.sync.run import SyncContext
from hvsync_backend.sync.stages.devices import DeviceKind, node_key
from hvsync_backend.wire.keys import format_key
from hvsync_backend.wire.numbers import decimal

TYPES = {
    "bridge": "bridge",
    "OVSBridge": "bridge",
    "bond": "lag",
    "OVSBond": "lag",
    "eth": "other",
    "vlan": "virtual",
    "OVSIntPort": "virtual",
    "alias": "virtual",
}


def node_iface_key(source: HvSource, node: str, iface: str) -> str:
    return format_key("node_interface", endpoint=source.identity, node=node, iface=iface)


async def node_networks(ctx: SyncContext) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """endpoint -> node -> interfaces (cached for the run)."""
    if ctx.reads.node_networks is None:
        infos = await clusters(ctx)
        allowed = await focus_nodes(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> dict[str, list[dict[str, Any]]]:
            info = infos.get(source.backend_id)
            names = [n.name for n in info.nodes if n.online] if info else []
            names = [n for n in names if node_allowed(allowed, source, n)]
            lists = await asyncio.gather(*(reader.node_get(n, f"nodes/{n}/network") for n in names))
            await report_silent_nodes(ctx, source, reader)
            # a node that stopped answering is left out (reader.silent_nodes), not read as empty
            return {n: list(rows) for n, rows in zip(names, lists, strict=True) if rows is not None}

        ctx.reads.node_networks = await ctx.per_endpoint(read)
    return ctx.reads.node_networks


def _members(row: dict[str, Any]) -> list[str]:
    text = str(row.get("slaves") or row.get("bridge_ports") or row.get("ovs_ports") or "")
    return [m for m in re.split(r"[\s,]+", text) if m]


class NodeInterfaceKind(Kind):
    name = "node interface"
    path = "dcim/interfaces"
    sidecar = sidecars.NODE_INTERFACE
    read_fields = ("name", "device", "type", "enabled", "mtu", "description")

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (DeviceKind(),)

    def accepts(self, key: str) -> bool:
        return "|iface|" in key

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        networks = await node_networks(ctx)
        device_ids = await known_ids(ctx, DeviceKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for node, rows in networks.get(source.backend_id, {}).items():
                device = device_ids.get(node_key(source, node))
                if device is None and not ctx.options.dry_run:
                    continue
                for row in rows:
                    iface = str(row.get("iface") or "")
                    if not iface or iface == "lo":
                        continue
                    key = node_iface_key(source, node, iface)
                    cidr = row.get("cidr") or row.get("address")
                    payload = {
                        "device": device,
                        "name": iface,
                        "type": TYPES.get(str(row.get("type")), "other"),
                        "enabled": bool(int(row.get("active") or 0)) if "active" in row else True,
                        "mtu": decimal(str(row.get("mtu") or "")),
                        "description": f"{row.get('type', '')} {cidr or ''}".strip()[:200],
                    }
                    state = {"node_name": node, "key": iface}
                    out[key] = Desired(key, f"{node} {iface}", payload, state)
        return out


class NodeInterfaceLinkKind(Kind):
    """Second pass: bond members get `lag`, bridge ports get `bridge` (both need the parent's id)."""

    name = "node interface links"
    path = "dcim/interfaces"
    read_fields = ("name", "lag", "bridge")
    owns_objects = False
    sidecar = sidecars.NODE_INTERFACE

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (NodeInterfaceKind(),)

    def accepts(self, key: str) -> bool:
        return "|iface|" in key

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        networks = await node_networks(ctx)
        ids = await known_ids(ctx, NodeInterfaceKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for node, rows in networks.get(source.backend_id, {}).items():
                links: dict[str, dict[str, Any]] = {}
                for row in rows:
                    iface = str(row.get("iface") or "")
                    if not iface or iface == "lo":
                        continue
                    links.setdefault(iface, {"lag": None, "bridge": None})
                    kind = TYPES.get(str(row.get("type")))
                    for member in _members(row):
                        field = "lag" if kind == "lag" else "bridge" if kind == "bridge" else None
                        if field:
                            links.setdefault(member, {"lag": None, "bridge": None})[field] = ids.get(
                                node_iface_key(source, node, iface)
                            )
                for iface, payload in links.items():
                    key = node_iface_key(source, node, iface)
                    if key in ids:
                        out[key] = Desired(key, f"{node} {iface}", payload)
        return out
