"""The HTTP layer: a small ASGI application that dispatches every request through the compiled schema.

Each operation answers twice: at the bare path the SPEC shows (``/version``; plain JSON, errors as
``{detail, errors: [{field, message}]}``) and at the real Proxmox path (``/api2/json/version``; body
``{"data": ...}``, Proxmox-style errors). The backend (the mock state model) never sees HTTP; this
module never touches state. Reading requests and writing answers is shared with real mode
(``pve_emulator.wire``).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol
from urllib.parse import unquote

from pve_emulator.auth import TicketSigner, parse_token_header
from pve_emulator.clock import Clock
from pve_emulator.errors import ApiError
from pve_emulator.identity import Identity
from pve_emulator.paging import Counted
from pve_emulator.schema import ApiSchema, Operation
from pve_emulator.validation import ParameterError, validate_params
from pve_emulator.wire import (
    Receive,
    Scope,
    Send,
    bare_answer,
    cookie_value,
    dumps,
    error_body,
    is_doc_path,
    parse_pairs,
    read_body,
    request_headers,
    send_answer,
    send_docs,
    split_path,
    take_paging,
)

LOG = logging.getLogger("pve_emulator")
PUBLIC_OPERATIONS = {"GET /version", "GET /access/ticket", "POST /access/ticket"}
# Hot, read-only lists whose encoded body is cached until the model changes (or the second ticks over).
CACHEABLE = {"GET /nodes/{node}/qemu", "GET /nodes/{node}/lxc", "GET /cluster/resources", "GET /nodes"}


class Backend(Protocol):
    """What the HTTP layer needs from a mode (mock now, real-mode proxy later)."""

    state: Any
    clock: Clock  # judges credential lifetimes; the app's ticket signer shares it

    def check_password(self, userid: str, password: str) -> bool: ...
    def check_token(self, userid: str, full_tokenid: str, secret: str) -> bool: ...
    def user_enabled(self, userid: str) -> bool: ...
    def allowed(self, identity: Identity, op: Operation, params: dict[str, Any]) -> bool: ...
    def handle(self, op: Operation, params: dict[str, Any], identity: Identity) -> Any: ...


class EmulatorApp:
    def __init__(
        self,
        schema: ApiSchema,
        backend: Backend,
        signer: TicketSigner | None = None,
        *,
        response_cache: bool = True,
    ) -> None:
        self.schema = schema
        self.response_cache = response_cache
        self.backend = backend
        self.signer = signer or TicketSigner(clock=backend.clock)
        self._openapi: bytes | None = None
        self._cache: dict[tuple[Any, ...], bytes] = {}
        self._cache_stamp: tuple[int, int] = (-1, -1)

    @property
    def clock(self) -> Clock:
        """The clock tickets, CSRF tokens and ``expire`` dates are judged by (tests advance it)."""
        return self.signer.clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, real = split_path(scope)
        if not real and is_doc_path(path):
            await send_docs(send, path, self._openapi_json, scope)
            return
        try:
            status, payload, headers = await self._dispatch(scope, receive, path, real)
        except ApiError as exc:
            status, payload, headers = exc.status, error_body(exc, real), []
        except Exception as exc:  # pragma: no cover - a bug: report it without leaking request data
            LOG.exception("internal error on %s %s", scope.get("method"), path)
            err = ApiError(500, f"internal error: {type(exc).__name__}")
            status, payload, headers = 500, error_body(err, real), []
        await send_answer(send, status, payload, headers)

    # -- dispatch -------------------------------------------------------------------------------

    async def _dispatch(
        self, scope: Scope, receive: Receive, path: str, real: bool
    ) -> tuple[int, Any, list[Any]]:
        method = scope["method"].upper()
        segments = [unquote(s) for s in path.split("/") if s]
        found = self.schema.router.match(segments)
        if found is None:
            raise ApiError(404, f"no such resource: {path}" if real else "Not Found")
        methods, path_values = found
        op = methods.get("GET" if method == "HEAD" else method)
        if op is None:
            raise ApiError(501, f"Method '{method} {path}' not implemented")
        headers = request_headers(scope)
        query = scope.get("query_string", b"")
        identity = (
            None if op.key in PUBLIC_OPERATIONS or _world(op) else self._authenticate(headers, method, op)
        )
        cache_key = None
        if self.response_cache and op.key in CACHEABLE and identity is not None:
            stamp = (self.backend.state.revision, int(time.time()))
            if stamp != self._cache_stamp or len(self._cache) > 4096:
                self._cache.clear()
                self._cache_stamp = stamp
            cache_key = (real, path, query, identity.subject)
            cached = self._cache.get(cache_key)
            if cached is not None:
                return 200, cached, []
        raw = parse_pairs(query.decode("utf-8", errors="replace"))
        if method in ("POST", "PUT", "DELETE"):
            raw.update(await read_body(receive, headers))
        raw.update(path_values)
        page = take_paging(op, raw)
        try:
            params = validate_params(op, raw)
        except ParameterError as exc:
            raise ApiError(400, "Parameter verification failed.", exc.errors) from None
        if op.key == "POST /access/ticket":
            return self._login(params, real, secure=scope.get("scheme") == "https")
        assert identity is not None or op.key in PUBLIC_OPERATIONS or _world(op)
        who = identity or Identity(userid="nobody@pve")
        if identity is not None and not self.backend.allowed(identity, op, params):
            raise ApiError(403, f"Permission check failed ({op.path})")
        result = self.backend.handle(op, params, who)
        total = result.total if isinstance(result, Counted) else None
        if page is not None and isinstance(result, list):
            start, limit = page
            result = result[start : start + limit] if limit is not None else result[start:]
        status, payload = (200, {"data": result}) if real else bare_answer(op, result, params)
        if real and total is not None:
            payload["total"] = total
        if cache_key is not None:
            encoded = dumps(payload)
            self._cache[cache_key] = encoded
            return status, encoded, []
        return status, payload, []

    def _authenticate(self, headers: dict[str, str], method: str, op: Operation) -> Identity:
        """pveproxy's auth handler: any token or ticket failure (bad, expired, user disabled or expired)
        is the same 401 "Authentication failed!"; a write with a ticket also needs a fresh CSRF token."""
        auth = headers.get("authorization", "")
        if auth:
            parsed = parse_token_header(auth)
            if parsed is None:
                raise ApiError(401, "invalid authorization header")
            userid, full, secret = parsed
            if not self.backend.check_token(userid, full, secret):
                raise ApiError(401, "Authentication failed!")
            if not op.allowtoken:
                raise ApiError(403, "API tokens are not allowed for this operation")
            return Identity(userid=userid, tokenid=full, via="token")
        ticket = cookie_value(headers.get("cookie", ""), "PVEAuthCookie")
        if not ticket:
            raise ApiError(401, "No ticket")
        ticket_user = self.signer.verify(unquote(ticket))
        if ticket_user is None or not self.backend.user_enabled(ticket_user):
            raise ApiError(401, "Authentication failed!")
        userid = ticket_user
        if method not in ("GET", "HEAD"):
            csrf = headers.get("csrfpreventiontoken", "")
            if not csrf or not self.signer.verify_csrf(userid, csrf):
                raise ApiError(401, "Permission denied - invalid csrf token")
        return Identity(userid=userid, via="ticket")

    def _login(self, params: dict[str, Any], real: bool, secure: bool) -> tuple[int, Any, list[Any]]:
        """``POST /access/ticket``: the user must be enabled and unexpired; the password may be a valid
        ticket of that user (or of root@pam), which is how the GUI renews its session. Every failure
        is the same 401 "authentication failure" (PVE hides the reason against user enumeration)."""
        username = params["username"]
        if "@" not in username and params.get("realm"):
            username = f"{username}@{params['realm']}"
        password = params["password"]
        ticket_user = self.signer.verify(password)
        renewal = ticket_user is not None and ticket_user in ("root@pam", username)
        if not self.backend.user_enabled(username) or not (
            renewal or self.backend.check_password(username, password)
        ):
            raise ApiError(401, "authentication failure")
        ticket = self.signer.issue(username)
        data = {
            "ticket": ticket,
            "CSRFPreventionToken": self.signer.csrf_token(username),
            "username": username,
            "clustername": getattr(self.backend.state, "cluster_name", None),
            "cap": {"vms": {}, "storage": {}, "access": {}, "nodes": {}, "dc": {}, "sdn": {}, "mapping": {}},
        }
        cookie = f"PVEAuthCookie={ticket}; path=/;{' secure;' if secure else ''} SameSite=Lax".encode()
        return 200, ({"data": data} if real else data), [(b"set-cookie", cookie)]

    # -- documentation --------------------------------------------------------------------------

    def _openapi_json(self) -> bytes:
        from pve_emulator import openapi  # built on the first documentation request only

        if self._openapi is None:
            self._openapi = dumps(openapi.build(self.schema))
        return self._openapi


def _world(op: Operation) -> bool:
    return bool(op.permissions and op.permissions.get("user") == "world")
