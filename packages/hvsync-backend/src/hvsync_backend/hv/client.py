"""Async Proxmox VE client built from a stored hv endpoint (:class:`HvTarget`).

- Auth: API token (``PVEAPIToken=<user>!<tokenid>=<secret>``) or ticket login (``POST /access/ticket``),
  in the endpoint's ``access_methods`` order; a 401 falls through to the next method. Tickets are cached
  and renewed before Proxmox's two-hour expiry, or at once when Proxmox answers 401.
- One keep-alive connection pool per endpoint (hv/wire.py: aiohttp, or a given httpx transport); every
  request has the endpoint's timeout.
- GETs are retried ``max_retries`` times on transport errors and 5xx, sleeping ``retry_backoff * 2**n``;
  writes are never retried.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from hvsync_backend.endpoints.service import HvTarget
from hvsync_backend.hv.errors import (
    ProxmoxAuthError,
    ProxmoxHTTPError,
    ProxmoxNotConfigured,
    ProxmoxUnreachable,
)
from hvsync_backend.hv.wire import DEFAULT_MAX_ANSWER_BYTES, Answer, AnswerTooLarge, SendFailed, open_wire
from hvsync_backend.metrics import RequestObserver, observed
from hvsync_backend.wire.redaction import redact, sweep_text

TICKET_LIFETIME = 2 * 3600.0
TICKET_RENEW_AFTER = TICKET_LIFETIME - 15 * 60
_MAX_DETAIL = 300


class ProxmoxClient:
    def __init__(
        self,
        target: HvTarget,
        transport: httpx.AsyncBaseTransport | None = None,
        observer: RequestObserver | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.target = target
        self._observer = observer
        self._wire = open_wire(
            target.api_url,
            verify=target.verify_ssl,
            timeout=target.timeout,
            headers={"Accept": "application/json", "User-Agent": "hvsync-backend"},
            transport=transport,
            max_bytes=max_answer_bytes,
        )
        self._methods = self._usable_methods()
        self._method_index = 0
        self._ticket: tuple[str, str, float] | None = None  # (ticket, csrf, obtained_at monotonic)
        self._login_lock = asyncio.Lock()

    # --- public API ------------------------------------------------------------------------------------
    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET ``path`` (relative to ``/api2/json``) and return the unwrapped ``data``."""
        return await self._call("GET", path, params=params, retries=self.target.max_retries)

    async def post(self, path: str, data: dict[str, Any] | None = None) -> Any:
        return await self._call("POST", path, data=data, retries=0)

    async def put(self, path: str, data: dict[str, Any] | None = None) -> Any:
        return await self._call("PUT", path, data=data, retries=0)

    async def delete(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return await self._call("DELETE", path, params=params, retries=0)

    async def aclose(self) -> None:
        await self._wire.aclose()

    async def __aenter__(self) -> ProxmoxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- internals -------------------------------------------------------------------------------------
    def _usable_methods(self) -> list[str]:
        t = self.target
        usable = []
        for method in t.access_methods:
            if (method == "token" and t.username and t.token_name and t.token_value) or (
                method == "password" and t.username and t.password
            ):
                usable.append(method)
        return usable

    def _scrub(self, text: str) -> str:
        secrets = (self.target.password, self.target.token_value, self._ticket[0] if self._ticket else None)
        return sweep_text(text, [s for s in secrets if s])[:_MAX_DETAIL]

    async def _auth_headers(self, method: str, write: bool) -> dict[str, str]:
        t = self.target
        if method == "token":
            return {"Authorization": f"PVEAPIToken={t.username}!{t.token_name}={t.token_value}"}
        ticket, csrf = await self._login()
        headers = {"Cookie": f"PVEAuthCookie={ticket}"}
        if write:
            headers["CSRFPreventionToken"] = csrf
        return headers

    async def _login(self, force: bool = False) -> tuple[str, str]:
        async with self._login_lock:
            if self._ticket and not force and time.monotonic() - self._ticket[2] < TICKET_RENEW_AFTER:
                return self._ticket[0], self._ticket[1]
            data = {"username": self.target.username, "password": self.target.password or ""}
            response = await self._send("POST", "/access/ticket", data=data, headers={}, retries=0)
            if response.status_code in (401, 403):
                raise ProxmoxAuthError(
                    self.target.label, "ticket login refused (check username/password)", 401
                )
            body = self._unwrap(response)
            try:
                ticket, csrf = str(body["ticket"]), str(body["CSRFPreventionToken"])
            except (KeyError, TypeError):
                raise ProxmoxHTTPError(
                    self.target.label, "ticket login returned no ticket", response.status_code
                ) from None
            self._ticket = (ticket, csrf, time.monotonic())
            return ticket, csrf

    async def _call(
        self,
        http_method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        retries: int,
    ) -> Any:
        if not self._methods:
            raise ProxmoxNotConfigured(
                self.target.label,
                f"no usable credentials for access methods {list(self.target.access_methods)} "
                "(token needs username, token_name and token_value; password needs username and password)",
            )
        write = http_method != "GET"
        relogged = False
        while True:
            method = self._methods[self._method_index]
            headers = await self._auth_headers(method, write)
            response = await self._send(
                http_method, path, params=params, data=data, headers=headers, retries=retries
            )
            if response.status_code == 401:
                if method == "password" and not relogged:
                    relogged = True
                    await self._login(force=True)
                    continue
                if self._method_index + 1 < len(self._methods):
                    self._method_index += 1
                    relogged = False
                    continue
                self._method_index = 0
                raise ProxmoxAuthError(self.target.label, f"authentication refused ({method} auth)", 401)
            return self._unwrap(response)

    async def _send(
        self,
        http_method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        headers: dict[str, str],
        retries: int,
    ) -> Answer:
        url = path if path.startswith("/") else f"/{path}"
        attempt = 0
        while True:
            try:
                response = await observed(
                    self._observer,
                    http_method,
                    self._wire.send(http_method, url, params=params, form=data, headers=headers),
                )
            except AnswerTooLarge as exc:
                raise ProxmoxHTTPError(self.target.label, f"{http_method} {url}: {exc}") from None
            except SendFailed as exc:
                if exc.refused:  # nothing was sent; the address will not change by asking again
                    raise ProxmoxUnreachable(
                        self.target.label, f"refused to connect: {self._scrub(str(exc))}"
                    ) from None
                if attempt < retries:
                    await self._backoff(attempt)
                    attempt += 1
                    continue
                kind = "timed out" if exc.timed_out else "unreachable"
                detail = self._scrub(str(exc)) or exc.kind
                raise ProxmoxUnreachable(
                    self.target.label, f"{kind} after {attempt + 1} attempt(s): {exc.kind}: {detail}"
                ) from None
            if response.status_code >= 500 and attempt < retries:
                await self._backoff(attempt)
                attempt += 1
                continue
            return response

    async def _backoff(self, attempt: int) -> None:
        delay = self.target.retry_backoff * (2**attempt)
        if delay > 0:
            await asyncio.sleep(delay)

    def _unwrap(self, response: Answer) -> Any:
        status = response.status_code
        if status >= 400:
            reason = response.reason_phrase or ""
            detail = ""
            try:
                body = response.json()
                if isinstance(body, dict):
                    # Structured first (credential-named keys), then the text sweep in `_scrub`.
                    found = body.get("errors") or body.get("message") or body.get("detail") or ""
                    detail = str(redact(found))
            except ValueError:
                detail = ""
            message = f"HTTP {status} {reason}".strip() + (f": {detail}" if detail else "")
            if status in (401, 403):
                raise ProxmoxAuthError(self.target.label, self._scrub(message), status)
            raise ProxmoxHTTPError(self.target.label, self._scrub(message), status)
        try:
            body = response.json()
        except ValueError:
            raise ProxmoxHTTPError(
                self.target.label, f"HTTP {status}: response is not JSON", status
            ) from None
        if not isinstance(body, dict) or "data" not in body:
            raise ProxmoxHTTPError(self.target.label, f"HTTP {status}: response has no 'data' member", status)
        return body["data"]
