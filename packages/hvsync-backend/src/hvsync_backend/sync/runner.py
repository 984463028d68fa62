"""Running one stage or the full update against a NetBox and a set of Proxmox endpoints.

Turns every failure into truthful frames: NetBox/Proxmox problems carry the upstream status; the
stream always ends with `complete`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig
from hvsync_backend.inventory.errors import NetBoxError
from hvsync_backend.inventory.list_cache import ListCache
from hvsync_backend.metrics import Metrics
from hvsync_backend.sse.frames import failed_complete
from hvsync_backend.sync.framework import Kind, Stage, linked_outside, stage_summary
from hvsync_backend.sync.gone import record_complete_reads
from hvsync_backend.sync.options import SyncOptions
from hvsync_backend.sync.plugin_endpoints import prefetch_plugin_endpoints
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader, ProxmoxReadError
from hvsync_backend.sync.run import Counts, Emit, StageAborted, SyncContext
from hvsync_backend.sync.support import prepare


async def run_stage(stage: Stage, ctx: SyncContext) -> tuple[Counts, dict[str, Any] | None]:
    """One stage; returns its counts and the fatal problem that stopped it, if any."""
    if not stage.kinds:
        problem = {
            "source": "backend",
            "status": None,
            "detail": f"stage {stage.slug} is not implemented by this backend yet",
        }
        ctx.stage = stage.slug
        await ctx.step("start", f"{stage.title}: not implemented", problem=problem)
        return Counts(), problem
    try:
        await prepare(ctx)
        start_prefetch(ctx)
        counts, _ = await stage.run(ctx)
        return counts, None
    except StageAborted as exc:
        return Counts(), exc.problem
    except NetBoxError as exc:
        return Counts(), exc.as_problem()
    except ProxmoxReadError as exc:
        return Counts(), exc.as_problem()


def start_prefetch(ctx: SyncContext) -> None:
    """Once per run, after the run's own setup writes: start every kind's NetBox read at once.

    NetBox serialises lists slowly (seconds for 1,000-2,000 rows) but runs several workers, so the reads
    overlap each other and the Proxmox reads. A kind that runs after a write that could change its list
    reads again (the client's cache answers only reads no later write has made stale). The kinds the run's
    kinds link to but do not reconcile (a one-VM run's plugin cluster records) are read for their ids."""
    if ctx.lookups.prefetched:
        return
    ctx.lookups.prefetched = True
    prefetch_plugin_endpoints(ctx)
    for kind in ctx.upcoming:
        kind.prefetch(ctx)
    # the run's upcoming kinds are framework Kinds (run.py names them by a protocol to avoid an import cycle)
    for kind in linked_outside(cast("Sequence[Kind]", ctx.upcoming)):
        kind.prefetch_current(ctx)


def run_netbox(netbox: NetBoxConfig, options: SyncOptions) -> NetBoxConfig:
    """The NetBox a run writes to: the endpoint's, in the branch the run names (if any)."""
    return replace(netbox, branch_schema_id=options.inventory_branch_schema_id or netbox.branch_schema_id)


async def execute(
    stages: Sequence[Stage],
    *,
    name: str,
    netbox: NetBoxConfig | None,
    sources: list[HvSource],
    options: SyncOptions,
    emit: Emit,
    client: NetBoxClient | None = None,
    run_id: str | None = None,
    metrics: Metrics | None = None,
    readers: dict[int, ProxmoxReader] | None = None,
    lists: ListCache | None = None,
) -> dict[str, Any]:
    """Run `stages` in order and emit the final `complete`; returns its payload.

    `run_id` is the stream's run id (the plugin passes its job's); sidecars record it as `last_run_id`.
    `metrics` (the backend's) counts the run, each stage's duration and each kind's objects. `readers`:
    the Proxmox readers to start from, with the answers of the job's earlier runs (sync/job_reads.py);
    `lists`: likewise the NetBox list reads, for `run_netbox(netbox, options)`."""
    started = time.monotonic()
    if netbox is None:
        problem = {"source": "backend", "status": None, "detail": "no inventory endpoint is configured"}
        duration_ms = round((time.monotonic() - started) * 1000, 1)
        data = failed_complete(
            name, problem, dry_run=options.dry_run, summary=Counts().as_dict(), duration_ms=duration_ms
        )
        if metrics is not None:
            metrics.run_finished(data, ())
        await emit("complete", data)
        return data
    own_client = client is None
    nb = client or NetBoxClient(run_netbox(netbox, options), lists=lists)
    ctx = SyncContext(netbox=nb, sources=sources, options=options, emit=emit, metrics=metrics)
    if run_id:
        ctx.run_id = run_id
    if readers is not None:
        ctx.readers = readers
    ctx.upcoming = [kind for stage in stages for kind in stage.kinds]
    nb.cache_reads = True
    if nb.config.apply_path:
        nb.discover()  # first: the run's flat reads all wait on it
    total = Counts()
    stage_rows: list[dict[str, Any]] = []
    fatal: dict[str, Any] | None = None
    try:
        if not sources:
            fatal = {"source": "backend", "status": None, "detail": "no enabled hv endpoint is in scope"}
        for stage in stages if fatal is None else ():
            stage_started = time.monotonic()
            before = len(ctx.problems)
            guarded = len(ctx.guard_problems)
            counts, stage_problem = await run_stage(stage, ctx)
            total.add(counts)
            # the mass-vanish guard fails the stage it stopped and says why (failure_kind mass_vanish)
            guard = ctx.guard_problems[guarded] if len(ctx.guard_problems) > guarded else None
            row = {
                "stage": stage.slug,
                "ok": stage_problem is None and counts.failed == 0 and len(ctx.problems) == before,
                "summary": counts.as_dict(),
                "duration_ms": round((time.monotonic() - stage_started) * 1000, 1),
                "error": stage_problem or guard,
            }
            stage_rows.append(row)
            if stage_problem is not None:
                ctx.problems.append(stage_problem)
                fatal = fatal or stage_problem
                if stage_problem.get("source") == "netbox" and stage_problem.get("status") in (
                    None,
                    401,
                    403,
                ):
                    break  # NetBox unreachable or refusing us: later stages cannot do better
        if len(stages) > 1 and fatal is None:
            await record_complete_reads(ctx)
        data = stage_summary(name, total, started, ctx, fatal)
        if len(stages) > 1:
            data["stages"] = stage_rows
        data["requests"] = {
            "netbox_reads": nb.stats.read_requests,
            "netbox_writes": nb.stats.write_requests,
        }
    finally:
        ctx.cancel_background()
        if own_client:
            await nb.aclose()
    if metrics is not None:
        metrics.run_finished(data, stage_rows)
    await emit("complete", data)
    return data
