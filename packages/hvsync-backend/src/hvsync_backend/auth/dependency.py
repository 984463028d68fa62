"""``require_api_key``: the FastAPI dependency every protected router uses.

Order: locked IP -> 429 (no key check at all); cached verification (one primary-key lookup confirms the
key is still active) -> ok; bcrypt over active keys -> ok and cached; otherwise 503 when the database
holds no key at all (not counted), else a counted failure answered 401, or 429 once the IP is locked.
"""

from __future__ import annotations

import math
import time
from typing import Any, Protocol

from fastapi import HTTPException, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader

from hvsync_backend.auth.client_ip import client_ip
from hvsync_backend.auth.hashing import key_problem
from hvsync_backend.auth.keys import KeyStore, VerificationBusy
from hvsync_backend.auth.lockout import LockoutTracker
from hvsync_backend.config import Settings
from hvsync_backend.metrics import REASON_INVALID, REASON_LOCKED, REASON_MISSING, Metrics
from hvsync_backend.wire import API_KEY_HEADER

INVALID_KEY = "Invalid API key"
LOCKED_OUT = "Too many failed authentication attempts"
VERIFY_BUSY = "Key verification is busy; retry shortly"
NO_KEY_CONFIGURED = (
    "No API key is configured on this backend; register the first key with POST /auth/register-key"
)

# OpenAPI ``responses`` for a protected router: ``APIRouter(dependencies=[Depends(require_api_key)],
# responses=AUTH_RESPONSES)``.
_DETAIL_SCHEMA = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}


def _detail_response(description: str, example: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": _DETAIL_SCHEMA, "example": {"detail": example}}},
    }


AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _detail_response(INVALID_KEY, INVALID_KEY),
    429: _detail_response(f"{LOCKED_OUT} (header Retry-After: seconds)", LOCKED_OUT),
    503: _detail_response("no API key configured yet, or backend not ready", NO_KEY_CONFIGURED),
}


class AuthParts(Protocol):
    """What authentication needs of the running backend (`context.BackendContext` has each), so that
    this module does not import the app context it serves."""

    settings: Settings
    keys: KeyStore
    lockout: LockoutTracker
    metrics: Metrics


api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="service API key")


def _locked(retry_after: float) -> HTTPException:
    return HTTPException(429, LOCKED_OUT, headers={"Retry-After": str(max(1, math.ceil(retry_after)))})


def _fast_path(context: AuthParts, ip: str, presented: str | None) -> int | None:
    """Answer from memory when possible: a locked IP (raises 429) or a recently confirmed cached key."""
    left = context.lockout.retry_after(ip)
    if left is not None:
        context.metrics.auth_failed(REASON_LOCKED)
        raise _locked(left)
    if not presented:
        return None
    window = context.settings.key_recheck_seconds
    cached = context.keys.cache.get(context.keys.cache.fingerprint(presented)) if window > 0 else None
    if cached is not None and time.monotonic() - cached[1] < window:
        context.lockout.record_success(ip)
        return cached[0]
    return None


def authenticate(context: AuthParts, ip: str, presented: str | None) -> int:
    """Return the id of the authenticating key or raise the HTTP error the caller must see (blocking)."""
    fast = _fast_path(context, ip, presented)
    if fast is not None:
        return fast
    keys = context.keys
    if presented:
        fingerprint = keys.cache.fingerprint(presented)
        cached = keys.cache.get(fingerprint)
        if cached is not None:
            generation = keys.cache.generation
            if keys.is_active(cached[0]):
                keys.cache.put(fingerprint, cached[0], generation)
                context.lockout.record_success(ip)
                return cached[0]
            keys.cache.drop(fingerprint)
        if key_problem(presented) is None:
            try:
                key_id = keys.verify(presented)
            except VerificationBusy:
                raise HTTPException(503, VERIFY_BUSY, headers={"Retry-After": "1"}) from None
            if key_id is not None:
                context.lockout.record_success(ip)
                return key_id
    if not keys.has_any_key():
        raise HTTPException(503, NO_KEY_CONFIGURED)
    left = context.lockout.record_failure(ip)
    if left is not None:
        context.metrics.auth_failed(REASON_LOCKED)
        raise _locked(left)
    context.metrics.auth_failed(REASON_INVALID if presented else REASON_MISSING)
    raise HTTPException(401, INVALID_KEY, headers={"WWW-Authenticate": API_KEY_HEADER})


async def require_api_key(request: Request, presented: str | None = Security(api_key_header)) -> int:
    """FastAPI dependency: authenticate the request; stores the key id in ``request.state.api_key_id``.

    The common case (a key verified moments ago) is answered on the event loop without I/O; anything
    needing the database or bcrypt runs in a worker thread.
    """
    context: AuthParts = request.app.state.context
    ip = client_ip(request, context.settings.proxy_networks)
    key_id = _fast_path(context, ip, presented)
    if key_id is None:
        key_id = await run_in_threadpool(authenticate, context, ip, presented)
    request.state.api_key_id = key_id
    return key_id
