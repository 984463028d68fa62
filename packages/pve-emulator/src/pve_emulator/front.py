"""The front half of request handling, one for both modes: mock (``pve_emulator.app``) and real
(``pve_emulator.proxy.app``).

It is the ASGI entry point (lifespan, the documentation pages, every error answer), routes a request to
its schema operation, and reads the operation's parameters (query, body, path variables, paging),
validated. What lies between routing and answering is each mode's own: mock mode authenticates and runs
the operation on its model, real mode forwards it upstream.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from pve_emulator.errors import ApiError, NotFound
from pve_emulator.schema import ApiSchema, Operation
from pve_emulator.validation import validate_params
from pve_emulator.wire import (
    JSON_HEADERS,
    Receive,
    Scope,
    Send,
    dumps,
    error_body,
    extjs_answer,
    is_doc_path,
    is_extjs,
    parse_pairs,
    read_body,
    request_headers,
    send_answer,
    send_docs,
    split_path,
    take_paging,
)

__all__ = ["Answer", "Front", "Page", "Request"]

LOG = logging.getLogger("pve_emulator")
#: statuses a refused websocket can be answered with (uvicorn knows no phrase for Proxmox's 595)
_HTTP_STATUSES = frozenset(status.value for status in HTTPStatus)
#: status, body (bytes already encoded, or JSON data) and extra response headers
Answer = tuple[int, Any, list[tuple[bytes, bytes]]]
#: ``(start, limit)`` to cut a list answer to, or None when the operation is not a list GET
Page = tuple[int, int | None] | None


@dataclass(slots=True)
class Request:
    """A request routed to its operation; its parameters are not read yet (see ``Front.read_params``)."""

    scope: Scope
    receive: Receive
    path: str
    real: bool  # under /api2/json (Proxmox-style answers) rather than a bare SPEC path
    method: str
    op: Operation
    path_values: dict[str, str]
    headers: dict[str, str]

    @property
    def query(self) -> bytes:
        return self.scope.get("query_string", b"")


class Front:
    """Base of both ASGI applications; a mode supplies ``answer`` (and may name unknown paths its way).

    A slow Proxmox, for tests of long syncs (the documentation pages are never slowed):
    ``response_delay``, seconds each API request waits (asleep, no CPU) before it is handled;
    ``concurrency``, how many API requests are handled (their delay included) at a time, the others
    waiting their turn as behind a busy pveproxy (None: no limit)."""

    log = LOG
    #: whether an accepted ``...websocket`` call is upgraded (mock mode's consoles; see ``_websocket``)
    websockets = False

    def __init__(self, schema: ApiSchema) -> None:
        self.schema = schema
        self.response_delay = 0.0
        self.concurrency: int | None = None
        self._turns: tuple[int, asyncio.Semaphore] | None = None
        self._openapi: bytes | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.shutdown()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        path, real = split_path(scope)
        if not real and is_doc_path(path):
            await send_docs(send, path, self._openapi_json, scope)
            return
        if self.concurrency is None:
            status, payload, headers = await self._handle(scope, receive, path, real)
        else:
            async with self._turn(self.concurrency):
                status, payload, headers = await self._handle(scope, receive, path, real)
        if real and is_extjs(scope):
            status, payload = extjs_answer(status, payload, path)
        await send_answer(send, status, payload, headers)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """pveproxy's upgrade of a GET whose path ends in ``websocket``: the operation answers first
        (``vncwebsocket`` checks its ticket, with the caller's cookie or token as any call). A mode that
        serves consoles (``websockets``) accepts a 200 and closes at once with a normal close (1000): no
        console traffic is emulated. Anything else is refused with the HTTP answer the call gave (a status
        HTTP does not name, such as 595, as a plain refusal: 403 from the server)."""
        if (await receive())["type"] != "websocket.connect":
            return
        path, real = split_path(scope)

        async def no_body() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        status, payload, _ = await self._handle(
            {**scope, "type": "http", "method": "GET"}, no_body, path, real
        )
        if status == 200 and path.endswith("websocket") and self.websockets:
            binary = "binary" if "binary" in scope.get("subprotocols", []) else None
            await send({"type": "websocket.accept", "subprotocol": binary})
            await send({"type": "websocket.close", "code": 1000})
            return
        if status == 200:
            status, payload = 501, error_body(ApiError(501, "websocket upgrade not supported here"), real)
        if "websocket.http.response" not in scope.get("extensions", {}) or status not in _HTTP_STATUSES:
            await send({"type": "websocket.close", "code": 1008})
            return
        body = payload if isinstance(payload, bytes) else dumps(payload)
        headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})

    def _turn(self, size: int) -> asyncio.Semaphore:
        """The semaphore of `size` turns, made on the serving loop (again when the size was changed)."""
        if self._turns is None or self._turns[0] != size:
            self._turns = (size, asyncio.Semaphore(size))
        return self._turns[1]

    async def _handle(self, scope: Scope, receive: Receive, path: str, real: bool) -> Answer:
        """The answer to one API request (after the configured delay), errors included."""
        if self.response_delay > 0:
            await asyncio.sleep(self.response_delay)
        try:
            return await self.answer(self.route(scope, receive, path, real))
        except ApiError as exc:
            return exc.status, error_body(exc, real), []
        except Exception as exc:  # pragma: no cover - a bug: report it without leaking request data
            self.log.exception("internal error on %s %s", scope.get("method"), path)
            err = ApiError(500, f"internal error: {type(exc).__name__}")
            return 500, error_body(err, real), []

    async def answer(self, request: Request) -> Answer:  # pragma: no cover - every mode has its own
        raise NotImplementedError

    async def shutdown(self) -> None:
        """Release what the mode holds open (real mode: its upstream connections)."""

    def unknown_path(self, path: str, real: bool) -> str:
        """The message of the 404 for a path no operation of the schema has."""
        return f"no such resource: {path}" if real else "Not Found"

    def route(self, scope: Scope, receive: Receive, path: str, real: bool) -> Request:
        """The operation a request is for (404 for an unknown path, 501 for a method it lacks)."""
        method = scope["method"].upper()
        segments = [unquote(s) for s in path.split("/") if s]
        found = self.schema.router.match(segments)
        if found is None:
            raise NotFound(self.unknown_path(path, real))
        methods, path_values = found
        op = methods.get("GET" if method == "HEAD" else method)
        if op is None:
            raise ApiError(501, f"Method '{method} {path}' not implemented")
        return Request(scope, receive, path, real, method, op, path_values, request_headers(scope))

    async def read_params(self, request: Request) -> tuple[dict[str, Any], Page]:
        """The operation's parameters, validated (a 400 names every failing field), and the page to cut
        a list answer to. The body is read only here, so a mode may refuse a request before that."""
        raw = parse_pairs(request.query.decode("utf-8", errors="replace"))
        if request.method in ("POST", "PUT", "DELETE"):
            raw.update(await read_body(request.receive, request.headers))
        raw.update(request.path_values)
        page = take_paging(request.op, raw)
        return validate_params(request.op, raw), page

    def _openapi_json(self) -> bytes:
        from pve_emulator import openapi  # built on the first documentation request only

        if self._openapi is None:
            self._openapi = dumps(openapi.build(self.schema))
        return self._openapi
