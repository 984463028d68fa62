"""HTTP surface of the sync engine: one SSE stream per stage, the full update, selected-object syncs,
bootstrap status and custom-field reconcile. Every route needs the service API key."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Depends, Header, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse

from hvsync_backend.api.deps import Ctx
from hvsync_backend.auth.dependency import require_api_key
from hvsync_backend.context import BackendContext
from hvsync_backend.endpoints.service import UnknownHvEndpoints
from hvsync_backend.sse.runs import Run, RunRegistry
from hvsync_backend.sync import bootstrap
from hvsync_backend.sync import individual as individual_sync
from hvsync_backend.sync.framework import Stage
from hvsync_backend.sync.leases import LeaseHeld, Leases, RunCancelled, holding
from hvsync_backend.sync.options import OptionError, SyncOptions
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.registry import FULL_UPDATE_ROUTE, STAGES
from hvsync_backend.sync.runner import execute
from hvsync_backend.sync.sources import load_targets

router = APIRouter(tags=["sync"], dependencies=[Depends(require_api_key)])

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_SECONDS = 15.0


def _runs(request: Request) -> RunRegistry:
    state = request.app.state
    if not hasattr(state, "sync_runs"):
        state.sync_runs = RunRegistry()
    return state.sync_runs


def _options(request: Request, **extra: Any) -> SyncOptions:
    try:
        options = SyncOptions.from_query(dict(request.query_params))
    except OptionError as exc:
        raise HTTPException(
            422, [{"type": "value_error", "loc": ["query", exc.field], "msg": exc.message}]
        ) from None
    if extra:
        options = SyncOptions(**{**options.__dict__, **extra})
    return options


_JOB = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def _job(request: Request) -> str:
    """The caller's job id (`job=`), by which it may cancel the run; refused unless plain and short."""
    job = request.query_params.get("job") or ""
    if job and not _JOB.fullmatch(job):
        raise HTTPException(
            422,
            [
                {
                    "type": "value_error",
                    "loc": ["query", "job"],
                    "msg": "job must be 1-64 of A-Z a-z 0-9 _ . : -",
                }
            ],
        )
    return job


@router.post("/sync/cancel")
async def cancel(request: Request, context: Ctx) -> JSONResponse:
    """Stop every running sync of the caller's job (`job=`, as given on its streams), in any backend
    worker; the runs end within a few seconds with a `complete` saying so. 200 `{cancelled: <leases>}`
    (0: nothing of that job is running)."""
    job = _job(request)
    if not job:
        raise HTTPException(422, [{"type": "missing", "loc": ["query", "job"], "msg": "job is required"}])
    flagged = await anyio.to_thread.run_sync(lambda: leases(context).request_cancel(job))
    return JSONResponse({"cancelled": flagged})


def leases(context: BackendContext) -> Leases:
    return Leases(context.session_factory)


def lease_pairs(sources: list[HvSource], stages: list[Stage], options: SyncOptions) -> list[tuple[int, str]]:
    """What a run writes, as (hv endpoint, stage) pairs; a dry run writes nothing and holds none."""
    if options.dry_run:
        return []
    return [(source.backend_id, stage.slug) for source in sources for stage in stages]


def _signature(request: Request) -> str:
    query = sorted((k, v) for k, v in request.query_params.multi_items() if k != "run_id")
    return request.url.path + "?" + "&".join(f"{k}={v}" for k, v in query)


def _stream(
    request: Request,
    context: BackendContext,
    stages: list[Stage],
    name: str,
    options: SyncOptions,
    last_event_id: str | None,
) -> StreamingResponse:
    job = _job(request)  # validated before the stream starts: a 422, not a broken stream

    async def body(run: Run) -> None:
        async def emit(event: str, data: dict[str, Any]) -> None:
            await run.emit(event, {**data, "run_id": run.id} if event == "complete" else data)

        try:
            targets = await load_targets(context, options.hv_endpoint_ids, options.inventory_branch_schema_id)
        except UnknownHvEndpoints as exc:
            problem = {"source": "backend", "status": 404, "detail": str(exc)}
            await emit("complete", _failed(name, options, problem))
            return
        if targets.netbox is None:
            problem = {
                "source": "backend",
                "status": None,
                "detail": targets.netbox_missing_reason or "no NetBox",
            }
            await emit("complete", _failed(name, options, problem))
            return
        try:
            pairs = lease_pairs(targets.sources, stages, options)
            async with holding(leases(context), run.id, pairs, job) as release:

                async def emit_released(event: str, data: dict[str, Any]) -> None:
                    if event == "complete":
                        await release()  # free before the client reads `complete` and starts the next run
                    await emit(event, data)

                await execute(
                    stages,
                    name=name,
                    netbox=targets.netbox,
                    sources=targets.sources,
                    options=options,
                    emit=emit_released,
                    run_id=run.id,
                )
        except (LeaseHeld, RunCancelled) as exc:
            await emit(
                "complete", _failed(name, options, {"source": "backend", "status": 409, "detail": str(exc)})
            )

    chunks: AsyncIterator[str] = _runs(request).stream(
        _signature(request),
        body,
        last_event_id=last_event_id,
        run_id=request.query_params.get("run_id"),
        keepalive=KEEPALIVE_SECONDS,
    )
    return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)


