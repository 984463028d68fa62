"""replications and backup-routines: cluster job definitions as plugin records.

Identity is natural (plugin endpoint + job id / replication id). A job that disappears from Proxmox is
not deleted: the gone rule (sync/gone.py) marks its record `gone_since` with `status: stale` (and
`active`, unmarked, again if it comes back), under the same conditions as every other kind.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.guests import skipped_guests, vm_key
from hvsync_backend.sync.plan import Current, Desired
from hvsync_backend.sync.plugin_endpoints import plugin_endpoints
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader
from hvsync_backend.sync.run import SyncContext
from hvsync_backend.sync.stages.plugin_records import (
    NaturalKind,
    PluginNodeKind,
    PluginStorageKind,
    _nested_id,
)
from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind
from hvsync_backend.wire import PLUGIN_RECORDS
from hvsync_backend.wire.keys import format_key
from hvsync_backend.wire.numbers import decimal

PBS_MODES = {"default", "legacy", "data"}
#: keys of a backup job that Proxmox recomputes on its own (`next-run` moves after every scheduled run):
#: kept out of `raw_config`, so a routine nobody changed is not rewritten after each run
VOLATILE_BACKUP_KEYS = frozenset({"next-run"})


def _props(text: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in str(text or "").split(","):
        name, sep, value = part.partition("=")
        if sep:
            out[name.strip()] = value.strip()
    return out


def _int(value: Any) -> int | None:
    return decimal(value if isinstance(value, int) else str(value or ""), low=0)


def utc_stamp(value: Any) -> str | None:
    """A time as the one text the plan compares: ISO 8601 in UTC with `Z`, whole seconds. Takes Proxmox's
    epoch seconds or NetBox's ISO text (in NetBox's TIME_ZONE, whatever it is); None for none or junk."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip() if value is not None and not isinstance(value, bool) else ""
    try:
        if text.isdigit():
            when = dt.datetime.fromtimestamp(int(text), dt.UTC)
        else:
            when = dt.datetime.fromisoformat(text)
    except (ValueError, OverflowError, OSError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobKind(NaturalKind):
    """Shared stale-marking: managed records whose job vanished get `status: stale` with their gone mark."""

    gone_on_record = True
    gone_fields = MappingProxyType({"status": "stale"})

    id_field = ""
    proxmox_path = ""
    #: its `wire.keys.RECORD_SHAPES` shape
    key_shape = ""

    async def lookups(self, ctx: SyncContext) -> dict[str, Any]:
        pks = await plugin_endpoints(ctx)
        return {
            "endpoint": {
                pk: s.identity for s in ctx.sources for bid, pk in pks.items() if bid == s.backend_id
            }
        }

    def row_key(self, row: Mapping[str, Any], ctx: SyncContext, lookups: dict[str, Any]) -> str | None:
        identity = lookups["endpoint"].get(_nested_id(row.get("endpoint")))
        return format_key(self.key_shape, endpoint=identity, id=row.get(self.id_field)) if identity else None

    def build(
        self, ctx: SyncContext, source: HvSource, pk: int, job: dict[str, Any], refs: dict[str, Any]
    ) -> dict[str, Any] | None:
        raise NotImplementedError

    async def refs(self, ctx: SyncContext) -> dict[str, Any]:
        return {}

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        pks = await plugin_endpoints(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> list[dict[str, Any]]:
            return list(await reader.get(self.proxmox_path) or [])

        found = await ctx.per_endpoint(read)
        refs = await self.refs(ctx)
        await skipped_guests(ctx)
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            pk = pks.get(source.backend_id)
            if pk is None or source.backend_id not in found:
                continue
            for job in found[source.backend_id]:
                payload = self.build(ctx, source, pk, job, refs)
                if payload is not None:
                    key = format_key(self.key_shape, endpoint=source.identity, id=payload[self.id_field])
                    out[key] = Desired(key, str(payload[self.id_field]), {**payload, "status": "active"})
        return out


class BackupRoutineKind(JobKind):
    name = "backup-routine"
    path = PLUGIN_RECORDS["backup-routine"].path
    id_field = "job_id"
    proxmox_path = "cluster/backup"
    key_shape = "backup_routine"
    read_fields = PLUGIN_RECORDS["backup-routine"].read_fields

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (PluginNodeKind(), PluginStorageKind())

    async def refs(self, ctx: SyncContext) -> dict[str, Any]:
        return {
            "nodes": await known_ids(ctx, PluginNodeKind()),
            "storage": await known_ids(ctx, PluginStorageKind()),
        }

    async def current(self, ctx: SyncContext) -> dict[str, Current]:
        """NetBox's `next_run` in the text `build` gives it (NetBox answers in its own time zone)."""
        out = await super().current(ctx)
        return {
            key: Current(
                have.key, have.id, have.label, {**have.data, "next_run": utc_stamp(have.data.get("next_run"))}
            )
            if "next_run" in have.data
            else have
            for key, have in out.items()
        }

    def build(
        self, ctx: SyncContext, source: HvSource, pk: int, job: dict[str, Any], refs: dict[str, Any]
    ) -> dict[str, Any] | None:
        job_id = str(job.get("id") or "")
        if not job_id:
            return None
        prune = _props(job.get("prune-backups"))
        fleecing = _props(job.get("fleecing"))
        fleecing_on = fleecing.get("enabled") in ("1", "true")
        storage_of = lambda name: (  # noqa: E731
            refs["storage"].get(format_key("hv_storage", endpoint=source.identity, storage=name))
            if name
            else None
        )
        mode = str(job.get("pbs-change-detection-mode") or "")
        performance = _props(job.get("performance"))
        return {
            "endpoint": pk,
            "job_id": job_id,
            "enabled": str(job.get("enabled", 1)) not in ("0", "false"),
            "schedule": str(job.get("schedule") or job.get("starttime") or ""),
            # Proxmox's next start (absent for a disabled job): written on its own when only it moved
            "next_run": utc_stamp(job.get("next-run")),
            "node": refs["nodes"].get(format_key("hv_node", endpoint=source.identity, node=job["node"]))
            if job.get("node")
            else None,
            "storage": storage_of(job.get("storage")),
            "selection": sorted(
                v for v in (decimal(t) for t in str(job.get("vmid") or "").split(",")) if v is not None
            ),
            "comment": str(job.get("comment") or "")[:500],
            "keep_last": _int(prune.get("keep-last")),
            "keep_daily": _int(prune.get("keep-daily")),
            "keep_weekly": _int(prune.get("keep-weekly")),
            "keep_monthly": _int(prune.get("keep-monthly")),
            "keep_yearly": _int(prune.get("keep-yearly")),
            "keep_all": (prune.get("keep-all") == "1") if "keep-all" in prune else None,
            "notes_template": str(job.get("notes-template") or "")[:1024],
            "bwlimit": _int(job.get("bwlimit")),
            "zstd": _int(job.get("zstd")),
            "io_workers": _int(performance.get("max-workers")),
            "fleecing": str(job.get("fleecing") or "") if fleecing_on else "",
            "fleecing_storage": storage_of(fleecing.get("storage")) if fleecing_on else None,
            "repeat_missed": str(job.get("repeat-missed", 0)) in ("1", "true"),
            "pbs_change_detection_mode": mode if mode in PBS_MODES else "",
            "raw_config": {k: v for k, v in job.items() if k not in VOLATILE_BACKUP_KEYS},
        }


class ReplicationKind(JobKind):
    name = "replication"
    path = PLUGIN_RECORDS["replication"].path
    id_field = "replication_id"
    proxmox_path = "cluster/replication"
    key_shape = "replication"
    read_fields = PLUGIN_RECORDS["replication"].read_fields

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (PluginNodeKind(), VirtualMachineKind())

    def guest_of(self, current: Current) -> int | None:
        return _int(current.data.get("guest"))

    async def refs(self, ctx: SyncContext) -> dict[str, Any]:
        return {
            "nodes": await known_ids(ctx, PluginNodeKind()),
            "vms": await known_ids(ctx, VirtualMachineKind()),
        }

    def build(
        self, ctx: SyncContext, source: HvSource, pk: int, job: dict[str, Any], refs: dict[str, Any]
    ) -> dict[str, Any] | None:
        rid = str(job.get("id") or "")
        guest = _int(job.get("guest")) or _int(rid.split("-")[0])
        if ctx.skips_guest(source.identity, guest):
            return None  # a guest the run leaves alone gets no dependent objects (SPEC 4.3)
        vm = refs["vms"].get(vm_key(source, guest)) if guest else None
        if not rid or vm is None:
            return None  # a replication needs its VM in NetBox (skipped VMs get no dependent objects)
        src = str(job.get("source") or "")
        rate = job.get("rate")
        return {
            "endpoint": pk,
            "replication_id": rid,
            "virtual_machine": vm,
            "hv_node": refs["nodes"].get(format_key("hv_node", endpoint=source.identity, node=src))
            if src
            else None,
            "guest": guest,
            "target": str(job.get("target") or ""),
            "job_type": str(job.get("type") or "local"),
            "schedule": str(job.get("schedule") or ""),
            "rate": float(rate) if rate not in (None, "") else None,
            "comment": str(job.get("comment") or "")[:500],
            "disable": str(job.get("disable", 0)) in ("1", "true"),
            "source": src,
            "jobnum": _int(job.get("jobnum"))
            if _int(job.get("jobnum")) is not None
            else _int(rid.split("-")[-1]) or 0,
            "remove_job": job.get("remove_job") or None,
            "raw_config": dict(job),
        }
