"""vm-snapshots: guest snapshots as the plugin's snapshot records (`/api/plugins/hvsync/snapshots/`).

A snapshot's identity is natural in NetBox (its VM and its name are unique together), so no custom
field is needed: the key is rebuilt from the managed VM's identity and the snapshot name.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.guests import guests, vm_key
from hvsync_backend.sync.plan import Current, Desired
from hvsync_backend.sync.proxmox import Guest, HvSource, ProxmoxReader
from hvsync_backend.sync.run import MANAGED_TAG, SyncContext
from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind
from hvsync_backend.wire import PLUGIN_RECORDS
from hvsync_backend.wire.keys import child_key, format_key

PATH = PLUGIN_RECORDS["snapshot"].path


def iso(epoch: Any) -> str | None:
    """Proxmox epoch seconds -> the ISO 8601 form NetBox answers with."""
    if epoch in (None, ""):
        return None
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def snapshots(ctx: SyncContext) -> dict[int, dict[int, list[dict[str, Any]]]]:
    """endpoint -> vmid -> snapshots (without Proxmox's 'current' pseudo-entry), cached for the run."""
    if ctx.reads.snapshots is None:
        by_endpoint = await guests(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> dict[int, list[dict[str, Any]]]:
            async def one(guest: Guest) -> list[dict[str, Any]]:
                rows = await reader.get(f"nodes/{guest.node}/{guest.kind}/{guest.vmid}/snapshot") or []
                return [r for r in rows if r.get("name") and r.get("name") != "current"]

            found = by_endpoint.get(source.backend_id, [])
            lists = await asyncio.gather(*(one(g) for g in found))
            return {g.vmid: rows for g, rows in zip(found, lists, strict=True)}

        ctx.reads.snapshots = await ctx.per_endpoint(read)
    return ctx.reads.snapshots


class SnapshotKind(Kind):
    name = "snapshot"
    path = PATH
    read_fields = PLUGIN_RECORDS["snapshot"].read_fields
    key_field = False
    gone_on_record = True

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (VirtualMachineKind(),)

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        found = await snapshots(ctx)
        vm_ids = await known_ids(ctx, VirtualMachineKind())
        by_endpoint = await guests(ctx)
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for guest in by_endpoint.get(source.backend_id, []):
                vm_id = vm_ids.get(vm_key(source, guest.vmid))
                if vm_id is None and not ctx.options.dry_run:
                    continue
                for snap in found.get(source.backend_id, {}).get(guest.vmid, []):
                    focus = ctx.options.focus
                    if focus is not None and not focus.allows(focus.snapshots, str(snap["name"])):
                        continue
                    key = format_key("snapshot", endpoint=source.identity, vmid=guest.vmid, name=snap["name"])
                    payload = {
                        "virtual_machine": vm_id,
                        "name": str(snap["name"]),
                        "parent": str(snap.get("parent") or ""),
                        "snaptime": iso(snap.get("snaptime")),
                        "vmstate": bool(int(snap.get("vmstate") or 0)),
                        "description": str(snap.get("description") or "").strip(),
                    }
                    out[key] = Desired(key, f"{guest.name}@{snap['name']}", payload)
        return out

    def current_fields(self) -> tuple[str, ...]:
        return ("id", *self.read_fields, "gone_since")

    def read_params(self, ctx: SyncContext) -> dict[str, Any]:
        return {"tag": MANAGED_TAG}

    async def current(self, ctx: SyncContext) -> dict[str, Current]:
        vm_keys = {vm_id: key for key, vm_id in (await known_ids(ctx, VirtualMachineKind())).items()}
        rows = await self.read_current(ctx)
        out: dict[str, Current] = {}
        for row in rows:
            vm = row.get("virtual_machine") or {}
            vm_id = vm.get("id")
            owner = vm_keys.get(vm_id) if isinstance(vm_id, int) else None
            if owner is None:
                continue
            key = child_key(owner, "snapshot", name=row["name"])
            out[key] = Current(key, int(row["id"]), f"{vm.get('name')}@{row['name']}", row)
        return out
