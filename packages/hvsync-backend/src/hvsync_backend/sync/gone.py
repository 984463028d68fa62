"""Gone from Proxmox: marking managed objects a complete read no longer finds, and clearing the mark when
they come back (docs/sync.md, "Seen, and gone").

A run never deletes what vanished: it sets `gone_since` once (the first time; later runs keep it) on the
object's sync-state sidecar, or on the plugin record itself for kinds without one (storage, backups,
snapshots, replications, backup routines), and clears it when a run sees the object again. What the mark
does to NetBox's own fields (a status, a deletion request) is the plugin's policy, applied by its receiver
on the transition, whichever write path the backend used.

Only what the run read completely is judged: not an endpoint that failed, not a node that did not answer,
not a guest the run leaves out (sync modes, unreadable configs), never a selected-object run. The
mass-vanish guard refuses to mark anything of an endpoint when one run would mark more than its share of
that endpoint's objects at once (a token whose scope shrank, a pool filter, an emptied cluster).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from hvsync_backend.inventory.errors import NetBoxError
from hvsync_backend.sync.plan import Current, Desired
from hvsync_backend.sync.plugin_endpoints import plugin_endpoints
from hvsync_backend.sync.reads import clusters
from hvsync_backend.sync.run import GUARD_MIN_OBJECTS, MANAGED_TAG, Counts, SyncContext
from hvsync_backend.sync.sidecars import SidecarSpec, nested_id
from hvsync_backend.wire import PLUGIN_RECORDS
from hvsync_backend.wire.keys import SEPARATOR

#: the `failure_kind` of a stage the guard stopped (the plugin's run page shows it with the message)
MASS_VANISH = "mass_vanish"


class Kind(Protocol):
    """What the gone rule needs of a stage kind (`framework.Kind`, which imports this module)."""

    name: str
    path: str
    sidecar: SidecarSpec | None
    owns_objects: bool
    from_guests: bool
    gone_on_record: bool
    storage_bound: bool

    @property
    def gone_fields(self) -> Mapping[str, Any]: ...

    def guest_of(self, current: Current) -> int | None: ...


#: the plugin's gone policies (`HvEndpoint.gone_policy`); only `request-deletion` concerns the backend
REQUEST_DELETION = "request-deletion"


def now() -> str:
    return datetime.now(UTC).isoformat()


def full_scope(ctx: SyncContext) -> bool:
    """Whether this run may judge vanished objects at all: selected-object runs never do."""
    options = ctx.options
    return not (options.partial or options.only_vmids is not None or options.focus is not None)


async def silent_nodes(ctx: SyncContext) -> dict[str, set[str]]:
    """Source identity -> nodes that did not answer in this run: listed offline by Proxmox, or stopped
    answering a node read since (595, `ProxmoxReader.silent_nodes`)."""
    infos = await clusters(ctx)
    out: dict[str, set[str]] = {}
    for s in ctx.sources:
        offline = (
            {n.name for n in infos[s.backend_id].nodes if not n.online} if s.backend_id in infos else set()
        )
        reader = ctx.readers.get(s.backend_id)
        out[s.identity] = offline | (set(reader.silent_nodes) if reader else set())
    return out


def node_of(key: str) -> str | None:
    """The node a node-scoped key names (`<endpoint>|node|<node>...`, `<endpoint>|hvnode|<node>`)."""
    parts = key.split(SEPARATOR)
    return parts[2] if len(parts) >= 3 and parts[1] in ("node", "hvnode") else None


def read_whole(ctx: SyncContext, kind: Kind, current: Current, silent: Mapping[str, set[str]]) -> bool:
    """Whether this run read everything that could hold `current`, so its absence means it is gone."""
    source = ctx.source_of(current.key)
    if source in ctx.failed_endpoints or source in ctx.gone_guarded:
        return False
    quiet = silent.get(source, set())
    guest = kind.guest_of(current)
    if guest is not None:
        # a guest listed but left out (sync mode, unreadable config, its node down) is not gone
        return not ctx.skips_guest(source, guest) and not (kind.storage_bound and quiet)
    node = node_of(current.key)
    if node is not None:
        return node not in quiet
    if kind.from_guests and ctx.reads.skipped_guests.get(source):
        return False  # shared between guests, some of which this run did not read
    return not quiet  # endpoint-wide objects: every node must have answered


def gone_since_of(ctx: SyncContext, kind: Kind, current: Current) -> Any:
    """The object's present mark (None: not marked), from its sidecar or its own record."""
    if kind.sidecar is not None:
        state = (ctx.lookups.sidecars.get(kind.name) or {}).get(current.key)
        return state.data.get("gone_since") if state is not None else None
    return current.data.get("gone_since")


