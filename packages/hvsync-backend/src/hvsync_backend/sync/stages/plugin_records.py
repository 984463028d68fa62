"""Plugin records (`/api/plugins/hvsync/`): the plugin's cluster, node and storage rows.

Their identity is natural in NetBox (cluster: plugin endpoint + name; node: cluster + name; storage:
cluster + name), so keys are rebuilt from those instead of a custom field. The plugin's hv endpoint row
is the one named by the backend endpoint's `(inv:<pk>)` suffix (or carrying its `backend_id`); without
it the plugin stages cannot run for that endpoint, and say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hvsync_backend.sync.focused import focus_nodes, ids_with_existing, node_allowed
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.plan import Current, Desired
from hvsync_backend.sync.plugin_endpoints import plugin_endpoints
from hvsync_backend.sync.reads import clusters, storage_facts
from hvsync_backend.sync.run import MANAGED_TAG, SyncContext
from hvsync_backend.sync.stages.devices import ClusterKind, DeviceKind, cluster_key, node_key
from hvsync_backend.wire import PLUGIN_RECORDS
from hvsync_backend.wire.keys import endpoint_of, format_key


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
        gone = ("gone_since",) if self.gone_on_record else ()
        return tuple(dict.fromkeys(("id", *self.read_fields, *gone)))

    def read_params(self, ctx: SyncContext) -> dict[str, Any]:
        return {"tag": MANAGED_TAG}

    async def current(self, ctx: SyncContext) -> dict[str, Current]:
        rows = await self.read_current(ctx)
        lookups = await self.lookups(ctx)
        out: dict[str, Current] = {}
        for row in rows:
            key = self.row_key(row, ctx, lookups)
            if key and ctx.source_of(key) in ctx.identities:
                out[key] = Current(key, int(row["id"]), self.label(row), row)
        return out


class PluginClusterKind(NaturalKind):
    name = "plugin cluster"
    path = PLUGIN_RECORDS["cluster"].path
    read_fields = PLUGIN_RECORDS["cluster"].read_fields

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (ClusterKind(),)

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        pks = await plugin_endpoints(ctx)
        by_pk = {pk: s.identity for s in ctx.sources for bid, pk in pks.items() if bid == s.backend_id}
        return {"endpoint": by_pk}

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["endpoint"].get(_nested_id(row.get("endpoint")))
        return format_key("hv_cluster", endpoint=identity) if identity else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        pks = await plugin_endpoints(ctx)
        infos = await clusters(ctx)
        cluster_ids = await known_ids(ctx, ClusterKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            info, pk = infos.get(source.backend_id), pks.get(source.backend_id)
            if info is None or pk is None:
                continue
            key = format_key("hv_cluster", endpoint=source.identity)
            payload = {"endpoint": pk, "name": info.name, "cluster": cluster_ids.get(cluster_key(source))}
            out[key] = Desired(key, info.name, payload)
        return out


class PluginNodeKind(NaturalKind):
    name = "plugin node"
    path = PLUGIN_RECORDS["node"].path
    read_fields = PLUGIN_RECORDS["node"].read_fields

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (PluginClusterKind(), DeviceKind())

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        ids = await known_ids(ctx, PluginClusterKind())
        return {"cluster": {v: endpoint_of(k) for k, v in ids.items()}}

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["cluster"].get(_nested_id(row.get("cluster")))
        return format_key("hv_node", endpoint=identity, node=row.get("name")) if identity else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        infos = await clusters(ctx)
        hv_clusters = await known_ids(ctx, PluginClusterKind())
        device_ids = await known_ids(ctx, DeviceKind())
        allowed = await focus_nodes(ctx)
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            info, parent = (
                infos.get(source.backend_id),
                hv_clusters.get(format_key("hv_cluster", endpoint=source.identity)),
            )
            if info is None or parent is None:
                continue
            for node in info.nodes:
                if not node_allowed(allowed, source, node.name):
                    continue
                key = format_key("hv_node", endpoint=source.identity, node=node.name)
                payload = {
                    "cluster": parent,
                    "name": node.name,
                    "node_id": node.nodeid,
                    "online": node.online,
                    "device": device_ids.get(node_key(source, node.name)),
                }
                out[key] = Desired(key, node.name, payload)
        return out


class PluginStorageKind(NaturalKind):
    name = "storage"
    gone_on_record = True
    path = PLUGIN_RECORDS["storage"].path
    read_fields = PLUGIN_RECORDS["storage"].read_fields

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (PluginClusterKind(), PluginNodeKind())

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        ids = await known_ids(ctx, PluginClusterKind())
        return {"cluster": {v: endpoint_of(k) for k, v in ids.items()}}

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["cluster"].get(_nested_id(row.get("cluster")))
        return format_key("hv_storage", endpoint=identity, storage=row.get("name")) if identity else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        facts = await storage_facts(ctx)
        hv_clusters = await known_ids(ctx, PluginClusterKind())
        hv_nodes = await ids_with_existing(ctx, PluginNodeKind())
        focus = ctx.options.focus
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            parent = hv_clusters.get(format_key("hv_cluster", endpoint=source.identity))
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
                key = format_key("hv_storage", endpoint=source.identity, storage=name)
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
                        i
                        for i in (
                            hv_nodes.get(format_key("hv_node", endpoint=source.identity, node=n))
                            for n in present
                        )
                        if i
                    ),
                }
                out[key] = Desired(key, name, payload)
        return out
