"""``require_api_key``: the FastAPI dependency every protected router uses.

Order: a cached verification (one primary-key lookup confirms the key is still active) -> ok, from any
address; a locked IP, or a spent global failure budget -> 429 (no bcrypt at all); bcrypt over the
candidate keys -> ok and cached; otherwise 503 when the database holds no key at all (not counted), else a
counted failure answered 401, or 429 once the IP is locked.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from typing import Any, Protocol

from fastapi import HTTPException, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader

from hvsync_backend.auth.client_ip import client_ip
from hvsync_backend.auth.hashing import key_problem
from hvsync_backend.auth.keys import VERIFY_WAIT, KeyStore, VerificationBusy
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


#: Where ``auth.gate.KeyGate`` leaves the authenticated key id in the ASGI scope's ``state``.
GATE_STATE = "api_key_id"

api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="service API key")


def _locked(retry_after: float) -> HTTPException:
    return HTTPException(429, LOCKED_OUT, headers={"Retry-After": str(max(1, math.ceil(retry_after)))})


async def authenticate(context: AuthParts, ip: str, presented: str | None) -> int:
    """Return the id of the authenticating key or raise the HTTP error the caller must see.

    Reads only the key header and the client address, never a body. A key this process already verified
    (the verification cache, confirmed against its row) works from any address, locked or not: the
    lockout slows guessing, it does not deny the owner behind a shared NAT. A key that would need a bcrypt
    check is not checked from a locked IP, nor from anywhere while the global failure budget is spent.
    """
    keys = context.keys
    if presented:
        fingerprint = keys.cache.fingerprint(presented)
        cached = keys.cache.get(fingerprint)
        window = context.settings.key_recheck_seconds
        if cached is not None and window > 0 and time.monotonic() - cached[1] < window:
            return _succeeded(context, ip, cached[0])
        if cached is not None:
            generation = keys.cache.generation
            if await run_in_threadpool(keys.is_active, cached[0]):
                keys.cache.put(fingerprint, cached[0], generation)
                return _succeeded(context, ip, cached[0])
            keys.cache.drop(fingerprint)
    left = context.lockout.retry_after(ip)
    if left is None:
        left = context.lockout.global_retry_after()
    if left is not None:
        context.metrics.auth_failed(REASON_LOCKED)
        raise _locked(left)
    if presented and key_problem(presented) is None:
        key_id = await _verify(context, presented)
        if key_id is not None:
            return _succeeded(context, ip, key_id)
    if not await run_in_threadpool(keys.has_any_key):
        raise HTTPException(503, NO_KEY_CONFIGURED)
    left = context.lockout.record_failure(ip)
    if left is not None:
        context.metrics.auth_failed(REASON_LOCKED)
        raise _locked(left)
    context.metrics.auth_failed(REASON_INVALID if presented else REASON_MISSING)
    raise HTTPException(401, INVALID_KEY, headers={"WWW-Authenticate": API_KEY_HEADER})


def _succeeded(context: AuthParts, ip: str, key_id: int) -> int:
    context.lockout.record_success(ip)
    return key_id


async def _verify(context: AuthParts, presented: str) -> int | None:
    """The bcrypt path. Requests wait for one of ``bcrypt_slots`` on the event loop, not in a worker
    thread: a flood of wrong keys cannot take the thread pool a cached key's row lookup needs."""
    gate = _bcrypt_gate(context)
    try:
        await asyncio.wait_for(gate.acquire(), timeout=VERIFY_WAIT)
    except TimeoutError:
        raise HTTPException(503, VERIFY_BUSY, headers={"Retry-After": "1"}) from None
    try:
        return await run_in_threadpool(context.keys.verify, presented)
    except VerificationBusy:
        raise HTTPException(503, VERIFY_BUSY, headers={"Retry-After": "1"}) from None
    finally:
        gate.release()


#: event loop -> key store -> its semaphore (an asyncio semaphore belongs to one loop; tests drive one app
#: from several)
_GATES: weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Any, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _bcrypt_gate(context: AuthParts) -> asyncio.Semaphore:
    """One semaphore per key store (per running backend) and loop, sized by ``bcrypt_slots``."""
    per_loop = _GATES.setdefault(asyncio.get_running_loop(), weakref.WeakKeyDictionary())
    gate = per_loop.get(context.keys)
    if gate is None:
        gate = per_loop[context.keys] = asyncio.Semaphore(context.settings.bcrypt_slots)
    return gate


async def require_api_key(request: Request, presented: str | None = Security(api_key_header)) -> int:
    """FastAPI dependency: the key id ``auth.gate.KeyGate`` stored before the body was read (it runs in
    front of every app ``create_app`` builds), else authenticate here; sets ``request.state.api_key_id``."""
    key_id: int | None = request.scope.get("state", {}).get(GATE_STATE)
    if key_id is None:
        context: AuthParts = request.app.state.context
        key_id = await authenticate(context, client_ip(request, context.settings.proxy_networks), presented)
    request.state.api_key_id = key_id
    return key_id