def markable(kind: Kind) -> bool:
    return kind.owns_objects and (kind.sidecar is not None or kind.gone_on_record)


def guard(
    ctx: SyncContext, newly: Sequence[Current], current: Mapping[str, Current]
) -> dict[str, tuple[int, int, float]]:
    """Source identity -> (would mark, objects, share) for every endpoint the guard stops this time."""
    tripped: dict[str, tuple[int, int, float]] = {}
    per_source: dict[str, int] = {}
    for c in newly:
        per_source[ctx.source_of(c.key)] = per_source.get(ctx.source_of(c.key), 0) + 1
    for source, count in per_source.items():
        total = sum(1 for c in current.values() if ctx.source_of(c.key) == source)
        share = ctx.gone_policy(source).guard_share
        if count >= GUARD_MIN_OBJECTS and count > share * total:
            tripped[source] = (count, total, share)
    return tripped


async def settle(
    kind: Kind,
    ctx: SyncContext,
    vanished: Sequence[Current],
    desired: Mapping[str, Desired],
    current: Mapping[str, Current],
    part: Counts,
) -> None:
    """Mark what vanished (guarded), clear the mark of what came back; counts `gone`, `returned` and
    `deletion_requests` (the marks whose endpoint policy or run asks the plugin for a request)."""
    if not markable(kind):
        return
    returned = [c for key, c in current.items() if key in desired and gone_since_of(ctx, kind, c)]
    newly: list[Current] = []
    if full_scope(ctx) and vanished:
        silent = await silent_nodes(ctx)
        newly = [c for c in vanished if not gone_since_of(ctx, kind, c) and read_whole(ctx, kind, c, silent)]
    for source, (count, total, share) in guard(ctx, newly, current).items():
        ctx.gone_guarded.add(source)
        await guard_problem(ctx, kind, source, count, total, share)
    newly = [c for c in newly if ctx.source_of(c.key) not in ctx.gone_guarded]
    if ctx.options.dry_run:
        part.gone, part.returned = len(newly), len(returned)
        part.deletion_requests = sum(1 for c in newly if asks_deletion(ctx, c))
        return
    stamp = now()
    marked = await write_marks(kind, ctx, newly, {"gone_since": stamp, **kind.gone_fields}, ask=True)
    cleared = await write_marks(kind, ctx, returned, {"gone_since": None, "gone_request": False})
    part.gone += len(marked)
    part.returned += len(cleared)
    part.deletion_requests += sum(1 for c in marked if asks_deletion(ctx, c))
    if marked or cleared:
        await ctx.step("write", f"{kind.name}: {len(marked)} marked gone, {len(cleared)} returned")


def asks_deletion(ctx: SyncContext, current: Current) -> bool:
    return ctx.options.delete_stale or ctx.gone_policy(ctx.source_of(current.key)).policy == REQUEST_DELETION


