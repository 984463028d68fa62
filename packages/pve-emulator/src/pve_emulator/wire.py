"""HTTP wire helpers shared by both modes: reading a request, shaping and writing an answer.

Mock mode (``pve_emulator.app``) and real mode (``pve_emulator.proxy.app``) serve the same surface
(bare SPEC paths and ``/api2/json`` paths, the same error bodies, the same paging), so what they read
from and write to the ASGI connection lives here once. Nothing here touches state or the network.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from pve_emulator.errors import ApiError, NotFound, bad_param
from pve_emulator.schema import Operation
from pve_emulator.validation import decimal

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

REAL_PREFIX = "/api2/json"
#: pveproxy's ExtJS format: the same operations, every answer in ``{success, data, message, ...}``
EXTJS_PREFIX = "/api2/extjs"
#: deepest JSON body accepted: Proxmox parameters are flat (a value is at most a list of scalars), and
#: the limit keeps a hostile body from reaching a recursion limit anywhere behind the parser
MAX_JSON_DEPTH = 32
MAX_BODY = 16 * 1024 * 1024
JSON_TYPE = b"application/json;charset=UTF-8"
JSON_HEADERS = [(b"content-type", JSON_TYPE), (b"cache-control", b"max-age=0")]
DOC_PATHS = frozenset({"/docs", "/redoc", "/openapi.json"})
#: Swagger UI / ReDoc files (``pve_emulator.docs_assets``): public and read-only, like the pages.
DOC_ASSET_PREFIX = "/docs-static/"


def is_doc_path(path: str) -> bool:
    """Whether ``path`` is documentation (pages, document or their assets), served without login."""
    return path in DOC_PATHS or path.startswith(DOC_ASSET_PREFIX)


def dumps(value: Any) -> bytes:
    """Compact JSON, as Proxmox sends it (no spaces: large lists stay small on the wire)."""
    return json.dumps(value, separators=(",", ":")).encode()


def split_path(scope: Scope) -> tuple[str, bool]:
    """The operation path of a request and whether it came under ``/api2/json`` (real) or bare.

    The raw path is used so that an encoded ``/`` inside a volume id stays one segment until routing.
    """
    raw_path = scope.get("raw_path") or scope["path"].encode()
    path = raw_path.decode("latin-1").split("?", 1)[0]
    for prefix in (REAL_PREFIX, EXTJS_PREFIX):
        if path == prefix or path.startswith(prefix + "/"):
            return path[len(prefix) :] or "/", True
    return path, False


def is_extjs(scope: Scope) -> bool:
    """Whether a request came under ``/api2/extjs`` (answered in the ExtJS envelope, see ``extjs_answer``)."""
    path = scope.get("path", "")
    return path == EXTJS_PREFIX or path.startswith(EXTJS_PREFIX + "/")


def request_headers(scope: Scope) -> dict[str, str]:
    """The request headers by lower-case name (the last one wins if a name repeats)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def cookie_value(header: str, name: str) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header, or None if it is not there."""
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def parse_pairs(text: str) -> dict[str, Any]:
    """Decode a query string or form body; a repeated key becomes a list of its values, in order."""
    out: dict[str, Any] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        if key in out:
            out[key] = [*out[key], value] if isinstance(out[key], list) else [out[key], value]
        else:
            out[key] = value
    return out


async def read_body(receive: Receive, headers: dict[str, str]) -> dict[str, Any]:
    """Read a request body (JSON object or form) into raw parameters.

    Bodies over ``MAX_BODY`` are refused with 413 while streaming, before they are held in memory;
    malformed JSON, or JSON that is not an object, is a 400 naming ``body``.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise ApiError(413, "request body too large")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    if not body.strip():
        return {}
    ctype = headers.get("content-type", "")
    if "json" in ctype:
        try:
            value = json.loads(body)
        except RecursionError:
            raise bad_param("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
        except ValueError:
            raise bad_param("body", "invalid JSON") from None
        if not isinstance(value, dict):
            raise bad_param("body", "expected a JSON object")
        if json_depth(value) > MAX_JSON_DEPTH:
            raise bad_param("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        return value
    return parse_pairs(body.decode("utf-8", errors="replace"))


def json_depth(value: Any) -> int:
    """How deeply a decoded JSON value nests (a scalar is 0), walked without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest


def take_paging(op: Operation, raw: dict[str, Any]) -> tuple[int, int | None] | None:
    """Remove ``start``/``limit`` from ``raw`` on list operations that do not declare them.

    Returns ``(start, limit)`` to slice the result with after the call (None when the operation is not
    a list GET); declared ones stay in ``raw`` for the operation itself. A value that is not a
    non-negative integer is a 400 naming the parameter.
    """
    if op.method != "GET" or op.returns.get("type") != "array":
        return None
    page: list[int | None] = [0, None]
    for index, name in enumerate(("start", "limit")):
        if name in op.params or name not in raw:
            continue
        value = raw.pop(name)
        page[index] = decimal(value)
        if page[index] is None:
            raise bad_param(name, "must be a non-negative integer")
    return page[0] or 0, page[1]


def bare_answer(op: Operation, result: Any, params: dict[str, Any]) -> tuple[int, Any]:
    """Status and body of a bare-path answer, shaped the way the SPEC's table shows them.

    GETs return the data itself (a guest config also carries its ``vmid`` and legacy ``bootdisk``);
    changes answer ``{"success": true, ...}`` with the task id when there is one, 201 on creation.
    """
    if op.key == "GET /nodes/{node}/qemu/{vmid}/config" and isinstance(result, dict):
        boot = str(result.get("boot", ""))
        first = boot.removeprefix("order=").split(";")[0] if boot.startswith("order=") else None
        return 200, {"vmid": params.get("vmid"), **({"bootdisk": first} if first else {}), **result}
    if op.method == "GET":
        return 200, result
    is_task = isinstance(result, str) and result.startswith("UPID:")
    created = op.method == "POST" and op.name.startswith("create")
    if op.key in ("POST /nodes/{node}/qemu", "POST /nodes/{node}/lxc"):
        return 201, {"success": True, "vmid": params.get("vmid"), "task": result}
    if is_task:
        return (201 if created else 200), {"success": True, "task": result}
    if result is None:
        return (201 if created else 200), {"success": True}
    return (201 if created else 200), result


def error_body(exc: ApiError, real: bool) -> dict[str, Any]:
    """An error as Proxmox sends it (``message`` and an ``errors`` map) or, on bare paths, as
    ``{detail, errors: [{field, message}]}``."""
    if real:
        body: dict[str, Any] = {"data": None, "message": exc.message + "\n"}
        if exc.errors:
            body["errors"] = {e.field: e.message for e in exc.errors}
        return body
    return {"detail": exc.message, "errors": [{"field": e.field, "message": e.message} for e in exc.errors]}


def extjs_answer(status: int, payload: Any, path: str) -> tuple[int, dict[str, Any]]:
    """A ``/api2/json`` answer re-shaped as pve-http-server's ExtJS formatter shapes it
    (``PVE::APIServer::Formatter::Standard::prepare_response_data``): ``data``, ``success`` 1 or 0,
    ``errors`` when fields failed; an error carries ``message`` and its ``status`` and goes out as
    HTTP 200, since ExtJS reads ``success`` rather than the status. Two answers never reach the
    formatter and keep their status: a refused credential (pveproxy's auth handler answers 401 first;
    the login call itself, ``/access/ticket``, is an operation like any other) and a node that cannot
    be reached (595, passed through from the proxied call)."""
    body = json.loads(payload) if isinstance(payload, bytes) else dict(payload)
    out: dict[str, Any] = {"data": body.get("data")}
    success = 1
    if body.get("errors"):
        success = 0
        out["errors"] = body["errors"]
    if status >= 400:
        success = 0
        out["message"] = body.get("message") or ""
        out["status"] = status
        if not (status == 595 or (status == 401 and path != "/access/ticket")):
            status = 200
    out["success"] = success
    if success and body.get("total"):
        out["total"] = body["total"]
    return status, out


async def send_answer(
    send: Send, status: int, payload: Any, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Write a JSON answer (``payload`` already encoded if it is bytes) with its length."""
    body = payload if isinstance(payload, bytes) else dumps(payload)
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode()), *(extra_headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_docs(
    send: Send, path: str, openapi_json: Callable[[], bytes], scope: Scope | None = None
) -> None:
    """Serve ``/openapi.json`` (from ``openapi_json``, which may cache), the Swagger/ReDoc pages, or one
    of their assets (GET and HEAD only: documentation is read-only)."""
    from pve_emulator import docs_assets, openapi  # only documentation readers pay for it

    method = scope.get("method", "GET") if scope else "GET"
    headers: list[tuple[bytes, bytes]] = []
    status = 200
    if method not in ("GET", "HEAD"):
        status, body, ctype = 405, dumps(error_body(ApiError(405, "method not allowed"), False)), JSON_TYPE
        headers.append((b"allow", b"GET, HEAD"))
    elif path.startswith(DOC_ASSET_PREFIX):
        found = docs_assets.asset(path[len(DOC_ASSET_PREFIX) :])
        if found is None:
            status, body, ctype = 404, dumps(error_body(NotFound("no such asset"), False)), JSON_TYPE
        else:
            body, ctype = found.body, found.content_type
            headers += [(b"cache-control", docs_assets.CACHE_CONTROL), (b"etag", found.etag)]
            if scope and request_headers(scope).get("if-none-match") == found.etag.decode():
                status, body = 304, b""
    elif path == "/openapi.json":
        body, ctype = openapi_json(), b"application/json"
    else:
        page = openapi.SWAGGER_HTML if path == "/docs" else openapi.REDOC_HTML
        body, ctype = page.encode(), b"text/html; charset=utf-8"
    length = [] if status == 304 else [(b"content-length", str(len(body)).encode())]
    headers = [(b"content-type", ctype), *length, *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
