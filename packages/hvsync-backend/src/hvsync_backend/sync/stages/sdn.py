"""sdn: SDN zones as VLAN groups, VLAN-tagged vnets as VLANs in their zone's group, subnets as prefixes."""

from __future__ import annotations

import asyncio
from typing import Any

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.plan import Desired
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader
from hvsync_backend.sync.reads import clusters
from hvsync_backend.sync.run import SyncContext
from hvsync_backend.sync.stages.devices import ClusterKind, cluster_key
from hvsync_backend.sync.support import slugify
from hvsync_backend.wire.keys import format_key


async def sdn(ctx: SyncContext) -> dict[int, dict[str, Any]]:
    """endpoint -> {'zones': [...], 'vnets': [...], 'subnets': {vnet: [...]}} (cached for the run)."""
    if ctx.reads.sdn is None:
        await clusters(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> dict[str, Any]:
            zones = await reader.optional("cluster/sdn/zones") or []
            vnets = await reader.optional("cluster/sdn/vnets") or []
            subnet_lists = await asyncio.gather(
                *(reader.optional(f"cluster/sdn/vnets/{v['vnet']}/subnets") for v in vnets if v.get("vnet"))
            )
            names = [v["vnet"] for v in vnets if v.get("vnet")]
            return {
                "zones": zones,
                "vnets": vnets,
                "subnets": {n: list(s or []) for n, s in zip(names, subnet_lists, strict=True)},
            }

        ctx.reads.sdn = await ctx.per_endpoint(read)
    return ctx.reads.sdn


class SDNZoneKind(Kind):
    name = "sdn zone"
    path = "ipam/vlan-groups"
    read_fields = ("name", "slug", "scope_type", "scope_id", "description")

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (ClusterKind(),)

    def accepts(self, key: str) -> bool:
        return "|sdnzone|" in key

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        data = await sdn(ctx)
        cluster_ids = await known_ids(ctx, ClusterKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for zone in data.get(source.backend_id, {}).get("zones", []):
                name = str(zone.get("zone") or "")
                if not name:
                    continue
                key = format_key("sdn_zone", endpoint=source.identity, zone=name)
                payload = {
                    "name": f"SDN {name} ({source.identity})",
                    "slug": slugify(f"hvsync-{source.identity}-sdn-{name}"),
                    "scope_type": "virtualization.cluster",
                    "scope_id": cluster_ids.get(cluster_key(source)),
                    "description": f"Proxmox SDN zone {name} ({zone.get('type', '')})".strip()[:200],
                }
                out[key] = Desired(key, f"zone {name}", payload)
        return out


class SDNVnetKind(Kind):
    name = "sdn vnet"
    path = "ipam/vlans"
    read_fields = ("vid", "name", "group", "status", "description")
    sidecar = sidecars.SDN_VLAN

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (SDNZoneKind(),)

    def accepts(self, key: str) -> bool:
        return "|sdnvnet|" in key

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        data = await sdn(ctx)
        groups = await known_ids(ctx, SDNZoneKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for vnet in data.get(source.backend_id, {}).get("vnets", []):
                name, tag = str(vnet.get("vnet") or ""), vnet.get("tag")
                if not name or tag in (None, ""):
                    continue
                key = format_key("sdn_vnet", endpoint=source.identity, vnet=name)
                payload = {
                    "vid": int(tag),
                    "name": name,
                    "group": groups.get(
                        format_key("sdn_zone", endpoint=source.identity, zone=vnet.get("zone"))
                    ),
                    "status": "active",
                    "description": str(vnet.get("alias") or "")[:200],
                }
                state = {"vnet": name, "zone": str(vnet.get("zone") or "")}
                out[key] = Desired(key, f"vnet {name}", payload, state)
        return out


class SDNSubnetKind(Kind):
    name = "sdn subnet"
    path = "ipam/prefixes"
    read_fields = ("prefix", "vlan", "status", "description")
    sidecar = sidecars.PREFIX

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (SDNVnetKind(),)

    def accepts(self, key: str) -> bool:
        return "|sdnsubnet|" in key

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        data = await sdn(ctx)
        vlans = await known_ids(ctx, SDNVnetKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for vnet, subnets in data.get(source.backend_id, {}).get("subnets", {}).items():
                for subnet in subnets:
                    cidr = str(subnet.get("cidr") or "")
                    if not cidr:
                        continue
                    key = format_key("sdn_subnet", endpoint=source.identity, vnet=vnet, cidr=cidr)
                    gateway = subnet.get("gateway")
                    payload = {
                        "prefix": cidr,
                        "vlan": vlans.get(format_key("sdn_vnet", endpoint=source.identity, vnet=vnet)),
                        "status": "active",
                        "description": f"vnet {vnet}" + (f", gateway {gateway}" if gateway else ""),
                    }
                    subnet_id = str(subnet.get("subnet") or cidr)
                    state = {"vnet": vnet, "subnet": subnet_id}
                    out[key] = Desired(key, f"subnet {cidr}", payload, state)
        return out
