"""How ``hvsync-backend serve`` runs uvicorn: bounded connections, header and keep-alive timeouts.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but has no deadline for a request's
headers: a client that connects and sends nothing, or trickles a header byte now and then, holds its
connection forever, and enough of them fill ``limit_concurrency`` (every new request then gets 503) or the
process's file descriptors. ``HeaderTimeoutProtocol`` closes a connection whose request headers are not
complete ``header_timeout_seconds`` after it opened, or after its previous response ended.

The h11 implementation is used (not httptools) because it is the one whose header-size limit
(``h11_max_incomplete_event_size``) is configurable; the backend's load is a few API calls and streams.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from hvsync_backend.config import Settings


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers (``header_timeout``)."""

    header_timeout: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm_header_deadline(self) -> None:
        handle = getattr(self, "_header_deadline", None)
        if handle is not None:
            handle.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
        if waiting and not self.transport.is_closing():
            self.logger.debug("closing a connection whose request headers did not arrive in time")
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are complete
            self._disarm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_deadline()  # the next request's headers get the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)


def protocol_for(settings: Settings) -> type[HeaderTimeoutProtocol]:
    """The protocol class with this configuration's header deadline."""
    return type(
        "HeaderTimeoutProtocol",
        (HeaderTimeoutProtocol,),
        {"header_timeout": settings.header_timeout_seconds},
    )


def uvicorn_config(app: Any, settings: Settings, host: str, port: int) -> uvicorn.Config:
    """Every limit of docs/backend.md "Limits" that the server (not the app) enforces."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_for(settings),
        log_level=settings.log_level,
        proxy_headers=False,  # client IPs for lockout come from HVSYNC_TRUSTED_PROXIES only
        server_header=False,
        timeout_keep_alive=settings.keep_alive_seconds,
        limit_concurrency=settings.max_connections,
        h11_max_incomplete_event_size=settings.max_header_bytes,
        backlog=min(2048, settings.max_connections * 2),
    )
