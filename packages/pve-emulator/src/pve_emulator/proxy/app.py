"""Real mode: the emulator's HTTP surface in front of a real Proxmox VE, validating both ways.

A request is matched against the chosen API release and its parameters validated *before* anything
leaves (400 naming every failing field); it is then forwarded to the same operation under the
upstream's ``/api2/json`` with the caller's own credentials (ticket cookie + CSRF header, or an API
token), or with configured server-side ones if the caller sent none. A successful answer is checked
against the operation's return type: drift is reported in a header and a log line, or (``fail``)
turned into a 502 naming it. Upstream errors keep their status and ``errors`` map.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote, unquote

import httpx

from pve_emulator.errors import ApiError, FieldError, UpstreamError
from pve_emulator.front import Answer, Front, Request
from pve_emulator.proxy.config import DRIFT_FAIL, ProxyConfig
from pve_emulator.proxy.credentials import Credentials, TicketCredentials, TokenCredentials
from pve_emulator.proxy.upstream import Upstream
from pve_emulator.returns import check_response
from pve_emulator.schema import ApiSchema, Operation
from pve_emulator.wire import bare_answer

LOG = logging.getLogger("pve_emulator.proxy")
DRIFT_HEADER = b"x-pve-emulator-drift"
# Caller headers that carry authentication and are passed through unchanged.
PASSED_HEADERS = ("authorization", "cookie", "csrfpreventiontoken")
PASSED_RESPONSE_HEADERS = frozenset({"set-cookie"})


def _wire(value: Any) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)


def server_credentials(config: ProxyConfig) -> Credentials | None:
    if config.token_id is not None and config.token_secret is not None:
        return TokenCredentials(config.token_id, config.token_secret)
    if config.user is not None and config.password is not None:
        return TicketCredentials(config.api_base, config.user, config.password, config.read_timeout)
    return None


class ProxyApp(Front):
    """ASGI application of real mode (one instance per served process)."""

    log = LOG

    def __init__(self, schema: ApiSchema, config: ProxyConfig) -> None:
        super().__init__(schema)
        self.config = config
        self.upstream = Upstream(config)
        self.credentials = server_credentials(config)

    async def shutdown(self) -> None:
        await self.upstream.close()

    def unknown_path(self, path: str, real: bool) -> str:
        return f"no such resource in API release {self.schema.release}: {path}"

    async def answer(self, request: Request) -> Answer:
        """Forward a validated request upstream; check what comes back against the schema."""
        op, real = request.op, request.real
        params, page = await self.read_params(request)
        response = await self._send(op, op.method, request.path, params, request.headers)
        extra = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in response.headers.multi_items()
            if k.lower() in PASSED_RESPONSE_HEADERS
        ]
        body = _decode(response)
        if response.status_code >= 400 or not isinstance(body, dict) or "data" not in body:
            raise _upstream_error(response, body)
        result = body["data"]
        drift = check_response(op, result)
        if drift:
            summary = "; ".join(str(d) for d in drift[:5]) + (
                f"; and {len(drift) - 5} more" if len(drift) > 5 else ""
            )
            LOG.warning("schema drift on %s (release %s): %s", op.key, self.schema.release, summary)
            if self.config.on_drift == DRIFT_FAIL:
                raise UpstreamError(
                    f"upstream response breaks the API schema ({op.key}, release {self.schema.release})",
                    errors=[FieldError(d.where, d.problem) for d in drift],
                )
            extra.append((DRIFT_HEADER, f"{len(drift)} problem(s): {summary}".encode()[:2000]))
        if page is not None and page != (0, None) and isinstance(result, list):
            start, limit = page
            result = result[start : start + limit] if limit is not None else result[start:]
        elif real:
            return 200, response.content, extra  # the upstream's own bytes: nothing to re-encode
        if real:
            return 200, {"data": result}, extra
        status, payload = bare_answer(op, result, params)
        return status, payload, extra

    async def _send(
        self, op: Operation, method: str, path: str, params: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        fields = _fields(op, params)
        outgoing = {name: headers[name] for name in PASSED_HEADERS if headers.get(name)}
        has_own = "authorization" in outgoing or "PVEAuthCookie=" in outgoing.get("cookie", "")
        use_server = self.credentials is not None and not has_own and op.key != "POST /access/ticket"
        quoted = "/" + "/".join(_quote(s) for s in path.split("/") if s)
        for attempt in (0, 1):
            if use_server:
                assert self.credentials is not None
                outgoing.update(await self.credentials.headers(self.upstream.client, method))
            as_json = any(isinstance(v, (dict, list)) and not _is_scalar_list(v) for _, v in fields)
            kwargs: dict[str, Any] = {"headers": outgoing}
            wire = [(k, _wire(x)) for k, v in fields for x in (v if isinstance(v, list) else [v])]
            if method in ("POST", "PUT"):
                if as_json:
                    kwargs["json_body"] = dict(fields)
                else:
                    kwargs["data"] = wire
            else:
                kwargs["params"] = wire
            response = await self.upstream.send(method, quoted, **kwargs)
            if response.status_code == 401 and use_server and attempt == 0 and self.credentials:
                self.credentials.invalidate()  # the ticket expired upstream: log in again once
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover


def _quote(segment: str) -> str:
    return quote(unquote(segment), safe=":@!$&'()*+,;=-._~")


def _is_scalar_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value)


def _fields(op: Operation, params: dict[str, Any]) -> list[tuple[str, Any]]:
    """Validated parameters minus the path variables (those travel in the URL)."""
    return [(k, v) for k, v in params.items() if k not in op.path_params]


def _decode(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _upstream_error(response: httpx.Response, body: Any) -> ApiError:
    """Keep the upstream's status and ``errors`` map; Proxmox puts its message in the reason phrase."""
    status = response.status_code
    if status < 400:
        return UpstreamError(f"upstream answered {status} without a JSON 'data' member")
    message = ""
    errors: list[FieldError] = []
    if isinstance(body, dict):
        message = str(body.get("message") or "").strip()
        if isinstance(body.get("errors"), dict):
            errors = [FieldError(str(k), str(v).strip()) for k, v in body["errors"].items()]
    if not message:
        message = response.reason_phrase or f"upstream error {status}"
    return ApiError(status, message, errors)
