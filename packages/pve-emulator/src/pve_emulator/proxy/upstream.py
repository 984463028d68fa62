"""The connection to the real Proxmox VE: one pooled HTTP client, timeouts, and a careful retry rule.

Retries happen only for idempotent methods. GET and HEAD are retried on any transport failure (refused
or reset connection, timeout); PUT and DELETE only when no connection could be made, so the request
never reached Proxmox; POST is never retried. Failures become ``UpstreamError`` (``pve_emulator.errors``)
with a 502 or 504 and a message that says what happened, never a 500.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any
from urllib.parse import urlencode

import httpx

from pve_emulator.errors import UpstreamError
from pve_emulator.proxy.config import ProxyConfig

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})
SAFE = frozenset({"GET", "HEAD"})
RETRY_BACKOFF = 0.05


def _tls_context(config: ProxyConfig) -> ssl.SSLContext | bool:
    if not config.verify_tls:
        return False
    context = ssl.create_default_context(cafile=str(config.ca_file) if config.ca_file else None)
    return context


class Upstream:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.timeout = httpx.Timeout(
            connect=config.connect_timeout,
            read=config.read_timeout,
            write=config.read_timeout,
            pool=config.connect_timeout,
        )
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """Made on first use, inside the serving event loop (its pool belongs to that loop)."""
        if self._client is None:
            self._client = httpx.AsyncClient(
                verify=_tls_context(self.config),
                timeout=self.timeout,
                limits=httpx.Limits(
                    max_connections=self.config.max_connections,
                    max_keepalive_connections=self.config.max_connections,
                    keepalive_expiry=30,
                ),
                follow_redirects=False,
                trust_env=False,
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: list[tuple[str, str]] | None = None,
        data: list[tuple[str, str]] | None = None,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request to ``/api2/json`` + ``path``, retrying only where that is safe."""
        url = self.config.api_base + path
        content: bytes | None = None
        send_headers = dict(headers or {})
        if json_body is not None:
            content = json.dumps(json_body).encode()
            send_headers["content-type"] = "application/json"
        elif data is not None:
            content = urlencode(data).encode()
            send_headers["content-type"] = "application/x-www-form-urlencoded"
        attempt = 0
        while True:
            try:
                return await self.client.request(
                    method,
                    url,
                    params=urlencode(params) if params else None,
                    content=content,
                    headers=send_headers,
                )
            except httpx.TransportError as exc:
                never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                retryable = method in SAFE or (method in IDEMPOTENT and never_sent)
                if not retryable or attempt >= self.config.retries:
                    raise self._unavailable(exc) from None
                attempt += 1
                await asyncio.sleep(RETRY_BACKOFF * attempt)

    def _unavailable(self, exc: httpx.TransportError) -> UpstreamError:
        where = self.config.upstream
        if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
            return UpstreamError(
                f"upstream {where} did not accept a connection within {self.config.connect_timeout:g} s",
                status=504,
            )
        if isinstance(exc, httpx.TimeoutException):
            return UpstreamError(
                f"upstream {where} did not answer within {self.config.read_timeout:g} s", status=504
            )
        if _is_tls_failure(exc):
            return UpstreamError(
                f"TLS verification of upstream {where} failed (give its CA with --ca-file, "
                "or --no-verify-tls for a test system)"
            )
        if isinstance(exc, httpx.ConnectError):
            return UpstreamError(f"upstream {where} is unreachable (connection failed)")
        return UpstreamError(f"upstream {where} broke the connection ({type(exc).__name__})")


def _is_tls_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
