"""Server-side credentials for callers that bring none: an API token, or a user whose ticket is renewed.

Proxmox tickets live two hours; we log in lazily on first use, renew after an hour, and log in again
at once when the upstream says the ticket is no longer valid (a restart of the Proxmox VE node, for
example). Secrets are only ever placed in upstream request headers and bodies, never logged.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

import httpx

from pve_emulator.errors import UpstreamError

TICKET_RENEW_AFTER = 3600.0


class Credentials(Protocol):
    async def headers(self, client: httpx.AsyncClient, method: str) -> dict[str, str]: ...
    def invalidate(self) -> None: ...


class TokenCredentials:
    def __init__(self, token_id: str, secret: str) -> None:
        self._header = f"PVEAPIToken={token_id}={secret}"

    async def headers(self, client: httpx.AsyncClient, method: str) -> dict[str, str]:
        return {"authorization": self._header}

    def invalidate(self) -> None:
        """A token cannot be renewed; a 401 is passed on to the caller."""

    def __repr__(self) -> str:
        return "TokenCredentials(***)"


class TicketCredentials:
    def __init__(self, api_base: str, user: str, password: str, timeout: float) -> None:
        self._url = api_base + "/access/ticket"
        self._user = user
        self._password = password
        self._timeout = timeout
        self._ticket: str | None = None
        self._csrf = ""
        self._obtained = 0.0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"TicketCredentials(user={self._user!r}, password=***)"

    async def headers(self, client: httpx.AsyncClient, method: str) -> dict[str, str]:
        if self._ticket is None or time.monotonic() - self._obtained > TICKET_RENEW_AFTER:
            async with self._lock:
                if self._ticket is None or time.monotonic() - self._obtained > TICKET_RENEW_AFTER:
                    await self._login(client)
        headers = {"cookie": f"PVEAuthCookie={self._ticket}"}
        if method not in ("GET", "HEAD"):
            headers["csrfpreventiontoken"] = self._csrf
        return headers

    def invalidate(self) -> None:
        self._ticket = None

    async def _login(self, client: httpx.AsyncClient) -> None:
        try:
            response = await client.post(
                self._url, data={"username": self._user, "password": self._password}, timeout=self._timeout
            )
        except httpx.HTTPError as exc:
            raise UpstreamError(f"login of {self._user} failed: {type(exc).__name__}") from None
        if response.status_code != 200:
            try:  # Proxmox puts its reason in the status line; the emulator also in ``message``
                reason = str(response.json().get("message") or "").strip()
            except (ValueError, AttributeError):
                reason = ""
            raise UpstreamError(
                f"login of {self._user} refused upstream: {response.status_code} "
                f"{reason or response.reason_phrase}"
            )
        try:
            data = response.json()["data"]
            self._ticket, self._csrf = data["ticket"], data["CSRFPreventionToken"]
        except (ValueError, KeyError, TypeError):
            raise UpstreamError(f"login of {self._user}: upstream answer has no ticket") from None
        self._obtained = time.monotonic()
