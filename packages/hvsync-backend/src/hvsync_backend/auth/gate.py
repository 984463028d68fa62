"""``KeyGate``: the key (and the lockout) is checked from the headers before any body is read, and no body
larger than ``max_body_bytes`` is ever taken in.

FastAPI reads and parses a route's JSON body before it solves the route's dependencies, so a key check
done only as a dependency comes after the body: a stranger, even from a locked-out address, could make
the service buffer and parse megabytes. This pure ASGI middleware runs in front of the app instead:

1. Routes protected by ``require_api_key`` (and any path no route serves: fail closed) are authenticated
   from the headers alone; a refusal (401/429/503) is sent without reading the body, with
   ``Connection: close`` when one was announced. The key id is left in the scope for the dependency.
2. A ``Content-Length`` over the cap is answered 413 at once; a chunked body is counted as it arrives
   and cut off (413) the moment it passes the cap, so it is never buffered whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hvsync_backend.auth.client_ip import client_ip
from hvsync_backend.auth.dependency import GATE_STATE, authenticate, require_api_key
from hvsync_backend.route_table import path_patterns
from hvsync_backend.wire import API_KEY_HEADER

BODY_TOO_LARGE = "request body too large: the limit is {limit} bytes (HVSYNC_MAX_BODY_BYTES)"


class BodyTooLarge(Exception):
    """The request body passed the cap while it was being read."""


def _dependency_calls(dependant: Any) -> Iterable[Any]:
    for sub in getattr(dependant, "dependencies", ()):
        yield sub.call
        yield from _dependency_calls(sub)


def needs_key(route: BaseRoute) -> bool:
    """True when the route (or its router) depends on ``require_api_key``."""
    return require_api_key in set(_dependency_calls(getattr(route, "dependant", None)))


class KeyGate:
    def __init__(self, app: ASGIApp, backend: FastAPI) -> None:
        self.app = app
        self.backend = backend
        self._guarded: dict[int, bool] = {}

    def _protected(self, path: str) -> bool:
        """Any route serving the path needs the key, or no route serves it (a 404 is for key holders)."""
        matched = False
        for route, regex in path_patterns(self.backend.router.routes):
            if not regex.match(path):
                continue
            matched = True
            guarded = self._guarded.get(id(route))
            if guarded is None:
                guarded = self._guarded[id(route)] = needs_key(route)
            if guarded:
                return True
        return not matched

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        context = self.backend.state.context
        settings = context.settings
        request = Request(scope)  # no receive callable: the body cannot be touched here
        announced = request.headers.get("content-length")
        has_body = bool(request.headers.get("transfer-encoding")) or announced not in (None, "0")
        if self._protected(scope["path"]):
            presented = request.headers.get(API_KEY_HEADER) or None
            ip = client_ip(request, settings.proxy_networks)
            try:
                key_id = await authenticate(context, ip, presented)
            except HTTPException as exc:
                await _refuse(scope, send, exc.status_code, str(exc.detail), exc.headers, has_body)
                return
            except Exception as exc:  # the app's own handlers answer (database down: 503), else it is a 500
                handler = self._handler_for(exc)
                if handler is None:
                    raise
                response = await handler(request, exc)
                if has_body:
                    response.headers["Connection"] = "close"
                await response(scope, _nothing, send)
                return
            scope.setdefault("state", {})[GATE_STATE] = key_id
        limit = settings.max_body_bytes
        if announced is not None and announced.isdigit() and int(announced) > limit:
            await _refuse(scope, send, 413, BODY_TOO_LARGE.format(limit=limit), None, True)
            return
        await self._capped(scope, receive, send, limit)

    def _handler_for(self, exc: Exception) -> Any:
        handlers = self.backend.exception_handlers
        return next((handlers[k] for k in type(exc).__mro__ if k in handlers and k is not Exception), None)

    async def _capped(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        received = 0
        overflowed = False
        started = False

        async def counted() -> Message:
            nonlocal received, overflowed
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    overflowed = True
                    raise BodyTooLarge
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if overflowed:
                return  # whatever the app makes of the cut-off body, the client gets the 413 below
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if not overflowed:
                raise
        if overflowed and not started:
            await _refuse(scope, send, 413, BODY_TOO_LARGE.format(limit=limit), None, True)


async def _refuse(
    scope: Scope,
    send: Send,
    status: int,
    detail: str,
    headers: dict[str, str] | None,
    close: bool,
) -> None:
    """A JSON error sent without reading the request; ``close``: the unread body ends the connection."""
    extra = dict(headers or {})
    if close:
        extra["Connection"] = "close"

    await JSONResponse({"detail": detail}, status_code=status, headers=extra)(scope, _nothing, send)


async def _nothing() -> Message:
    """The receive callable of a refusal: the request body is never read."""
    return {"type": "http.disconnect"}
