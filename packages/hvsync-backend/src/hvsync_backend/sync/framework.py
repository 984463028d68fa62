"""The stage framework: per kind of NetBox object, read Proxmox, read NetBox, diff, write, report.

A stage is an ordered list of kinds (devices: cluster types' clusters, then nodes). Every managed
NetBox object carries the `hvsync` tag. Its Proxmox identity is its sync-state sidecar where the kind
has one (`sync/sidecars.py`), else (or when the plugin has no record of the endpoint) the `hvsync_key`
custom field, which is kept as a readable mirror. Untagged objects are never read as managed, so they
are never changed or deleted.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, ClassVar

from hvsync_backend.inventory.batching import SUMMED_INTO_PARENT
from hvsync_backend.inventory.errors import NetBoxError
from hvsync_backend.sync import gone, sidecars
from hvsync_backend.sync.plan import Current, Desired, Plan, make_plan
from hvsync_backend.sync.run import KEY_FIELD, MANAGED_TAG, MAX_ERRORS, Counts, SyncContext
from hvsync_backend.wire.keys import SEPARATOR, format_key
from hvsync_backend.wire.numbers import decimal


def vmid_of(key: str) -> int | None:
    """The VMID a VM-scoped key (`<endpoint>|vm|<vmid>...`) starts with."""
    parts = key.split(SEPARATOR, 3)
    return decimal(parts[2]) if len(parts) >= 3 and parts[1] == "vm" else None


def with_key_mirror(desired: Desired) -> Desired:
    """The desired object with its `hvsync_key` mirror, so an edited or cleared key is written back."""
    custom = {**(desired.payload.get("custom_fields") or {}), KEY_FIELD: desired.key}
    return replace(desired, payload={**desired.payload, "custom_fields": custom})


def managed_payload(desired: Desired, key_field: bool = True) -> dict[str, Any]:
    """The create body: the stage's fields plus the managed tag and (unless the kind has a natural key
    in NetBox) the identity key custom field."""
    payload = dict(desired.payload)
    tags = list(payload.get("tags") or [])
    slugs = {t["slug"] if isinstance(t, Mapping) else t for t in tags}
    if MANAGED_TAG not in slugs:
        tags.append({"slug": MANAGED_TAG})
    payload["tags"] = [t if isinstance(t, Mapping) else {"slug": t} for t in tags]
    if key_field:
        payload["custom_fields"] = {**(payload.get("custom_fields") or {}), KEY_FIELD: desired.key}
    return payload


class Kind(ABC):
    """One NetBox object type a stage reconciles."""

    name: str = ""
    path: str = ""
    read_fields: tuple[str, ...] = ("id", "name")
    #: False for kinds that only set fields on objects another stage owns (never create or delete).
    owns_objects: bool = True
    #: False for kinds whose identity is a natural key in NetBox (plugin models): no custom field.
    key_field: bool = True
    #: The plugin's sync-state model recording this kind's identity (None: the custom field only).
    sidecar: sidecars.SidecarSpec | None = None
    #: True for kinds derived from guests' configs but shared between guests (VLANs, IP addresses):
    #: while a run leaves guests of an endpoint out, it cannot tell which of these vanished.
    from_guests: bool = False
    #: True for plugin records without a sidecar (storage, backups, snapshots, jobs): the gone mark
    #: (`gone_since`, sync/gone.py) is written on the record itself; kinds with a sidecar mark that.
    gone_on_record: bool = False
    #: fields written with the gone mark on the record (jobs: `status: stale`)
    gone_fields: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    #: True for guest objects kept on node-local storage (backups): a node not answering hides them
    storage_bound: bool = False

    @abstractmethod
    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        """The objects Proxmox says should exist, keyed by identity."""

    def view(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """NetBox object -> the shape compared with desired payloads."""
        return obj

    def label(self, obj: Mapping[str, Any]) -> str:
        return str(obj.get("display") or obj.get("name") or obj.get("id"))

    #: True for kinds whose keys start with a VM key (`<endpoint>|vm|<vmid>`): selected-VM runs read
    #: only those VMs' objects from NetBox instead of every managed object.
    vm_scoped: bool = False

    def read_params(self, ctx: SyncContext) -> dict[str, Any]:
        params: dict[str, Any] = {"tag": MANAGED_TAG}
        if self.vm_scoped and ctx.options.only_vmids is not None:
            params[f"cf_{KEY_FIELD}__isw"] = [
                format_key("vm", endpoint=s.identity, vmid=vmid)
                for s in ctx.sources
                for vmid in sorted(ctx.options.only_vmids)
            ]
        return params

    def current_fields(self) -> tuple[str, ...]:
        # The tag filter already says "managed"; tags are only read by kinds that compare them.
        return tuple(dict.fromkeys(("id", *self.read_fields, "custom_fields")))

    def read_current(
        self, ctx: SyncContext, params: dict[str, Any] | None = None
    ) -> Awaitable[list[dict[str, Any]]]:
        """This kind's managed objects as the comparison reads them: `current_fields()` only, related
        objects by id (`flat`: from the plugin's rows route when it serves the path)."""
        query = self.read_params(ctx) if params is None else params
        return ctx.netbox.list_all(self.path, query, fields=self.current_fields(), flat=True)

    def linked_kinds(self) -> tuple[Kind, ...]:
        """The other kinds whose NetBox objects this kind reads: mostly their ids (`known_ids`), what its
        objects point at. A run that does not reconcile one still reads it, so `start_prefetch` starts
        that read too."""
        return ()

    def prefetch_current(self, ctx: SyncContext) -> None:
        """Start the reads `current` makes (this kind's rows and sidecars) ahead of time; used only if
        nothing is written to them before they are needed (the client's cache drops stale reads)."""
        ctx.netbox.prefetch(self.path, self.read_params(ctx), fields=self.current_fields(), flat=True)
        if self.sidecar is not None:
            ctx.background(sidecars.prefetch(ctx, self))

    def prefetch(self, ctx: SyncContext) -> None:
        """Start every NetBox read reconciling this kind makes that is known at the run's start; kinds that
        look up supporting objects or warm Proxmox reads add theirs."""
        self.prefetch_current(ctx)

    async def current(self, ctx: SyncContext) -> dict[str, Current]:
        """Managed objects of this kind within the run's endpoint scope, keyed by their sidecar's identity
        (else by their `hvsync_key`: objects written before sidecars, or endpoints the plugin lacks)."""
        rows, states = await asyncio.gather(
            self.read_current(ctx),
            sidecars.read(ctx, self),
        )
        by_link = {state.link_id: key for key, state in states.items()}
        if self.vm_scoped and ctx.options.only_vmids is not None:
            # selected VMs are read by key prefix: add those whose sidecar names them but whose key was edited
            seen = {int(row["id"]) for row in rows}
            missing = sorted(set(by_link) - seen)
            if missing:
                params = {"tag": MANAGED_TAG, "id": missing}
                rows = [*rows, *await self.read_current(ctx, params)]
        out: dict[str, Current] = {}
        scope = ctx.identities
        wanted = ctx.options.only_vmids
        for row in rows:
            key = by_link.get(int(row["id"]))
            if key is None:
                key = (row.get("custom_fields") or {}).get(KEY_FIELD)
                if key in states:
                    continue  # another object's sidecar holds this identity: that object is the one
            if not key or ctx.source_of(key) not in scope or not self.accepts(key):
                continue
            if self.vm_scoped and wanted is not None and vmid_of(key) not in wanted:
                continue  # a key prefix 'x|vm|10' also matches 'x|vm|100'

            out[key] = Current(key, int(row["id"]), self.label(row), self.view(row))
        return out

    def accepts(self, key: str) -> bool:
        """Whether a managed key belongs to this kind (several kinds may share one NetBox model)."""
        return True

    def guest_of(self, current: Current) -> int | None:
        """The VMID of the guest a managed object belongs to, if any (`SyncContext.skips_guest`)."""
        return vmid_of(current.key)


def left_alone(ctx: SyncContext, kind: Kind, current: Current) -> bool:
    """Whether a managed object is outside what this run looked at, so it must not be deleted: it belongs
    to a guest the run skips, or it is shared between guests of an endpoint the run saw only in part."""
    source = ctx.source_of(current.key)
    guest = kind.guest_of(current)
    if guest is not None:
        return ctx.skips_guest(source, guest)
    return kind.from_guests and bool(ctx.reads.skipped_guests.get(source))


async def run_kind(kind: Kind, ctx: SyncContext, counts: Counts) -> Plan:
    """Reconcile one kind and record the NetBox ids of every desired object in `ctx.ids[kind.name]`."""
    # Proxmox and NetBox are read at the same time: one waits on the emulator/cluster, the other on NetBox.
    await ctx.step("read_proxmox", f"reading Proxmox for {kind.name}")
    await ctx.step("read_netbox", f"reading NetBox {kind.path}")
    desired, current = await asyncio.gather(kind.desired(ctx), kind.current(ctx))
    if kind.key_field and kind.owns_objects:
        desired = {key: with_key_mirror(want) for key, want in desired.items()}
    # A kind with a gone mark never deletes: what vanished is marked (sync/gone.py), and `delete_stale`
    # asks the plugin for deletion requests instead (applied at once only where auto-approve is set).
    deletes = ctx.options.delete_stale and kind.owns_objects and not gone.markable(kind)
    plan = make_plan(desired, current, delete_missing=deletes)
    vanished = list(plan.orphaned)
    # Never delete what belongs to an endpoint that could not be read in this run.
    kept = [c for c in plan.delete if ctx.source_of(c.key) in ctx.failed_endpoints]
    plan.delete = [c for c in plan.delete if ctx.source_of(c.key) not in ctx.failed_endpoints]
    plan.orphaned += kept
    # Never delete what belongs to a guest the run leaves alone: out of scope is not vanished (SPEC 4.3).
    plan.delete = [c for c in plan.delete if not left_alone(ctx, kind, c)]
    if ctx.options.partial:
        plan.delete, plan.orphaned, vanished = [], [], []
    if not kind.owns_objects:
        plan.create, plan.orphaned = [], []
    ids = ctx.ids.setdefault(kind.name, {})
    # what vanished but stays in NetBox (marked gone) keeps its id: its backups and tasks still link to it
    stays = {key for key in current if key not in desired} if gone.markable(kind) else set()
    ids.update({c.key: c.id for c in current.values() if c.key in desired or c.key in stays})
    part = Counts(total=len(desired), unchanged=len(plan.unchanged))
    await ctx.step(
        "diff",
        f"{kind.name}: {len(plan.create)} to create, {len(plan.update)} to update, "
        f"{len(plan.unchanged)} unchanged, {len(plan.delete)} to delete, {len(plan.orphaned)} orphaned",
        counts=part.as_dict(),
    )
    if ctx.options.dry_run:
        part.created, part.updated, part.deleted = len(plan.create), len(plan.update), len(plan.delete)
        ctx.plans.extend({"kind": kind.name, **row} for row in plan.describe())
        await gone.settle(kind, ctx, vanished, desired, current, part)
        counts.add(part)
        return plan
    await write_plan(kind, ctx, plan, part, ids)
    if kind.owns_objects:
        await sidecars.write(ctx, kind, desired, ids, part)
    await gone.settle(kind, ctx, vanished, desired, current, part)
    ctx.tally(kind.name, counts, part)
    await ctx.step("write", f"{kind.name}: written", counts=part.as_dict())
    return plan


async def write_plan(kind: Kind, ctx: SyncContext, plan: Plan, part: Counts, ids: dict[str, int]) -> None:
    creates = [managed_payload(d, kind.key_field) for d in plan.create]
    updates = [{"id": u.id, **u.changes} for u in plan.update]
    gone = [c.id for c in plan.delete]
    link = SUMMED_INTO_PARENT.get(kind.path)
    if link is None:
        created, updated, deleted = await asyncio.gather(
            ctx.netbox.bulk_create(kind.path, creates),
            ctx.netbox.bulk_update(kind.path, updates),
            ctx.netbox.bulk_delete(kind.path, gone),
        )
    else:  # NetBox sums these into their parent per transaction: one parent's writes never run at once
        created = await ctx.netbox.bulk_create(kind.path, creates)
        updated = await ctx.netbox.bulk_update(kind.path, updates, [u.current.get(link) for u in plan.update])
        deleted = await ctx.netbox.bulk_delete(kind.path, gone, [c.data.get(link) for c in plan.delete])
    for want, result in zip(plan.create, created, strict=True):
        if isinstance(result, NetBoxError):
            part.failed += 1
            await ctx.problem(result.as_problem(want.label), f"{kind.name} {want.label}: create failed")
        else:
            part.created += 1
            ids[want.key] = int(result["id"])
    for upd, result in zip(plan.update, updated, strict=True):
        if isinstance(result, NetBoxError):
            part.failed += 1
            await ctx.problem(result.as_problem(upd.label), f"{kind.name} {upd.label}: update failed")
        else:
            part.updated += 1
    for removed, result in zip(plan.delete, deleted, strict=True):
        if isinstance(result, NetBoxError):
            part.failed += 1
            await ctx.problem(result.as_problem(removed.label), f"{kind.name} {removed.label}: delete failed")
        else:
            part.deleted += 1
    for want in plan.create:
        if want.key not in ids:
            ids.pop(want.key, None)


class Stage:
    """A named, ordered group of kinds exposed as one stream."""

    def __init__(self, slug: str, route: str, kinds: Iterable[Kind], title: str) -> None:
        self.slug = slug
        self.route = route
        self.kinds = list(kinds)
        self.title = title

    async def run(self, ctx: SyncContext) -> tuple[Counts, bool]:
        """Run every kind; returns the stage counts and whether it failed fatally."""
        ctx.stage = self.slug
        counts = Counts()
        await ctx.step("start", f"{self.title}: starting", counts=counts.as_dict())
        for kind in self.kinds:
            await run_kind(kind, ctx, counts)
        await self.after_kinds(ctx, counts)
        await ctx.step("done", f"{self.title}: done", counts=counts.as_dict())
        return counts, False

    async def after_kinds(self, ctx: SyncContext, counts: Counts) -> None:
        """Stage-specific work once every kind is reconciled (e.g. task-history retention)."""


def stage_summary(
    stage: str, counts: Counts, started: float, ctx: SyncContext, fatal: dict[str, Any] | None
) -> dict[str, Any]:
    """The `complete` payload (contracts/sse-frames.schema.json)."""
    errors = ctx.problems[:MAX_ERRORS]
    ok = fatal is None and counts.failed == 0 and not ctx.failed_endpoints and not ctx.guard_problems
    primary = fatal or next((p for p in ctx.problems if p.get("source") == "proxmox"), None)
    # the mass-vanish guard says why nothing was marked: a person must look (failure_kind mass_vanish)
    primary = primary or next(iter(ctx.guard_problems), None)
    # a failed NetBox write says more than a notice (e.g. an endpoint without a plugin record)
    primary = primary or next((p for p in ctx.problems if p.get("source") == "netbox"), None)
    if primary is None and ctx.problems:
        primary = ctx.problems[0]
    data: dict[str, Any] = {
        "stage": stage,
        "ok": ok,
        "dry_run": ctx.options.dry_run,
        "summary": counts.as_dict(),
        "duration_ms": round((time.monotonic() - started) * 1000, 1),
        "errors": errors,
        "error": None if ok else primary,
    }
    if ctx.options.dry_run:
        data["plan"] = ctx.plans[:1000]
    return data


def linked_outside(kinds: Sequence[Kind]) -> list[Kind]:
    """The kinds `kinds` link to that are not among them, once each. One level: a linked kind's own
    links are read when its `current` asks for them (only plugin records' lookups do)."""
    seen = {kind.name for kind in kinds}
    out: list[Kind] = []
    for kind in kinds:
        for linked in kind.linked_kinds():
            if linked.name not in seen:
                seen.add(linked.name)
                out.append(linked)
    return out


async def known_ids(ctx: SyncContext, kind: Kind) -> dict[str, int]:
    """Identity key -> NetBox id for a kind: from this run if it ran, else read from NetBox."""
    if kind.name not in ctx.ids:
        current = await kind.current(ctx)
        ctx.ids[kind.name] = {key: c.id for key, c in current.items()}
    return ctx.ids[kind.name]
