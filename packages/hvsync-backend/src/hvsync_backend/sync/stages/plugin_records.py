"""Plugin records (`/api/plugins/hvsync/`): the plugin's cluster, node and storage rows.

Their identity is natural in NetBox (cluster: plugin endpoint + name; node: cluster + name; storage:
cluster + name), so keys are rebuilt from those instead of a custom field. The plugin's hv endpoint row
is the one named by the backend endpoint's `(inv:<pk>)` suffix (or carrying its `backend_id`); without
it the plugin stages cannot run for that endpoint, and say so.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from hvsync_backend.sync.engine import MANAGED_TAG, Kind, SyncContext, known_ids
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader
from hvsync_backend.sync.reconcile import Current, Desired
from hvsync_backend.sync.stages.devices import ClusterKind, DeviceKind, cluster_key, clusters, node_key
from hvsync_backend.sync.stages.focused import focus_nodes, ids_with_existing, node_allowed

BASE = "plugins/hvsync"
_INV = re.compile(r"\(inv:(\d+)\)\s*$")


async def plugin_endpoints(ctx: SyncContext) -> dict[int, int]:
    """Backend endpoint id -> the plugin's hv endpoint pk, for the sources that have one.

    Resolved once per run (concurrent callers share one read, so a missing record is reported once).
    A name with an `(inv:<pk>)` suffix names that record only (the suffix is also the objects' identity);
    the plugin's `backend_id` is used only for names without one."""
    task = ctx.cache.get("plugin_endpoints_task")
    if task is None:
        task = ctx.cache["plugin_endpoints_task"] = asyncio.ensure_future(_resolve_endpoints(ctx))
    return await asyncio.shield(task)


async def _resolve_endpoints(ctx: SyncContext) -> dict[int, int]:
    rows = await ctx.netbox.list_all(f"{BASE}/hv-endpoints", fields=("id", "name", "backend_id"))
    by_pk = {int(r["id"]): r for r in rows}
    by_backend = {r.get("backend_id"): int(r["id"]) for r in rows if r.get("backend_id")}
    found: dict[int, int] = {}
    for source in ctx.sources:
        match = _INV.search(source.name)
        if match:
            pk: int | None = int(match.group(1)) if int(match.group(1)) in by_pk else None
        else:
            pk = by_backend.get(source.backend_id)
        if pk is None:
            await ctx.problem(
                {
                    "source": "backend",
                    "status": None,
                    "detail": f"hv endpoint {source.backend_id} has no record in the hvsync plugin "
                    "(the plugin pushes its endpoints with an '(inv:<pk>)' name suffix); plugin records "
                    "and sync-state sidecars skipped",
                    "endpoint_id": source.backend_id,
                    "object": source.name,
                },
                f"endpoint {source.backend_id}: no plugin endpoint record",
            )
        else:
            found[source.backend_id] = pk
    ctx.cache["plugin_endpoints"] = found
    return found


def _nested_id(value: Any) -> int | None:
    return int(value["id"]) if isinstance(value, Mapping) and value.get("id") is not None else None


class NaturalKind(Kind):
    """A plugin model keyed by natural fields; subclasses say how a NetBox row maps to a key."""

    key_field = False

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        raise NotImplementedError

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        return {}

    def current_fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(("id", *self.read_fields)))

    def read_params(self, ctx: SyncContext) -> dict[str, Any]:
        return {"tag": MANAGED_TAG}

    async def current(self, ctx: SyncContext) -> dict[str, Current]:
        rows = await ctx.netbox.list_all(self.path, self.read_params(ctx), fields=self.current_fields())
        lookups = await self.lookups(ctx)
        out: dict[str, Current] = {}
        for row in rows:
            key = self.row_key(row, ctx, lookups)
            if key and ctx.source_of(key) in ctx.identities:
                out[key] = Current(key, int(row["id"]), self.label(row), row)
        return out


