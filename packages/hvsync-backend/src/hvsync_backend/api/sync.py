"""HTTP surface of the sync engine: one SSE stream per stage, the full update, selected-object syncs,
bootstrap status and custom-field reconcile. Every route needs the service API key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from hvsync_backend.api.deps import Ctx
from hvsync_backend.api.hv import HvEndpointIds
from hvsync_backend.auth.dependency import AUTH_RESPONSES, require_api_key
from hvsync_backend.context import BackendContext
from hvsync_backend.errors import FieldError, UnknownHvEndpoints
from hvsync_backend.services import bootstrap, sync_runs
from hvsync_backend.sse.runs import Run, RunRegistry
from hvsync_backend.sync import individual as individual_sync
from hvsync_backend.sync.framework import Stage
from hvsync_backend.sync.options import (
    BRANCH_SCHEMA_ID_CHAR,
    BRANCH_SCHEMA_ID_MAX,
    FLAG_WORDS,
    SITE_NAME_MAX,
    SyncOptions,
)
from hvsync_backend.sync.registry import FULL_UPDATE_ROUTE, STAGES

router = APIRouter(tags=["sync"], dependencies=[Depends(require_api_key)], responses=AUTH_RESPONSES)

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_SECONDS = 15.0

#: One server-sent event as schemathesis and other OpenAPI 3.1 tools read it (`schema` describes each
#: event); the payloads are specified in contracts/sse-frames.schema.json.
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": ["step", "complete", "restart"]},
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"type": "object"},
        },
    },
}
_OBJECT = {"application/json": {"schema": {"type": "object"}}}
STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "`step` frames, then `complete` (always last); `restart` first when a reconnect "
        "cannot be replayed (docs/sync.md)",
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    }
}


def _query_error(field: str, message: str, kind: str = "value_error") -> HTTPException:
    return HTTPException(422, [{"type": kind, "loc": ["query", field], "msg": message}])


def _flag(description: str, example: str) -> Any:
    return Query(
        description=f"{description}; a spelling listed in `enum`, in any case",
        max_length=16,
        examples=[example],
        json_schema_extra={"enum": list(FLAG_WORDS)},
    )


BranchSchemaId = Annotated[
    str | None,
    Query(
        description="netbox-branching schema id: every NetBox request carries `X-NetBox-Branch: <id>`",
        # the same characters `scope_options` checks; empty means "not branched"
        pattern=rf"^{BRANCH_SCHEMA_ID_CHAR}{{0,{BRANCH_SCHEMA_ID_MAX}}}$",
        max_length=BRANCH_SCHEMA_ID_MAX,
        examples=["a1b2c3d4"],
    ),
]
DryRun = Annotated[str | None, _flag("report the plan, write nothing", "true")]


async def scope_options(
    hv_endpoint_ids: HvEndpointIds = None,
    inventory_branch_schema_id: BranchSchemaId = None,
    sync_mode_vm: Annotated[str | None, _flag("sync virtual machines (default enabled)", "enabled")] = None,
    sync_mode_vm_template: Annotated[
        str | None, _flag("sync VM templates (default enabled)", "disabled")
    ] = None,
    dry_run: DryRun = None,
    delete_stale: Annotated[
        str | None, _flag("remove managed objects whose Proxmox object is gone (default disabled)", "enabled")
    ] = None,
    site: Annotated[
        str | None,
        Query(
            description="default site name for endpoints without a site_slug (default `Proxmox VE`)",
            max_length=SITE_NAME_MAX,
            examples=["Proxmox VE"],
        ),
    ] = None,
) -> SyncOptions:
    """The scope and mode parameters every stage route, the full update and individual syncs take."""
    given = {
        "hv_endpoint_ids": hv_endpoint_ids,
        "inventory_branch_schema_id": inventory_branch_schema_id,
        "sync_mode_vm": sync_mode_vm,
        "sync_mode_vm_template": sync_mode_vm_template,
        "dry_run": dry_run,
        "delete_stale": delete_stale,
        "site": site,
    }
    return _parse_options(given)


async def reconcile_options(
    inventory_branch_schema_id: BranchSchemaId = None, dry_run: DryRun = None
) -> SyncOptions:
    return _parse_options({"inventory_branch_schema_id": inventory_branch_schema_id, "dry_run": dry_run})


def _parse_options(given: dict[str, str | None]) -> SyncOptions:
    try:
        return SyncOptions.from_query({k: v for k, v in given.items() if v is not None})
    except FieldError as exc:
        raise _query_error(exc.field, exc.message) from None


Scope = Annotated[SyncOptions, Depends(scope_options)]
#: A job id's characters and length, on the streams (`job=`) and on `POST /sync/cancel` alike.
JOB_ID_CHAR = r"[A-Za-z0-9_.:-]"
JOB_ID_MAX = 64
#: The caller's job id, by which it may cancel the run; plain and short.
Job = Annotated[
    str | None,
    Query(
        description="the caller's job id (up to 64 of A-Z a-z 0-9 _ . : -); `POST /sync/cancel` stops its runs, "
        "and the streams of one job share their reads: give each job a new id",
        pattern=rf"^{JOB_ID_CHAR}{{0,{JOB_ID_MAX}}}$",
        max_length=JOB_ID_MAX,
        examples=["job-1"],
    ),
]
RunId = Annotated[
    str | None, Query(description="reconnect to this run explicitly (with Last-Event-ID)", max_length=64)
]
LastEventId = Annotated[
    str | None, Header(description="the last frame id received: replay what followed it", max_length=64)
]


def _runs(request: Request) -> RunRegistry:
    state = request.app.state
    if not hasattr(state, "sync_runs"):
        state.sync_runs = RunRegistry()
    return state.sync_runs


@router.post("/sync/cancel", responses={200: {"content": _OBJECT}})
async def cancel(
    context: Ctx,
    job: Annotated[
        str,
        Query(description="the job id given on the streams", pattern=rf"^{JOB_ID_CHAR}{{1,{JOB_ID_MAX}}}$"),
    ],
) -> JSONResponse:
    """Stop every running sync of the caller's job (`job=`, as given on its streams), in any backend
    worker; the runs end within a few seconds with a `complete` saying so. 200 `{cancelled: <leases>}`
    (0: nothing of that job is running)."""
    return JSONResponse({"cancelled": await sync_runs.cancel_job(context, job)})


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
    job: str | None,
    run_id: str | None,
) -> StreamingResponse:
    job = job or ""  # validated (a 422, not a broken stream) before the stream starts

    async def body(run: Run) -> None:
        await sync_runs.stream_run(context, stages, name, options, job=job, run_id=run.id, send=run.emit)

    chunks: AsyncIterator[str] = _runs(request).stream(
        _signature(request),
        body,
        last_event_id=last_event_id,
        run_id=run_id,
        keepalive=KEEPALIVE_SECONDS,
    )
    return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)


def _add_stream_route(route: str, stages: list[Stage], name: str, route_name: str, doc: str) -> None:
    """A GET route streaming a run of `stages` (one stage, or the full update) named `name`."""

    async def stream(
        request: Request,
        context: Ctx,
        options: Scope,
        job: Job = None,
        run_id: RunId = None,
        last_event_id: LastEventId = None,
    ) -> StreamingResponse:
        return _stream(request, context, stages, name, options, last_event_id, job, run_id)

    stream.__doc__ = doc
    router.add_api_route(
        route,
        stream,
        methods=["GET"],
        name=route_name,
        response_class=StreamingResponse,
        responses=STREAM_RESPONSES,
    )


for _stage in STAGES:
    _add_stream_route(
        _stage.route,
        [_stage],
        _stage.slug,
        f"stage_{_stage.slug}",
        f"Stage `{_stage.slug}` ({_stage.title}) as a server-sent-event stream.",
    )
_add_stream_route(
    FULL_UPDATE_ROUTE,
    STAGES,
    "full-update",
    "full_update",
    "Every stage in pipeline order as one stream; `complete.stages` holds each stage's summary.",
)


def _selector(description: str, max_length: int, example: str) -> Any:
    return Query(description=description, max_length=max_length, examples=[example])


@router.post(
    "/sync/individual/{kind}",
    responses={
        200: {"description": "the run's `complete` payload", "content": _OBJECT},
        404: {
            "description": "the object is not in Proxmox within scope, or an unknown kind or id",
            "content": _OBJECT,
        },
        409: {
            "description": "no usable inventory endpoint, a run of the same stage holds it, or a backend-side problem",
            "content": _OBJECT,
        },
        424: {"description": "an object failed in NetBox (NetBox answered 4xx)", "content": _OBJECT},
        500: {
            "description": "an unexpected backend error: the run's `complete` with `error.detail` "
            "`internal error: <class>` (JSON, never a plain-text page)",
            "content": _OBJECT,
        },
        501: {"description": "a stage the run needs is not implemented", "content": _OBJECT},
        502: {"description": "NetBox or Proxmox unreachable or answering 5xx", "content": _OBJECT},
    },
)
async def individual(
    kind: Annotated[
        str, Path(description="what to sync", json_schema_extra={"enum": list(individual_sync.KINDS)})
    ],
    context: Ctx,
    options: Scope,
    node: Annotated[str | None, _selector("Proxmox node name (kind node)", 100, "pve1")] = None,
    storage: Annotated[str | None, _selector("Proxmox storage id (kind storage)", 100, "local")] = None,
    vmid: Annotated[
        str | None, _selector("VMID (vm, backup, snapshot; task-history without upid)", 16, "100")
    ] = None,
    volid: Annotated[
        str | None,
        _selector(
            "volume id `<storage>:<volume>` (backup)",
            255,
            "local:backup/vzdump-qemu-100-2026_01_01-00_00_00.vma.zst",
        ),
    ] = None,
    name: Annotated[str | None, _selector("snapshot name (snapshot)", 100, "before-upgrade")] = None,
    upid: Annotated[
        str | None,
        _selector(
            "task UPID (task-history)", 255, "UPID:pve1:000A1B2C:0001E240:65A1B2C3:vzdump:100:root@pam:"
        ),
    ] = None,
) -> JSONResponse:
    """Sync one object and what it depends on (docs/sync.md "Selected-object syncs"), plus the scope
    parameters. 200 ok; 404 object not in Proxmox; 422 bad or missing query field; 424 object failed in
    NetBox; 502 NetBox or Proxmox failed."""
    if kind not in individual_sync.KINDS:
        raise HTTPException(
            404, f"unknown individual sync kind {kind!r}; one of {sorted(individual_sync.KINDS)}"
        )
    given = {"node": node, "storage": storage, "vmid": vmid, "volid": volid, "name": name, "upid": upid}
    try:
        selection = individual_sync.select(kind, {k: v for k, v in given.items() if v is not None})
    except FieldError as exc:
        raise _query_error(exc.field, exc.message) from None
    try:
        body, status = await sync_runs.individual_run(context, kind, selection, options)
    except UnknownHvEndpoints as exc:
        raise HTTPException(404, str(exc)) from None
    return JSONResponse(body, status_code=status)


@router.get("/extras/bootstrap-status", responses={200: {"content": _OBJECT}})
async def bootstrap_status(context: Ctx) -> JSONResponse:
    """NetBox-side setup hvsync needs: custom fields, the plugin's content types, the managed tag."""
    return JSONResponse(await bootstrap.status(context))


@router.post(
    "/extras/custom-fields/reconcile",
    responses={
        200: {"content": _OBJECT},
        409: {"description": "no usable inventory endpoint", "content": _OBJECT},
        "4XX": {"description": "NetBox refused (its own status)", "content": _OBJECT},
        502: {"description": "NetBox unreachable or answering 5xx", "content": _OBJECT},
    },
)
async def custom_fields_reconcile(
    context: Ctx, options: Annotated[SyncOptions, Depends(reconcile_options)]
) -> JSONResponse:
    """Create or update hvsync's custom-field definitions (idempotent). `dry_run=true` only reports."""
    body, status = await bootstrap.reconcile(context, options)
    return JSONResponse(body, status_code=status)
