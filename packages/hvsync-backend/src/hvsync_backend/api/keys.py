"""Bootstrap (unauthenticated) and key management (authenticated) routes of SPEC 4.1/4.2."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, HTTPException, Path, Response
from pydantic import BaseModel, Field, field_validator

from hvsync_backend.api.deps import Ctx
from hvsync_backend.auth.dependency import AUTH_RESPONSES, require_api_key
from hvsync_backend.auth.hashing import MAX_KEY_LENGTH, MIN_KEY_LENGTH, key_problem
from hvsync_backend.auth.keys import KeyView, LastActiveKey
from hvsync_backend.context import BackendContext
from hvsync_backend.errors import AlreadyExists, NotFound

router = APIRouter(prefix="/auth", tags=["auth"])

KeyId = Annotated[int, Path(ge=1, le=2**31 - 1, description="key id")]
LAST_ACTIVE = (
    "Refused: this is the last active API key and the backend would become unreachable. "
    "Create or activate another key first (or use the local CLI: hvsync-backend keys ...)."
)


class BootstrapStatus(BaseModel):
    needs_bootstrap: bool
    has_db_keys: bool


class RegisterKeyIn(BaseModel):
    api_key: str = Field(
        min_length=1,
        json_schema_extra={"writeOnly": True, "minLength": MIN_KEY_LENGTH, "maxLength": MAX_KEY_LENGTH},
        description=f"{MIN_KEY_LENGTH}-{MAX_KEY_LENGTH} printable ASCII characters, no spaces; 64 recommended",
    )
    label: str = Field(default="", max_length=200)

    @field_validator("api_key")
    @classmethod
    def _check(cls, value: str) -> str:
        problem = key_problem(value)
        if problem:
            raise ValueError(f"api_key {problem}")
        return value


class DetailOut(BaseModel):
    detail: str


class KeyOut(BaseModel):
    id: int
    label: str
    is_active: bool
    created_at: float


class KeyCreatedOut(KeyOut):
    raw_key: str = Field(description="the key itself; shown only in this response")


class KeyListOut(BaseModel):
    keys: list[KeyOut]


class CreateKeyIn(BaseModel):
    label: str = Field(default="", max_length=200)


def _out(view: KeyView) -> KeyOut:
    return KeyOut(id=view.id, label=view.label, is_active=view.is_active, created_at=view.created_at)


_AUTH_ERRORS = AUTH_RESPONSES


@router.get(
    "/bootstrap-status", response_model=BootstrapStatus, summary="Whether the first key is still missing"
)
def bootstrap_status(context: Ctx) -> BootstrapStatus:
    has = context.keys.has_any_key()
    return BootstrapStatus(needs_bootstrap=not has, has_db_keys=has)


@router.post(
    "/register-key",
    status_code=201,
    response_model=DetailOut,
    summary="Register the first key (only while no key exists)",
    responses={409: {"model": DetailOut, "description": "a key already exists"}},
)
def register_key(body: RegisterKeyIn, context: Ctx) -> DetailOut:
    try:
        context.keys.register_bootstrap(body.api_key, body.label)
    except AlreadyExists:
        raise HTTPException(
            409, "An API key is already registered; manage keys with authenticated calls to /auth/keys"
        ) from None
    return DetailOut(detail="API key registered")


@router.get(
    "/keys", response_model=KeyListOut, responses=_AUTH_ERRORS, dependencies=[Depends(require_api_key)]
)
def list_keys(context: Ctx) -> KeyListOut:
    return KeyListOut(keys=[_out(v) for v in context.keys.list_keys()])


@router.post(
    "/keys",
    status_code=201,
    response_model=KeyCreatedOut,
    responses=_AUTH_ERRORS,
    dependencies=[Depends(require_api_key)],
    summary="Create a key; `raw_key` is returned only here",
)
def create_key(context: Ctx, body: Annotated[CreateKeyIn | None, Body()] = None) -> KeyCreatedOut:
    view, raw = context.keys.create(label=body.label if body else "")
    return KeyCreatedOut(**_out(view).model_dump(), raw_key=raw)


def _set_active(context: BackendContext, key_id: int, active: bool) -> KeyOut:
    try:
        return _out(context.keys.set_active(key_id, active))
    except NotFound:
        raise HTTPException(404, f"API key {key_id} not found") from None
    except LastActiveKey:
        raise HTTPException(409, LAST_ACTIVE) from None


_KEY_ERRORS = {**_AUTH_ERRORS, 404: {"model": DetailOut}, 409: {"model": DetailOut}}


@router.post(
    "/keys/{key_id}/deactivate",
    response_model=KeyOut,
    responses=_KEY_ERRORS,
    dependencies=[Depends(require_api_key)],
)
def deactivate_key(key_id: KeyId, context: Ctx) -> KeyOut:
    return _set_active(context, key_id, False)


@router.post(
    "/keys/{key_id}/activate",
    response_model=KeyOut,
    responses=_KEY_ERRORS,
    dependencies=[Depends(require_api_key)],
)
def activate_key(key_id: KeyId, context: Ctx) -> KeyOut:
    return _set_active(context, key_id, True)


@router.delete(
    "/keys/{key_id}",
    status_code=204,
    response_class=Response,
    responses=_KEY_ERRORS,
    dependencies=[Depends(require_api_key)],
)
def delete_key(key_id: KeyId, context: Ctx) -> Response:
    try:
        context.keys.delete(key_id)
    except NotFound:
        raise HTTPException(404, f"API key {key_id} not found") from None
    except LastActiveKey:
        raise HTTPException(409, LAST_ACTIVE) from None
    return Response(status_code=204)
