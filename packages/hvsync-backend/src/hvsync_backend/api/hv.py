"""Proxmox read routes, fetched concurrently from the selected endpoints: cluster status, node list, and
for local reconciliation the cluster firewall, datacenter options and templates (``hv/reads.py``).

Answer: 200 ``{"endpoints": [{endpoint_id, endpoint_name, ok, data | error}]}`` when at least one
endpoint answered (or none is selected); 502 with the same list and a ``detail`` naming every failed
endpoint when all of them failed, or 409 when none of them could even be asked (no usable credentials
stored: the endpoints' configuration is at fault, not Proxmox).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from hvsync_backend.api.deps import Ctx
from hvsync_backend.api.keys import _AUTH_ERRORS, DetailOut
from hvsync_backend.auth.dependency import require_api_key
from hvsync_backend.context import BackendContext
from hvsync_backend.endpoints.service import HvTarget, aget_hv_targets
from hvsync_backend.errors import UnknownHvEndpoints
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.hv.errors import ProxmoxAuthError, ProxmoxError, ProxmoxNotConfigured, ProxmoxUnreachable
from hvsync_backend.hv.reads import Reader, read_datacenter_options, read_firewall, read_guest, read_templates
from hvsync_backend.wire.numbers import decimal

router = APIRouter(prefix="/hv", tags=["hv"], dependencies=[Depends(require_api_key)], responses=_AUTH_ERRORS)


class EndpointErrorOut(BaseModel):
    kind: str
    status: int | None
    detail: str


class EndpointResultOut(BaseModel):
    endpoint_id: int
    endpoint_name: str
    ok: bool
    data: Any = None
    error: EndpointErrorOut | None = None


class EndpointResultsOut(BaseModel):
    endpoints: list[EndpointResultOut]


class AllFailedOut(EndpointResultsOut):
    detail: str


def parse_endpoint_ids(raw: str | None) -> list[int] | None:
    if raw is None or raw.strip() == "":
        return None
    ids: list[int] = []
    for part in raw.split(","):
        part = part.strip()
        number = decimal(part, low=1, high=2**31 - 1)
        if number is None:
            raise HTTPException(
                422,
                [
                    {
                        "type": "value_error",
                        "loc": ["query", "hv_endpoint_ids"],
                        "msg": "hv_endpoint_ids must be comma-separated positive integer ids",
                    }
                ],
            )
        ids.append(number)
    return ids


HvEndpointIds = Annotated[
    str | None,
    Query(
        description="comma-separated backend ids; absent means every enabled endpoint",
        max_length=2000,
        examples=["1"],
    ),
]


def _error(exc: ProxmoxError) -> dict[str, Any]:
    kind = (
        "unreachable"
        if isinstance(exc, ProxmoxUnreachable)
        else "auth"
        if isinstance(exc, ProxmoxAuthError)
        else "http"
    )
    return {"kind": kind, "status": exc.status, "detail": str(exc)}


def _get(path: str) -> Reader:
    async def read(client: ProxmoxClient) -> Any:
        return await client.get(path)

    return read


async def _fetch_all(context: BackendContext, raw_ids: str | None, read: Reader) -> JSONResponse:
    ids = parse_endpoint_ids(raw_ids)
    try:
        targets = await aget_hv_targets(context.registry, ids)
    except UnknownHvEndpoints as exc:
        raise HTTPException(404, str(exc)) from None

    unasked: set[int] = set()

    async def one(target: HvTarget) -> dict[str, Any]:
        base = {"endpoint_id": target.id, "endpoint_name": target.name}
        try:
            client = await context.proxmox.client_for(target)
            return {**base, "ok": True, "data": await read(client), "error": None}
        except ProxmoxError as exc:
            if isinstance(exc, ProxmoxNotConfigured):
                unasked.add(target.id)
            return {**base, "ok": False, "data": None, "error": _error(exc)}

    results = list(await asyncio.gather(*(one(t) for t in targets)))
    if results and not any(r["ok"] for r in results):
        failed = "; ".join(r["error"]["detail"] for r in results)
        # Proxmox failing is a bad gateway; endpoints stored without usable credentials are a conflict
        # with their configuration (retrying cannot help until they are edited).
        status = 409 if len(unasked) == len(results) else 502
        return JSONResponse(
            {"detail": f"no hv endpoint answered: {failed}", "endpoints": results}, status_code=status
        )
    return JSONResponse({"endpoints": results})


_READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": DetailOut, "description": "an id in hv_endpoint_ids is unknown"},
    502: {"model": AllFailedOut, "description": "every selected endpoint failed; each is named"},
    409: {
        "model": AllFailedOut,
        "description": "no selected endpoint has usable credentials stored; each is named",
    },
}


@router.get("/cluster/status", response_model=EndpointResultsOut, responses=_READ_RESPONSES)
async def cluster_status(context: Ctx, hv_endpoint_ids: HvEndpointIds = None) -> JSONResponse:
    """``GET /cluster/status`` of each selected Proxmox endpoint."""
    return await _fetch_all(context, hv_endpoint_ids, _get("/cluster/status"))


@router.get("/nodes/", response_model=EndpointResultsOut, responses=_READ_RESPONSES)
async def nodes(context: Ctx, hv_endpoint_ids: HvEndpointIds = None) -> JSONResponse:
    """``GET /nodes`` of each selected Proxmox endpoint."""
    return await _fetch_all(context, hv_endpoint_ids, _get("/nodes"))


@router.get("/cluster/firewall", response_model=EndpointResultsOut, responses=_READ_RESPONSES)
async def cluster_firewall(context: Ctx, hv_endpoint_ids: HvEndpointIds = None) -> JSONResponse:
    """Cluster firewall of each selected endpoint: ``data`` is ``{options, groups (each with rules), rules,
    aliases, ipsets (each with entries)}``."""
    return await _fetch_all(context, hv_endpoint_ids, read_firewall)


@router.get("/cluster/options", response_model=EndpointResultsOut, responses=_READ_RESPONSES)
async def cluster_options(context: Ctx, hv_endpoint_ids: HvEndpointIds = None) -> JSONResponse:
    """Datacenter options (``GET /cluster/options``) of each selected endpoint."""
    return await _fetch_all(context, hv_endpoint_ids, read_datacenter_options)


@router.get("/templates", response_model=EndpointResultsOut, responses=_READ_RESPONSES)
async def templates(context: Ctx, hv_endpoint_ids: HvEndpointIds = None) -> JSONResponse:
    """QEMU VMs and LXC containers with ``template: 1``: ``data`` is a list of ``{node, vmid, type, name,
    config}`` (credential-named config keys redacted)."""
    return await _fetch_all(context, hv_endpoint_ids, read_templates)


@router.get("/guests/{vmid}", response_model=EndpointResultsOut, responses=_READ_RESPONSES)
async def guest(
    context: Ctx,
    vmid: Annotated[int, Path(ge=100, le=999_999_999, description="Proxmox VMID")],
    hv_endpoint_ids: HvEndpointIds = None,
) -> JSONResponse:
    """Does guest ``vmid`` exist on each selected endpoint: ``data`` is ``{vmid, exists, node, type,
    config_keys}`` (the keys of its config, never their values). Read-only; the plugin re-checks a deletion
    request with it before it deletes anything (issue 40)."""
    return await _fetch_all(context, hv_endpoint_ids, read_guest(vmid))
