"""The NetBox client's network transport: httpx over a connection pool whose every TCP connection goes to
an address `endpoints.hosts` checked.

httpx resolves names inside its connection pool (httpcore), where nothing checks the address. Here the
pool's network backend resolves the name once per connection (`hosts.resolve_checked`), refuses it when
any address is link-local, unspecified or otherwise refused, and connects to a checked address, so DNS
rebinding cannot slip a refused address in between a check and the connection. TLS still verifies the
certificate against the name (httpcore starts TLS with the URL's host as server name).

With HTTPS_PROXY / HTTP_PROXY naming a proxy for NetBox's URL, httpx's own transport is kept (the proxy
resolves the name; the endpoint's text was checked when it was stored).
"""

from __future__ import annotations

import asyncio
import ssl
import typing

import httpcore
import httpx

from hvsync_backend.endpoints import hosts
from hvsync_backend.hv.wire import proxy_for

__all__ = ["CheckedNetworkBackend", "checked_transport"]


class CheckedNetworkBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default backend, dialling only checked addresses of a host."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await asyncio.wait_for(hosts.resolve_checked(host, port), timeout)
        except hosts.HostRefused as exc:
            raise httpcore.ConnectError(f"refused to connect: {exc}") from None
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout}s") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} did not resolve: {exc}") from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # resolve_checked returns at least one address
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not dialled")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport (request and response mapping unchanged) over a pool with the checked backend."""

    def __init__(self, *, verify: bool, limits: httpx.Limits) -> None:
        super().__init__(verify=verify, limits=limits)
        context: ssl.SSLContext = httpx.create_ssl_context(verify=verify)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=CheckedNetworkBackend(),
        )


def checked_transport(url: str, *, verify: bool, limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    """The checked transport for NetBox at `url`, or None (httpx's own) when a proxy serves that URL."""
    if proxy_for(url):
        return None
    return _CheckedTransport(verify=verify, limits=limits)