def _failed(name: str, options: SyncOptions, problem: dict[str, Any]) -> dict[str, Any]:
    zero = {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}
    return {
        "stage": name,
        "ok": False,
        "dry_run": options.dry_run,
        "summary": zero,
        "duration_ms": 0,
        "errors": [problem],
        "error": problem,
    }


def _add_stage_route(stage: Stage) -> None:
    async def stream(
        request: Request, context: Ctx, last_event_id: str | None = Header(default=None)
    ) -> StreamingResponse:
        return _stream(request, context, [stage], stage.slug, _options(request), last_event_id)

    stream.__doc__ = (
        f"Stage `{stage.slug}` ({stage.title}) as a server-sent-event stream. Query: hv_endpoint_ids, "
        "inventory_branch_schema_id, sync_mode_vm, sync_mode_vm_template, dry_run, delete_stale, run_id."
    )
    router.add_api_route(
        stage.route, stream, methods=["GET"], name=f"stage_{stage.slug}", response_class=StreamingResponse
    )


for _stage in STAGES:
    _add_stage_route(_stage)


@router.get(FULL_UPDATE_ROUTE, response_class=StreamingResponse)
async def full_update(
    request: Request, context: Ctx, last_event_id: str | None = Header(default=None)
) -> StreamingResponse:
    """Every stage in pipeline order as one stream; `complete.stages` holds each stage's summary."""
    return _stream(request, context, STAGES, "full-update", _options(request), last_event_id)


@router.post("/sync/individual/{kind}")
async def individual(kind: str, request: Request, context: Ctx) -> JSONResponse:
    """Sync one object and what it depends on (docs/sync.md "Selected-object syncs"). Query: `node`
    (node), `storage` (storage), `vmid` (vm, backup, snapshot), `volid` (backup), `name` (snapshot),
    `upid` or `vmid` (task-history), plus the scope parameters. 200 ok; 404 object not in Proxmox;
    422 bad or missing query field; 424 object failed in NetBox; 502 NetBox or Proxmox failed."""
    if kind not in individual_sync.KINDS:
        raise HTTPException(
            404, f"unknown individual sync kind {kind!r}; one of {sorted(individual_sync.KINDS)}"
        )
    try:
        selection = individual_sync.select(kind, request.query_params)
    except individual_sync.SelectionError as exc:
        raise HTTPException(
            422, [{"type": "value_error", "loc": ["query", exc.field], "msg": exc.message}]
        ) from None
    options = _options(
        request, partial=True, delete_stale=False, only_vmids=selection.only_vmids, focus=selection.focus
    )
    stages = selection.stages
    frames: list[dict[str, Any]] = []

    async def emit(event: str, data: dict[str, Any]) -> None:
        frames.append({"event": event, "data": data})

    try:
        targets = await load_targets(context, options.hv_endpoint_ids, options.inventory_branch_schema_id)
    except UnknownHvEndpoints as exc:
        raise HTTPException(404, str(exc)) from None
    started = time.monotonic()
    if targets.netbox is None:
        return JSONResponse({"ok": False, "detail": targets.netbox_missing_reason}, status_code=409)
    try:
        async with holding(leases(context), uuid.uuid4().hex, lease_pairs(targets.sources, stages, options)):
            result = await execute(
                stages,
                name=f"individual-{kind}",
                netbox=targets.netbox,
                sources=targets.sources,
                options=options,
                emit=emit,
            )
    except LeaseHeld as exc:
        return JSONResponse({"ok": False, "detail": str(exc)}, status_code=409)
    result["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
    wanted, detail = selection.must_find
    if result["ok"] and not individual_sync.found_totals(frames).get(wanted):
        return JSONResponse({**result, "ok": False, "detail": detail}, status_code=404)
    if not result["ok"]:
        error = result.get("error") or {}
        status = (
            424
            if (error.get("source") == "netbox" and error.get("status") and error["status"] < 500)
            or not error
            else 502
        )
        if error.get("source") == "backend":
            status = 501 if "not implemented" in str(error.get("detail")) else 409
        return JSONResponse(result, status_code=status)
    return JSONResponse(result)


@router.get("/extras/bootstrap-status")
async def bootstrap_status(request: Request, context: Ctx) -> JSONResponse:
    """NetBox-side setup hvsync needs: custom fields, the plugin's content types, the managed tag."""
    return JSONResponse(await bootstrap.status(context))


@router.post("/extras/custom-fields/reconcile")
async def custom_fields_reconcile(request: Request, context: Ctx) -> JSONResponse:
    """Create or update hvsync's custom-field definitions (idempotent). `dry_run=true` only reports."""
    options = _options(request)
    body, status = await bootstrap.reconcile(context, options)
    return JSONResponse(body, status_code=status)
