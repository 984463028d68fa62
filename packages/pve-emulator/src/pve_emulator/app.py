"""Mock mode's HTTP layer: every request dispatched through the compiled schema to the mock backend.

Each operation answers twice: at the bare path the SPEC shows (``/version``; plain JSON, errors as
``{detail, errors: [{field, message}]}``) and at the real Proxmox path (``/api2/json/version``; body
``{"data": ...}``, Proxmox-style errors). The backend (the mock state model) never sees HTTP; this
module never touches state. The front half of a request (routing, reading parameters, error answers) is
shared with real mode (``pve_emulator.front``); what is left here is authentication, login, the response
cache and shaping the backend's result.
"""

from __future__ import annotations

import time
from typing import Any, Protocol
from urllib.parse import unquote

from pve_emulator.auth import TicketSigner, parse_token_header
from pve_emulator.clock import Clock
from pve_emulator.errors import Forbidden, Unauthorized
from pve_emulator.fault_gate import FaultGate
from pve_emulator.front import Answer, Front, Request
from pve_emulator.identity import Identity
from pve_emulator.paging import Counted
from pve_emulator.schema import ApiSchema, Operation
from pve_emulator.wire import bare_answer, cookie_value, dumps

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


class EmulatorApp(Front):
    websockets = True  # consoles: a ``vncwebsocket`` call whose ticket is good is upgraded, then closed

    def __init__(
        self,
        schema: ApiSchema,
        backend: Backend,
        signer: TicketSigner | None = None,
        *,
        response_cache: bool = True,
    ) -> None:
        super().__init__(schema)
        self.response_cache = response_cache
        self.backend = backend
        self.signer = signer or TicketSigner(clock=backend.clock)
        self._cache: dict[tuple[Any, ...], bytes] = {}
        self._cache_stamp: tuple[int, int] = (-1, -1)
        #: faults on demand (``pve_emulator.fault_gate``); None: a well-behaved cluster, nothing checked
        self.fault_gate: FaultGate | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        gate = self.fault_gate
        if gate is not None and scope["type"] == "http" and await gate.intercept(scope, receive, send):
            return
        await super().__call__(scope, receive, send)

    @property
    def clock(self) -> Clock:
        """The clock tickets, CSRF tokens and ``expire`` dates are judged by (tests advance it)."""
        return self.signer.clock

    async def answer(self, request: Request) -> Answer:
        """Authenticate (before the body is read), answer from the cache or run the operation."""
        op, real = request.op, request.real
        identity = (
            None
            if op.key in PUBLIC_OPERATIONS or _world(op)
            else self._authenticate(request.headers, request.method, op)
        )
        cache_key = None
        if self.response_cache and op.key in CACHEABLE and identity is not None:
            stamp = (self.backend.state.revision, int(time.time()))
            if stamp != self._cache_stamp or len(self._cache) > 4096:
                self._cache.clear()
                self._cache_stamp = stamp
            cache_key = (real, request.path, request.query, identity.subject)
            cached = self._cache.get(cache_key)
            if cached is not None:
                return 200, cached, []
        params, page = await self.read_params(request)
        if op.key == "POST /access/ticket":
            return self._login(params, real, secure=request.scope.get("scheme") == "https")
        assert identity is not None or op.key in PUBLIC_OPERATIONS or _world(op)
        who = identity or Identity(userid="nobody@pve")
        if identity is not None and not self.backend.allowed(identity, op, params):
            raise Forbidden(f"Permission check failed ({op.path})")
        faults = self.fault_gate.faults if self.fault_gate is not None else None
        if faults is not None:
            faults.refuse(op.key, params)
        result = self.backend.handle(op, params, who)
        if faults is not None:
            result = faults.shape(op.key, params, result)
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
                raise Unauthorized("invalid authorization header")
            userid, full, secret = parsed
            if not self.backend.check_token(userid, full, secret):
                raise Unauthorized("Authentication failed!")
            if not op.allowtoken:
                raise Forbidden("API tokens are not allowed for this operation")
            return Identity(userid=userid, tokenid=full, via="token")
        ticket = cookie_value(headers.get("cookie", ""), "PVEAuthCookie")
        if not ticket:
            raise Unauthorized("No ticket")
        ticket_user = self.signer.verify(unquote(ticket))
        if ticket_user is None or not self.backend.user_enabled(ticket_user):
            raise Unauthorized("Authentication failed!")
        userid = ticket_user
        if method not in ("GET", "HEAD"):
            csrf = headers.get("csrfpreventiontoken", "")
            if not csrf or not self.signer.verify_csrf(userid, csrf):
                raise Unauthorized("Permission denied - invalid csrf token")
        return Identity(userid=userid, via="ticket")

    def _login(self, params: dict[str, Any], real: bool, secure: bool) -> Answer:
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
            raise Unauthorized("authentication failure")
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


def _world(op: Operation) -> bool:
    return bool(op.permissions and op.permissions.get("user") == "world")
