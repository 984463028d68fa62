"""Unauthenticated service routes: ``/``, ``/health``, ``/meta``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from hvsync_backend import __version__
from hvsync_backend.api.deps import Ctx
from hvsync_backend.context import BackendContext
from hvsync_backend.db.session import current_revision, database_kind, head_revision

SERVICE_NAME = "hvsync-backend"
API_VERSION = "1"

router = APIRouter(tags=["service"])


class RootOut(BaseModel):
    service: str
    version: str
    api_version: str
    docs: str
    redoc: str
    openapi: str
    health: str
    meta: str


class MetaOut(BaseModel):
    service: str
    version: str
    api_version: str
    database: str


class CheckOut(BaseModel):
    ok: bool
    detail: str


class HealthOut(BaseModel):
    status: str
    ready: bool
    checks: dict[str, CheckOut]


@router.get("/", response_model=RootOut, summary="Root metadata")
def root() -> dict[str, str]:
    return {
        "service": SERVICE_NAME,
        "version": __version__,
        "api_version": API_VERSION,
        "docs": "/docs",
        "redoc": "/redoc",
        "openapi": "/openapi.json",
        "health": "/health",
        "meta": "/meta",
    }


@router.get("/meta", response_model=MetaOut, summary="Service metadata")
def meta(context: Ctx) -> dict[str, str]:
    return {
        "service": SERVICE_NAME,
        "version": __version__,
        "api_version": API_VERSION,
        "database": database_kind(context.settings.resolved_database_url),
    }


def _checks(context: BackendContext) -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = {}
    try:
        with context.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        current, head = current_revision(context.engine), head_revision(context.engine)
        if current == head:
            checks["database"] = {"ok": True, "detail": f"reachable, schema at revision {current}"}
        else:
            checks["database"] = {"ok": False, "detail": f"schema at revision {current}, expected {head}"}
    except Exception as exc:
        checks["database"] = {"ok": False, "detail": f"unreachable: {type(exc).__name__}"}
    if "encryption_key" in context.problems:
        checks["encryption_key"] = {"ok": False, "detail": context.problems["encryption_key"]}
    else:
        checks["encryption_key"] = {"ok": True, "detail": "loaded"}
    return checks


@router.get(
    "/health",
    response_model=HealthOut,
    summary="Readiness: 200 when ready, 503 with the failing checks when not",
    responses={503: {"model": HealthOut, "description": "not ready; `checks` says why"}},
)
def health(context: Ctx) -> JSONResponse:
    checks = _checks(context)
    ready = all(c["ok"] for c in checks.values())
    body = {"status": "ok" if ready else "unavailable", "ready": ready, "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)
