"""``create_app(settings)``: the FastAPI application. Routers are included in exactly one place: ``ROUTERS``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from sqlalchemy.exc import DBAPIError, OperationalError

from hvsync_backend import __version__
from hvsync_backend.api import docs, endpoints, hv, keys, meta
from hvsync_backend.api import metrics as metrics_api
from hvsync_backend.api import sync as sync_api
from hvsync_backend.auth.gate import KeyGate
from hvsync_backend.config import Settings
from hvsync_backend.context import BackendContext, NotReady, build_context
from hvsync_backend.db.session import head_revision
from hvsync_backend.endpoints.crypto import CredentialDecryptError
from hvsync_backend.endpoints.schemas import SECRET_FIELDS
from hvsync_backend.errors import FieldError
from hvsync_backend.route_table import leaf_routes
from hvsync_backend.slashes import BothSlashForms
from hvsync_backend.sse.runs import RunRegistry

log = logging.getLogger("hvsync_backend")

# Add new routers here (one line each); every protected router depends on auth.dependency.require_api_key.
ROUTERS: list[APIRouter] = [
    meta.router,
    docs.router,  # /docs, /redoc and their assets, served locally (no CDN)
    keys.router,
    endpoints.router,
    hv.router,
    sync_api.router,
    metrics_api.router,  # protected by its own dependency: public only with HVSYNC_METRICS_PUBLIC
]


def _safe_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors without echoed input: a rejected credential must never come back in the body."""
    out: list[dict[str, Any]] = []
    for err in errors:
        item = {
            "type": err.get("type", "value_error"),
            "loc": list(err.get("loc", ())),
            "msg": str(err.get("msg", "")),
        }
        ctx = err.get("ctx")
        if ctx and not any(str(part) in SECRET_FIELDS for part in item["loc"]):
            item["ctx"] = {
                k: v if isinstance(v, str | int | float | bool) else str(v) for k, v in ctx.items()
            }
        out.append(item)
    return out


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _safe_errors(exc.errors())}, status_code=422)

    @app.exception_handler(FieldError)
    async def _invalid(_: Request, exc: FieldError) -> JSONResponse:
        body = [{"type": "value_error", "loc": ["body", exc.field], "msg": exc.message}]
        return JSONResponse({"detail": body}, status_code=422)

    @app.exception_handler(NotReady)
    async def _not_ready(_: Request, exc: NotReady) -> JSONResponse:
        return JSONResponse({"detail": f"backend not ready: {exc}"}, status_code=503)

    @app.exception_handler(CredentialDecryptError)
    async def _decrypt(_: Request, exc: CredentialDecryptError) -> JSONResponse:
        log.error("stored credential cannot be decrypted (was the encryption key changed?)")
        return JSONResponse(
            {"detail": "stored credentials cannot be decrypted with the configured encryption key"},
            status_code=503,
        )

    @app.exception_handler(OperationalError)
    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: Exception) -> JSONResponse:
        log.error("database error: %s", type(exc).__name__)
        return JSONResponse({"detail": "database unavailable"}, status_code=503)


#: What FastAPI answers when a request body is not JSON: documented on the routes that take a body (only
#: they can answer it; an app-wide 400 would also override the "4XX" a route documents for its own 400s).
PARSE_ERROR = {"model": keys.DetailOut, "description": "request body could not be parsed"}


def _document_parse_errors(app: FastAPI) -> None:
    for route in leaf_routes(app.router.routes):
        if isinstance(route, APIRoute) and route.body_field is not None:
            route.responses.setdefault(400, PARSE_ERROR)


def create_app(settings: Settings | None = None, context: BackendContext | None = None) -> FastAPI:
    """Build the app: applies migrations and loads the encryption key once, here, not per request."""
    settings = settings or Settings()
    context = context or build_context(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await context.proxmox.aclose()

    app = FastAPI(
        title="hvsync backend",
        version=__version__,
        description="Key-guarded service that reads Proxmox VE and writes NetBox. "
        "Send the key in the `X-Service-API-Key` header.",
        lifespan=lifespan,
        docs_url=None,  # served by api/docs.py from local files
        redoc_url=None,
        redirect_slashes=False,  # BothSlashForms serves both forms instead of a Host-built redirect
    )
    app.state.context = context
    app.state.sync_runs = RunRegistry(max_active=settings.max_concurrent_runs)
    head_revision(context.engine)  # read the shipped migrations once, here, not on every /health
    _install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    _document_parse_errors(app)
    # Outermost last: the slash forms are settled before the gate looks the path up.
    app.add_middleware(KeyGate, backend=app)
    app.add_middleware(BothSlashForms, router=app.router)
    return app
