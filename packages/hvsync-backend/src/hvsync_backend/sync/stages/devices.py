"""devices: one NetBox cluster per Proxmox cluster (or standalone node), nodes as dcim devices."""

from __future__ import annotations

from typing import Any

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.focused import focus_nodes, node_allowed
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.plan import Desired
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.reads import clusters
from hvsync_backend.sync.run import KEY_FIELD, SyncContext
from hvsync_backend.sync.support import ensure, prefetch_support, slugify
from hvsync_backend.wire.keys import format_key

CLUSTER_TYPE = ("Proxmox VE", "proxmox-ve")
MANUFACTURER = ("Proxmox", "proxmox")
DEVICE_TYPE = ("Proxmox VE Node", "proxmox-ve-node")
NODE_ROLE = ("Hypervisor", "hypervisor")


def cluster_key(source: HvSource) -> str:
    return format_key("cluster", endpoint=source.identity)


def node_key(source: HvSource, node: str) -> str:
    return format_key("node", endpoint=source.identity, node=node)


async def site_id(ctx: SyncContext, source: HvSource) -> int | None:
    """The endpoint's configured site (by slug), else the run's default site; created when missing."""
    if source.site_slug:
        return await ensure(
            ctx, "dcim/sites", source.site_slug, {"name": source.site_slug, "status": "active"}
        )
    name = ctx.options.site_name
    return await ensure(ctx, "dcim/sites", slugify(name), {"name": name, "status": "active"})


def site_slugs(ctx: SyncContext) -> list[str]:
    return sorted({source.site_slug or slugify(ctx.options.site_name) for source in ctx.sources})


class ClusterKind(Kind):
    name = "cluster"
    path = "virtualization/clusters"
    read_fields = ("name", "type", "status", "scope_type", "scope_id")

    def accepts(self, key: str) -> bool:
        return key.endswith("|cluster")

    def prefetch(self, ctx: SyncContext) -> None:
        super().prefetch(ctx)
        prefetch_support(ctx, "virtualization/cluster-types", [CLUSTER_TYPE[1]])
        prefetch_support(ctx, "dcim/sites", site_slugs(ctx))

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        infos = await clusters(ctx)
        type_id = await ensure(
            ctx, "virtualization/cluster-types", CLUSTER_TYPE[1], {"name": CLUSTER_TYPE[0]}
        )
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            info = infos.get(source.backend_id)
            if info is None:
                continue
            site = await site_id(ctx, source)
            key = cluster_key(source)
            payload: dict[str, Any] = {
                "name": info.name,
                "type": type_id,
                "status": "active",
                "scope_type": "dcim.site",
                "scope_id": site,
            }
            out[key] = Desired(key, info.name, payload)
        return out


class DeviceKind(Kind):
    name = "device"
    path = "dcim/devices"
    read_fields = ("name", "device_type", "role", "site", "cluster", "status")
    sidecar = sidecars.DEVICE

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (ClusterKind(),)

    def accepts(self, key: str) -> bool:
        return "|node|" in key and "|iface|" not in key

    def prefetch(self, ctx: SyncContext) -> None:
        super().prefetch(ctx)
        prefetch_support(ctx, "dcim/manufacturers", [MANUFACTURER[1]])
        prefetch_support(ctx, "dcim/device-types", [DEVICE_TYPE[1]])
        prefetch_support(ctx, "dcim/device-roles", [NODE_ROLE[1]])

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        infos = await clusters(ctx)
        manufacturer = await ensure(ctx, "dcim/manufacturers", MANUFACTURER[1], {"name": MANUFACTURER[0]})
        device_type = await ensure(
            ctx, "dcim/device-types", DEVICE_TYPE[1], {"model": DEVICE_TYPE[0], "manufacturer": manufacturer}
        )
        role = await ensure(ctx, "dcim/device-roles", NODE_ROLE[1], {"name": NODE_ROLE[0], "color": "ff9800"})
        # Device names are unique per site in NetBox. A name another endpoint's managed device already
        # holds in the same site (whatever this run's scope) gets the cluster name appended; the names
        # themselves are therefore stable from run to run.
        # the same query as `current` (every managed device): one read serves both
        rows = await self.read_current(ctx)
        taken: dict[tuple[int | None, str], str] = {}
        for row in rows:
            key = (row.get("custom_fields") or {}).get(KEY_FIELD)
            if key:
                taken[((row.get("site") or {}).get("id"), str(row.get("name")))] = key
        cluster_ids = await known_ids(ctx, ClusterKind())
        allowed = await focus_nodes(ctx)
        out: dict[str, Desired] = {}
        for source in sorted(ctx.sources, key=lambda s: s.identity):
            info = infos.get(source.backend_id)
            if info is None:
                continue
            site = await site_id(ctx, source)
            for node in info.nodes:
                if not node_allowed(allowed, source, node.name):
                    continue  # selected-object run: only the nodes its object lives on
                key = node_key(source, node.name)
                name = node.name
                owner = taken.get((site, name))
                if owner is not None and owner != key:
                    name = f"{node.name} ({info.name})"
                taken.setdefault((site, name), key)
                payload = {
                    "name": name,
                    "device_type": device_type,
                    "role": role,
                    "site": site,
                    "cluster": cluster_ids.get(cluster_key(source)),
                    "status": "active" if node.online else "offline",
                }
                out[key] = Desired(key, name, payload, state={"node_name": node.name})
        return out