async def write_marks(
    kind: Kind, ctx: SyncContext, objects: Sequence[Current], fields: Mapping[str, Any], *, ask: bool = False
) -> list[Current]:
    """Write `fields` on each object's sidecar (or record); returns the objects written."""
    rows: list[tuple[Current, dict[str, Any]]] = []
    states = ctx.lookups.sidecars.get(kind.name) or {}
    for c in objects:
        extra = {"gone_request": True} if ask and ctx.options.delete_stale else {}
        if kind.sidecar is not None:
            state = states.get(c.key)
            if state is None:
                continue  # known by its custom field only: nothing to mark until it has a sidecar
            rows.append((c, {"id": state.id, **fields, **extra, "last_run_id": ctx.run_id}))
        else:
            rows.append((c, {"id": c.id, **fields, **extra}))
    if not rows:
        return []
    path = kind.sidecar.path if kind.sidecar is not None else kind.path
    results = await ctx.netbox.bulk_update(path, [body for _, body in rows])
    done: list[Current] = []
    for (c, _), result in zip(rows, results, strict=True):
        if isinstance(result, NetBoxError):
            await ctx.problem(result.as_problem(c.label), f"{kind.name} {c.label}: gone mark failed")
        else:
            done.append(c)
    return done


async def guard_problem(
    ctx: SyncContext, kind: Kind, source: str, count: int, total: int, share: float
) -> None:
    backend_id = next((s.backend_id for s in ctx.sources if s.identity == source), None)
    detail = (
        f"mass-vanish guard: this run would mark {count} of {total} {kind.name} objects of Proxmox endpoint "
        f"{backend_id} gone (more than {share:.0%}, at least {GUARD_MIN_OBJECTS}); nothing of that endpoint "
        "is marked gone. Check the token's scope, pool filters and the cluster, then raise the endpoint's "
        "gone_guard_share if the objects really are gone"
    )
    problem = {
        "source": "backend",
        "status": None,
        "detail": detail,
        "object": kind.name,
        "endpoint_id": backend_id,
        "failure_kind": MASS_VANISH,
    }
    ctx.guard_problems.append(problem)
    await ctx.problem(problem, detail)


#: the plugin's cluster records (one per endpoint) carry the endpoint's last complete read
PLUGIN_CLUSTER_PATH = PLUGIN_RECORDS["cluster"].path
#: the read stamp is written at most this often per endpoint, so a no-change resync still writes nothing;
#: `last_seen` is as precise as this
READ_STAMP_INTERVAL = timedelta(hours=1)


async def record_complete_reads(ctx: SyncContext) -> int:
    """Stamp `last_complete_read` on the plugin cluster record of every endpoint this full run read whole,
    when the stamp there is older than READ_STAMP_INTERVAL: at most one small write per endpoint an hour,
    instead of rewriting every sidecar's `last_seen`. The plugin answers a present object's `last_seen`
    with it. Returns how many endpoints were stamped."""
    if ctx.options.dry_run or not full_scope(ctx) or ctx.reads.clusters is None:
        return 0
    silent = await silent_nodes(ctx)
    pks = await plugin_endpoints(ctx)
    whole = {
        pks[s.backend_id]
        for s in ctx.sources
        if s.backend_id in pks
        and s.identity not in ctx.failed_endpoints
        and s.identity not in ctx.gone_guarded
        and not silent.get(s.identity)
        and not ctx.reads.skipped_guests.get(s.identity)
    }
    if not whole:
        return 0
    moment = datetime.now(UTC)
    try:
        rows = await ctx.netbox.list_all(
            PLUGIN_CLUSTER_PATH,
            {"tag": MANAGED_TAG},
            fields=("id", "endpoint", "last_complete_read"),
            flat=True,
        )
        due = [
            {"id": int(row["id"]), "last_complete_read": moment.isoformat()}
            for row in rows
            if nested_id(row.get("endpoint")) in whole and stale_stamp(row.get("last_complete_read"), moment)
        ]
        results = await ctx.netbox.bulk_update(PLUGIN_CLUSTER_PATH, due) if due else []
    except NetBoxError as exc:  # bookkeeping: the run's objects are written; say so, do not fail it
        await ctx.problem(exc.as_problem("last complete read"), "last complete read not recorded")
        return 0
    return sum(1 for r in results if not isinstance(r, NetBoxError))


def stale_stamp(value: Any, moment: datetime) -> bool:
    """Whether a stored read stamp (ISO text, or none) is older than READ_STAMP_INTERVAL."""
    try:
        stamp = datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        stamp = None
    if stamp is None:
        return True
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return moment - stamp >= READ_STAMP_INTERVAL