class PluginClusterKind(NaturalKind):
    name = "plugin cluster"
    path = f"{BASE}/clusters"
    read_fields = ("endpoint", "name", "cluster")

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        pks = await plugin_endpoints(ctx)
        by_pk = {pk: s.identity for s in ctx.sources for bid, pk in pks.items() if bid == s.backend_id}
        return {"endpoint": by_pk}

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["endpoint"].get(_nested_id(row.get("endpoint")))
        return f"{identity}|hvcluster" if identity else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        pks = await plugin_endpoints(ctx)
        infos = await clusters(ctx)
        cluster_ids = await known_ids(ctx, ClusterKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            info, pk = infos.get(source.backend_id), pks.get(source.backend_id)
            if info is None or pk is None:
                continue
            key = f"{source.identity}|hvcluster"
            payload = {"endpoint": pk, "name": info.name, "cluster": cluster_ids.get(cluster_key(source))}
            out[key] = Desired(key, info.name, payload)
        return out


class PluginNodeKind(NaturalKind):
    name = "plugin node"
    path = f"{BASE}/nodes"
    read_fields = ("cluster", "name", "node_id", "online", "device")

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        ids = await known_ids(ctx, PluginClusterKind())
        return {"cluster": {v: k.split("|")[0] for k, v in ids.items()}}

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["cluster"].get(_nested_id(row.get("cluster")))
        return f"{identity}|hvnode|{row.get('name')}" if identity else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        infos = await clusters(ctx)
        hv_clusters = await known_ids(ctx, PluginClusterKind())
        device_ids = await known_ids(ctx, DeviceKind())
        allowed = await focus_nodes(ctx)
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            info, parent = infos.get(source.backend_id), hv_clusters.get(f"{source.identity}|hvcluster")
            if info is None or parent is None:
                continue
            for node in info.nodes:
                if not node_allowed(allowed, source, node.name):
                    continue
                key = f"{source.identity}|hvnode|{node.name}"
                payload = {
                    "cluster": parent,
                    "name": node.name,
                    "node_id": node.nodeid,
                    "online": node.online,
                    "device": device_ids.get(node_key(source, node.name)),
                }
                out[key] = Desired(key, node.name, payload)
        return out


async def storage_facts(ctx: SyncContext) -> dict[int, dict[str, Any]]:
    """endpoint -> {'config': [...], 'per_node': {node: [...]}} (cached for the run)."""
    if "storage" not in ctx.cache:
        infos = await clusters(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> dict[str, Any]:
            info = infos.get(source.backend_id)
            names = [n.name for n in info.nodes if n.online] if info else []
            config = await reader.get("storage") or []
            lists = await asyncio.gather(*(reader.optional(f"nodes/{n}/storage") for n in names))
            return {
                "config": config,
                "per_node": {n: list(rows or []) for n, rows in zip(names, lists, strict=True)},
            }

        ctx.cache["storage"] = await ctx.per_endpoint(read)
    return ctx.cache["storage"]


class PluginStorageKind(NaturalKind):
    name = "storage"
    path = f"{BASE}/storage"
    read_fields = (
        "cluster",
        "name",
        "storage_type",
        "content",
        "shared",
        "active",
        "enabled",
        "total",
        "used",
        "avail",
        "nodes",
    )

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        ids = await known_ids(ctx, PluginClusterKind())
        return {"cluster": {v: k.split("|")[0] for k, v in ids.items()}}

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["cluster"].get(_nested_id(row.get("cluster")))
        return f"{identity}|storage|{row.get('name')}" if identity else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        facts = await storage_facts(ctx)
        hv_clusters = await known_ids(ctx, PluginClusterKind())
        hv_nodes = await ids_with_existing(ctx, PluginNodeKind())
        focus = ctx.options.focus
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            parent = hv_clusters.get(f"{source.identity}|hvcluster")
            data = facts.get(source.backend_id)
            if parent is None or data is None:
                continue
            for entry in data["config"]:
                name = str(entry.get("storage") or "")
                if not name or (focus is not None and not focus.allows(focus.storages, name)):
                    continue
                reports = {
                    n: next((r for r in rows if r.get("storage") == name), None)
                    for n, rows in data["per_node"].items()
                }
                present = sorted(n for n, r in reports.items() if r is not None)
                first = next((reports[n] for n in present), None) or {}
                key = f"{source.identity}|storage|{name}"
                payload = {
                    "cluster": parent,
                    "name": name,
                    "storage_type": str(entry.get("type") or ""),
                    "content": sorted(c for c in str(entry.get("content") or "").split(",") if c),
                    "shared": bool(int(entry.get("shared") or 0)),
                    "active": bool(int(first.get("active") or 0)) if first else False,
                    "enabled": not bool(int(entry.get("disable") or 0)),
                    "total": int(first["total"]) if first.get("total") is not None else None,
                    "used": int(first["used"]) if first.get("used") is not None else None,
                    "avail": int(first["avail"]) if first.get("avail") is not None else None,
                    "nodes": sorted(
                        i for i in (hv_nodes.get(f"{source.identity}|hvnode|{n}") for n in present) if i
                    ),
                }
                out[key] = Desired(key, name, payload)
        return out
