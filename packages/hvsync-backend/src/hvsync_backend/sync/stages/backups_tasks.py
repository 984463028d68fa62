"""vm-backups (vzdump backups in storage content) and task-history (node task lists) as plugin records.

Backups are keyed by (storage, volid) and tasks by UPID: both natural and unique in NetBox.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from hvsync_backend.inventory.errors import NetBoxError
from hvsync_backend.sync.focused import focus_nodes, ids_with_existing, node_allowed
from hvsync_backend.sync.framework import Kind, Stage, known_ids, left_alone
from hvsync_backend.sync.gone import silent_nodes
from hvsync_backend.sync.guests import guests, skipped_guests, vm_key
from hvsync_backend.sync.plan import Current, Desired
from hvsync_backend.sync.plugin_endpoints import plugin_endpoints
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader
from hvsync_backend.sync.reads import clusters, report_silent_nodes, storage_facts
from hvsync_backend.sync.run import Counts, SyncContext
from hvsync_backend.sync.stages.plugin_records import (
    NaturalKind,
    PluginNodeKind,
    PluginStorageKind,
    _nested_id,
)
from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind
from hvsync_backend.sync.stages.vm_snapshots import iso
from hvsync_backend.wire import PLUGIN_RECORDS
from hvsync_backend.wire.keys import child_key, format_key
from hvsync_backend.wire.numbers import decimal

TASK_LIMIT = 500


class BackupKind(NaturalKind):
    name = "backup"
    gone_on_record = True
    storage_bound = True
    path = PLUGIN_RECORDS["backup"].path
    read_fields = PLUGIN_RECORDS["backup"].read_fields

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (PluginStorageKind(), VirtualMachineKind())

    def guest_of(self, current: Current) -> int | None:
        return decimal(current.data.get("vmid"))

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        ids = await known_ids(ctx, PluginStorageKind())
        return {"storage": {v: k for k, v in ids.items()}}

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        storage = lookups["storage"].get(_nested_id(row.get("storage")))
        return child_key(storage, "backup", volid=row.get("volid")) if storage else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        facts = await storage_facts(ctx)
        storage_ids = await known_ids(ctx, PluginStorageKind())
        vm_ids = await known_ids(ctx, VirtualMachineKind())
        in_scope = await guests(ctx)

        focus = ctx.options.focus

        async def read(source: HvSource, reader: ProxmoxReader) -> list[tuple[str, dict[str, Any]]]:
            data = facts.get(source.backend_id) or {"config": [], "per_node": {}}
            calls = []
            for entry in data["config"]:
                name = str(entry.get("storage") or "")
                if "backup" not in str(entry.get("content") or "").split(","):
                    continue
                if focus is not None and not focus.allows(focus.storages, name):
                    continue
                nodes = [
                    n for n, rows in data["per_node"].items() if any(r.get("storage") == name for r in rows)
                ]
                if bool(int(entry.get("shared") or 0)):
                    nodes = nodes[:1]  # shared storage: one node's view is everyone's
                calls += [(name, n) for n in nodes]
            answers = await asyncio.gather(
                *(reader.optional(f"nodes/{n}/storage/{s}/content", {"content": "backup"}) for s, n in calls)
            )
            return [(s, row) for (s, _), rows in zip(calls, answers, strict=True) for row in rows or []]

        found = await ctx.per_endpoint(read)
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            wanted_vmids = {g.vmid for g in in_scope.get(source.backend_id, [])}
            for storage, row in found.get(source.backend_id, []):
                storage_key = format_key("hv_storage", endpoint=source.identity, storage=storage)
                storage_id = storage_ids.get(storage_key)
                volid = str(row.get("volid") or "")
                if not volid or (storage_id is None and not ctx.options.dry_run):
                    continue
                if focus is not None and not focus.allows(focus.volids, volid):
                    continue
                vmid = decimal(str(row.get("vmid") or ""))
                if ctx.options.only_vmids is not None and vmid not in ctx.options.only_vmids:
                    continue
                if ctx.skips_guest(source.identity, vmid):
                    continue  # a guest the run leaves alone gets no dependent objects (SPEC 4.3)
                key = child_key(storage_key, "backup", volid=volid)
                payload = {
                    "storage": storage_id,
                    "volid": volid,
                    "vmid": vmid or 0,
                    "virtual_machine": vm_ids.get(vm_key(source, vmid)) if vmid in wanted_vmids else None,
                    "ctime": iso(row.get("ctime")),
                    "size": int(row["size"]) if row.get("size") is not None else None,
                    "format": str(row.get("format") or ""),
                    "notes": str(row.get("notes") or ""),
                    "protected": bool(int(row.get("protected") or 0)),
                }
                out[key] = Desired(key, volid, payload)
        return out


class TaskKind(NaturalKind):
    name = "task"
    path = PLUGIN_RECORDS["task-history"].path
    read_fields = PLUGIN_RECORDS["task-history"].read_fields

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (PluginNodeKind(), VirtualMachineKind())

    def guest_of(self, current: Current) -> int | None:
        return decimal(current.data.get("vmid"))

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        pks = await plugin_endpoints(ctx)
        return {
            "endpoint": {
                pk: s.identity for s in ctx.sources for bid, pk in pks.items() if bid == s.backend_id
            }
        }

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["endpoint"].get(_nested_id(row.get("endpoint")))
        return format_key("task", endpoint=identity, upid=row.get("upid")) if identity else None

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        pks = await plugin_endpoints(ctx)
        infos = await clusters(ctx)
        hv_nodes = await ids_with_existing(ctx, PluginNodeKind())
        vm_ids = await known_ids(ctx, VirtualMachineKind())
        await skipped_guests(ctx)
        focus = ctx.options.focus
        upids = focus.upids if focus is not None else None
        # selected tasks: only the nodes their UPIDs name (a guest's tasks may be on any node)
        allowed = await focus_nodes(ctx) if upids else None

        async def read(source: HvSource, reader: ProxmoxReader) -> list[tuple[str, dict[str, Any]]]:
            info = infos.get(source.backend_id)
            names = [n.name for n in info.nodes if n.online] if info else []
            names = [n for n in names if node_allowed(allowed, source, n)]
            answers = await asyncio.gather(
                *(reader.node_get(n, f"nodes/{n}/tasks", {"limit": TASK_LIMIT}) for n in names)
            )  # a node that stopped answering lists nothing and is left out (reader.silent_nodes)
            await report_silent_nodes(ctx, source, reader)
            return [(n, row) for n, rows in zip(names, answers, strict=True) for row in rows or []]

        found = await ctx.per_endpoint(read)
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            pk = pks.get(source.backend_id)
            if pk is None:
                continue
            for node, row in found.get(source.backend_id, []):
                upid = str(row.get("upid") or "")
                if not upid or row.get("starttime") is None:
                    continue
                target = str(row.get("id") or "")
                vmid = decimal(target)
                if upids is not None:
                    if upid not in upids:
                        continue  # selected tasks: by UPID (a node task has no VMID)
                elif ctx.options.only_vmids is not None and vmid not in ctx.options.only_vmids:
                    continue
                if ctx.skips_guest(source.identity, vmid):
                    continue  # a guest the run leaves alone gets no task history (SPEC 4.3)
                key = format_key("task", endpoint=source.identity, upid=upid)
                payload = {
                    "endpoint": pk,
                    "node": hv_nodes.get(format_key("hv_node", endpoint=source.identity, node=node)),
                    "upid": upid,
                    "task_type": str(row.get("type") or ""),
                    "vmid": vmid,
                    "virtual_machine": vm_ids.get(vm_key(source, vmid)) if vmid is not None else None,
                    "user": str(row.get("user") or ""),
                    "status": str(row.get("status") or ""),
                    "starttime": iso(row.get("starttime")),
                    "endtime": iso(row.get("endtime")),
                }
                out[key] = Desired(key, upid, payload)
        return out


#: Retention of task-history rows Proxmox no longer lists (docs/sync.md "Task history retention").
TASK_RETENTION_DAYS = 30


def upid_node(upid: Any) -> str | None:
    """The node a UPID names (`UPID:<node>:...`), None for anything else."""
    parts = str(upid or "").split(":")
    return parts[1] if len(parts) > 2 and parts[0] == "UPID" else None


def _started_before(value: Any, cutoff: datetime) -> bool:
    if not value:
        return False
    try:
        started = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return False
    return (started if started.tzinfo else started.replace(tzinfo=UTC)) < cutoff


async def prune_tasks(ctx: SyncContext, counts: Counts, kind: TaskKind) -> None:
    """Delete managed task rows Proxmox no longer lists that started more than TASK_RETENTION_DAYS ago.

    Proxmox keeps a bounded task log per node; without this the NetBox table would only grow. Rows of
    an endpoint that failed to read, of a node that did not answer (its list was not read, so its rows
    are not "no longer listed"), rows hvsync did not write (no `hvsync` tag) and every row in a
    selected-object run are kept."""
    if ctx.options.partial:
        return
    listed = set(ctx.ids.get(kind.name, {}))
    cutoff = datetime.now(UTC) - timedelta(days=TASK_RETENTION_DAYS)
    current = await kind.current(ctx)
    silent = await silent_nodes(ctx)
    old = [
        c
        for c in current.values()
        if c.key not in listed
        and ctx.source_of(c.key) not in ctx.failed_endpoints
        and upid_node(c.data.get("upid")) not in silent.get(ctx.source_of(c.key), set())
        and not left_alone(ctx, kind, c)
        and _started_before(c.data.get("starttime"), cutoff)
    ]
    part = Counts()
    if ctx.options.dry_run:
        part.deleted = len(old)
        ctx.plans.extend(
            {
                "kind": kind.name,
                "action": "delete",
                "key": c.key,
                "object": c.label,
                "id": c.id,
                "reason": "retention",
            }
            for c in old
        )
    elif old:
        results = await ctx.netbox.bulk_delete(kind.path, [c.id for c in old])
        for gone, result in zip(old, results, strict=True):
            if isinstance(result, NetBoxError):
                part.failed += 1
                await ctx.problem(result.as_problem(gone.label), f"task {gone.label}: delete failed")
            else:
                part.deleted += 1
    ctx.tally(kind.name, counts, part)
    await ctx.step(
        "write",
        f"task: {part.deleted} row(s) older than {TASK_RETENTION_DAYS} days and no longer listed by Proxmox removed",
        counts=part.as_dict(),
    )


class TaskHistoryStage(Stage):
    """task-history: the node task lists, then the retention bound (`prune_tasks`)."""

    def __init__(self, slug: str, route: str, title: str) -> None:
        super().__init__(slug, route, [TaskKind()], title)

    async def after_kinds(self, ctx: SyncContext, counts: Counts) -> None:
        await prune_tasks(ctx, counts, self.kinds[0])  # type: ignore[arg-type]
