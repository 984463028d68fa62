"""Endpoint registry routes (SPEC 4.3): the NetBox singleton and the Proxmox endpoints."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Depends, HTTPException, Path

from hvsync_backend.api.deps import Ctx
from hvsync_backend.api.keys import _AUTH_ERRORS, DetailOut
from hvsync_backend.auth.dependency import require_api_key
from hvsync_backend.endpoints.schemas import (
    HvEndpointCreate,
    HvEndpointOut,
    HvEndpointUpdate,
    InventoryEndpointCreate,
    InventoryEndpointOut,
    InventoryEndpointUpdate,
)
from hvsync_backend.errors import AlreadyExists, NotFound

router = APIRouter(dependencies=[Depends(require_api_key)], responses=_AUTH_ERRORS)

EndpointId = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.get("/inventory/endpoint", response_model=list[InventoryEndpointOut], tags=["inventory endpoint"])
def list_inventory_endpoint(context: Ctx) -> list[InventoryEndpointOut]:
    """The NetBox endpoint as a list of at most one row (empty when none)."""
    return context.registry.list_inventory()


@router.post(
    "/inventory/endpoint",
    status_code=201,
    response_model=InventoryEndpointOut,
    tags=["inventory endpoint"],
    responses={409: {"model": DetailOut, "description": "the singleton already exists; use PUT"}},
)
def create_inventory_endpoint(body: InventoryEndpointCreate, context: Ctx) -> InventoryEndpointOut:
    try:
        return context.registry.create_inventory(body)
    except AlreadyExists as exc:
        raise HTTPException(
            409,
            f"An inventory endpoint already exists (id {exc.existing_id}); "
            f"update it with PUT /inventory/endpoint/{exc.existing_id}",
        ) from None


@router.put(
    "/inventory/endpoint/{endpoint_id}",
    response_model=InventoryEndpointOut,
    tags=["inventory endpoint"],
    responses={404: {"model": DetailOut}},
)
def update_inventory_endpoint(
    endpoint_id: EndpointId, body: InventoryEndpointUpdate, context: Ctx
) -> InventoryEndpointOut:
    """Partial update; omitted fields and omitted/blank/null credentials keep their stored values. A change
    of ip_address, domain, port or scheme needs the token in the same body (422 naming `token`)."""
    try:
        return context.registry.update_inventory(endpoint_id, body)
    except NotFound:
        raise HTTPException(404, f"inventory endpoint {endpoint_id} not found") from None


@router.get("/hv/endpoints", response_model=list[HvEndpointOut], tags=["hv endpoints"])
def list_hv_endpoints(context: Ctx) -> list[HvEndpointOut]:
    return context.registry.list_hv()


@router.post("/hv/endpoints", status_code=201, response_model=HvEndpointOut, tags=["hv endpoints"])
def create_hv_endpoint(body: HvEndpointCreate, context: Ctx) -> HvEndpointOut:
    return context.registry.create_hv(body)


@router.put(
    "/hv/endpoints/{endpoint_id}",
    response_model=HvEndpointOut,
    tags=["hv endpoints"],
    responses={404: {"model": DetailOut}},
)
def update_hv_endpoint(endpoint_id: EndpointId, body: HvEndpointUpdate, context: Ctx) -> HvEndpointOut:
    """Partial update; omitted fields and omitted/blank/null credentials keep their stored values. A change
    of ip_address, domain, port or scheme needs a credential in the same body (422 naming the field of
    the first access method otherwise); a credential not sent with such a change is wiped."""
    try:
        return context.registry.update_hv(endpoint_id, body)
    except NotFound:
        raise HTTPException(404, f"hv endpoint {endpoint_id} not found") from None


@router.post(
    "/hv/endpoints/{endpoint_id}/retire",
    response_model=HvEndpointOut,
    tags=["hv endpoints"],
    responses={404: {"model": DetailOut}},
)
async def retire_hv_endpoint(endpoint_id: EndpointId, context: Ctx) -> HvEndpointOut:
    """The plugin deleted this endpoint: disable it, revoke its template-build grant and wipe its stored
    credentials (password and token value), so nothing syncs it or dials it with them again. Idempotent:
    retiring a retired endpoint answers the same row. The row stays (the plugin may re-create and push)."""
    try:
        row = await anyio.to_thread.run_sync(context.registry.retire_hv, endpoint_id)
    except NotFound:
        raise HTTPException(404, f"hv endpoint {endpoint_id} not found") from None
    await context.proxmox.forget(endpoint_id)
    return row
