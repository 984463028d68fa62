"""Setting up and running syncs for the routes: the targets in scope, the leases, the job's shared reads,
and a `complete` that ends every stream, even a run that could not start.

The routes only map HTTP to these calls: a stream's frames go to the run's buffer (`sse/runs.py`), a
selected-object sync answers its `complete` with the status `individual_status` gives it.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import anyio

from hvsync_backend.context import BackendContext
from hvsync_backend.errors import UnknownHvEndpoints
from hvsync_backend.services.targets import load_targets
from hvsync_backend.sse.frames import failed_complete
from hvsync_backend.sync import individual as individual_sync
from hvsync_backend.sync.framework import Stage
from hvsync_backend.sync.leases import LeaseHeld, Leases, RunCancelled, holding
from hvsync_backend.sync.options import SyncOptions
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.runner import execute, run_netbox
from hvsync_backend.wire.redaction import sweep_text

__all__ = ["cancel_job", "individual_run", "individual_status", "lease_pairs", "leases", "stream_run"]

log = logging.getLogger("hvsync_backend.sync")


def leases(context: BackendContext) -> Leases:
    return Leases(context.session_factory)


def lease_pairs(sources: list[HvSource], stages: list[Stage], options: SyncOptions) -> list[tuple[int, str]]:
    """What a run writes, as (hv endpoint, stage) pairs; a dry run writes nothing and holds none."""
    if options.dry_run:
        return []
    return [(source.backend_id, stage.slug) for source in sources for stage in stages]


async def cancel_job(context: BackendContext, job: str) -> int:
    """Flag every running sync of `job` to stop (in any worker); how many leases were flagged."""
    return await anyio.to_thread.run_sync(lambda: leases(context).request_cancel(job))


async def stream_run(
    context: BackendContext,
    stages: list[Stage],
    name: str,
    options: SyncOptions,
    *,
    job: str,
    run_id: str,
    send: Callable[[str, dict[str, Any]], Awaitable[object]],
) -> None:
    """One stream's run, its frames sent with `send`; the `complete` carries `run_id`. A run that cannot
    start (unknown endpoint, no NetBox, a lease held, cancelled) still ends with a failed `complete`.
    An unknown endpoint id is a 404 `complete` here, not an exception."""

    async def emit(event: str, data: dict[str, Any]) -> None:
        await send(event, {**data, "run_id": run_id} if event == "complete" else data)

    async def refuse(problem: dict[str, Any]) -> None:
        """A run that could not start still ends with `complete`, and counts as a failed run."""
        data = failed_complete(name, problem, dry_run=options.dry_run)
        context.metrics.run_finished(data, ())
        await emit("complete", data)

    try:
        targets = await load_targets(context, options.hv_endpoint_ids, options.inventory_branch_schema_id)
    except UnknownHvEndpoints as exc:
        await refuse({"source": "backend", "status": 404, "detail": str(exc)})
        return
    if targets.netbox is None:
        await refuse(
            {"source": "backend", "status": None, "detail": targets.netbox_missing_reason or "no NetBox"}
        )
        return
    try:
        pairs = lease_pairs(targets.sources, stages, options)
        async with holding(leases(context), run_id, pairs, job) as release:

            async def emit_released(event: str, data: dict[str, Any]) -> None:
                if event == "complete":
                    await release()  # free before the client reads `complete` and starts the next run
                await emit(event, data)

            context.job_reads.started(job)
            try:
                await execute(
                    stages,
                    name=name,
                    netbox=targets.netbox,
                    sources=targets.sources,
                    options=options,
                    emit=emit_released,
                    run_id=run_id,
                    metrics=context.metrics,
                    readers=context.job_reads.readers_for(job, targets.sources),
                    lists=context.job_reads.lists_for(job, run_netbox(targets.netbox, options)),
                )
            finally:
                context.job_reads.finished(job)
    except (LeaseHeld, RunCancelled) as exc:
        await refuse({"source": "backend", "status": 409, "detail": str(exc)})


async def individual_run(
    context: BackendContext, kind: str, selection: individual_sync.Selection, options: SyncOptions
) -> tuple[dict[str, Any], int]:
    """Sync one selected object and what it depends on; its `complete` (or why not) and HTTP status.
    Raises UnknownHvEndpoints for an endpoint id that is not stored.

    An unexpected exception is answered as the streams answer it (`sse/runs.py`): a JSON `complete` with
    `error.detail` "internal error: <class>" and status 500, the trace logged with credential-looking text
    swept. Before, it escaped the route and the server answered a plain-text "Internal Server Error"."""
    try:
        return await _individual_run(context, kind, selection, options)
    except UnknownHvEndpoints:
        raise
    except Exception as exc:
        trace = "".join(traceback.format_exception(exc))
        log.error("individual %s sync failed:\n%s", kind, sweep_text(trace))
        problem = {"source": "backend", "status": None, "detail": f"internal error: {type(exc).__name__}"}
        return failed_complete(f"individual-{kind}", problem, dry_run=options.dry_run), 500


async def _individual_run(
    context: BackendContext, kind: str, selection: individual_sync.Selection, options: SyncOptions
) -> tuple[dict[str, Any], int]:
    options = replace(
        options, partial=True, delete_stale=False, only_vmids=selection.only_vmids, focus=selection.focus
    )
    stages = selection.stages
    frames: list[dict[str, Any]] = []

    async def emit(event: str, data: dict[str, Any]) -> None:
        frames.append({"event": event, "data": data})

    targets = await load_targets(context, options.hv_endpoint_ids, options.inventory_branch_schema_id)
    started = time.monotonic()
    if targets.netbox is None:
        return {"ok": False, "detail": targets.netbox_missing_reason}, 409
    try:
        async with holding(leases(context), uuid.uuid4().hex, lease_pairs(targets.sources, stages, options)):
            result = await execute(
                stages,
                name=f"individual-{kind}",
                netbox=targets.netbox,
                sources=targets.sources,
                options=options,
                emit=emit,
                metrics=context.metrics,
            )
    except LeaseHeld as exc:
        return {"ok": False, "detail": str(exc)}, 409
    result["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
    wanted, detail = selection.must_find
    if result["ok"] and not individual_sync.found_totals(frames).get(wanted):
        return {**result, "ok": False, "detail": detail}, 404
    return result, individual_status(result)


def individual_status(result: dict[str, Any]) -> int:
    """200 ok; 424 an object NetBox refused (4xx); 502 NetBox or Proxmox failing; 501 a stage not
    implemented and 409 another backend-side problem."""
    if result["ok"]:
        return 200
    error = result.get("error") or {}
    status = (
        424
        if (error.get("source") == "netbox" and error.get("status") and error["status"] < 500) or not error
        else 502
    )
    if error.get("source") == "backend":
        status = 501 if "not implemented" in str(error.get("detail")) else 409
    return status
