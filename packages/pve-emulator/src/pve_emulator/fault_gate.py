"""The HTTP side of faults on demand: the control API and what a fault does on the wire.

``/_emulator/faults`` (outside ``/api2``) exists only when the emulator was started with a control
secret; without one the path is an unknown resource (404) like any other. Every call must carry the
secret in ``X-PVE-Emulator-Secret`` (missing: 401, wrong: 403). ``GET`` lists the faults, ``POST`` sets
the named ones (the others stay), ``PUT`` replaces them all, ``DELETE`` clears them. Bodies are JSON
objects with the keys of :data:`pve_emulator.mock.faults.FAULT_KEYS`; a bad one is a 400 naming the
field, and changes nothing.

Before an API request is routed, the gate drops its connection (at ``drop_rate``: closed with no
answer, as a crashed proxy or a lost link does) or holds it for its latency and, for a node that is
offline, the connect delay after which pveproxy gives up with 595.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from pve_emulator.auth import TICKET_LIFETIME, TicketSigner
from pve_emulator.errors import ApiError, Forbidden, Unauthorized
from pve_emulator.mock.faults import Faults
from pve_emulator.wire import (
    Receive,
    Scope,
    Send,
    error_body,
    is_doc_path,
    read_body,
    request_headers,
    send_answer,
    split_path,
)

CONTROL_PATH = "/_emulator/faults"
SECRET_HEADER = "x-pve-emulator-secret"


class FaultGate:
    """The faults of one emulator and, when ``secret`` is set, the control API that changes them."""

    def __init__(self, faults: Faults, signer: TicketSigner, secret: str | None = None) -> None:
        self.faults = faults
        self.signer = signer
        self.secret = secret

    def update(self, settings: dict[str, Any], *, replace: bool = False) -> dict[str, Any]:
        """Set faults (``replace``: every other one cleared) and return them all. In-process tests and
        the control API both come here, so the ticket signer always follows ``ticket_lifetime``."""
        if replace:
            self.faults.update(settings)  # checked (and refused) before anything is cleared
            defaults = Faults(self.faults.state, self.faults.seed).view()
            self.faults.update({**{k: v for k, v in defaults.items() if k != "seed"}, **settings})
        else:
            self.faults.update(settings)
        self.signer.lifetime = self.faults.ticket_lifetime or TICKET_LIFETIME
        return self.faults.view()

    def clear(self) -> dict[str, Any]:
        self.faults.clear()
        self.signer.lifetime = TICKET_LIFETIME
        return self.faults.view()

    async def intercept(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Handle what is the gate's (the control API, a dropped connection); True when it answered."""
        path, real = split_path(scope)
        if not real and (path == CONTROL_PATH or path.startswith(CONTROL_PATH + "/")):
            if self.secret is None:
                return False  # the control API is off: the API's own 404
            await self._control(scope, receive, send, path)
            return True
        if not real and is_doc_path(path):
            return False
        if self.faults.drop():
            drop_connection(send)
            return True
        delay = self.faults.delay(path)
        if delay > 0:
            await asyncio.sleep(delay)
        return False

    async def _control(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        headers = request_headers(scope)
        try:
            given = headers.get(SECRET_HEADER)
            if not given:
                raise Unauthorized(f"the control API needs its secret in {SECRET_HEADER}")
            assert self.secret is not None
            if not hmac.compare_digest(given.encode(), self.secret.encode()):
                raise Forbidden("wrong control secret")
            if path.rstrip("/") != CONTROL_PATH:
                raise ApiError(404, "Not Found")
            method = scope["method"].upper()
            if method == "GET":
                data = self.faults.view()
            elif method in ("POST", "PUT"):
                data = self.update(await read_body(receive, headers), replace=method == "PUT")
            elif method == "DELETE":
                data = self.clear()
            else:
                raise ApiError(405, "method not allowed")
            await send_answer(send, 200, {"data": data})
        except ApiError as exc:
            await send_answer(send, exc.status, error_body(exc, False))


def drop_connection(send: Send) -> None:
    """Close the request's connection with nothing written. uvicorn's ``send`` is a method of the
    request cycle, which holds the transport; marking the cycle disconnected keeps uvicorn from
    writing its own 500 afterwards."""
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None:  # not under uvicorn: the nearest thing is an answer that never comes
        raise ConnectionAbortedError("dropped by the drop_rate fault")
    transport.abort()
    cycle.disconnected = True  # type: ignore[union-attr]
