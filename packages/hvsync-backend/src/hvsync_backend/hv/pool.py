"""One long-lived ProxmoxClient per endpoint, rebuilt when the endpoint's connection settings change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from hvsync_backend.endpoints.service import HvTarget
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.hv.wire import DEFAULT_MAX_ANSWER_BYTES
from hvsync_backend.metrics import RequestObserver


class ProxmoxClientPool:
    def __init__(
        self,
        transport_factory: Callable[[HvTarget], httpx.AsyncBaseTransport] | None = None,
        observer: RequestObserver | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        """``transport_factory`` replaces the network (tests, or a custom proxy transport); ``observer``
        is told about every request the clients send (the backend's metrics)."""
        self.transport_factory = transport_factory
        self.observer = observer
        #: Longest Proxmox answer read (bytes); past it a read fails naming the limit.
        self.max_answer_bytes = max_answer_bytes
        self._clients: dict[int, tuple[tuple[object, ...], ProxmoxClient]] = {}
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bind_loop(self) -> None:
        """Clients and locks belong to one event loop; a new loop (tests, restarts) starts a fresh pool."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._lock = asyncio.Lock()
            self._clients = {}

    async def client_for(self, target: HvTarget) -> ProxmoxClient:
        self._bind_loop()
        fingerprint = target.fingerprint()
        async with self._lock:
            cached = self._clients.get(target.id)
            if cached and cached[0] == fingerprint:
                return cached[1]
            transport = self.transport_factory(target) if self.transport_factory else None
            client = ProxmoxClient(
                target, transport=transport, observer=self.observer, max_answer_bytes=self.max_answer_bytes
            )
            self._clients[target.id] = (fingerprint, client)
        if cached:
            await cached[1].aclose()
        return client

    async def forget(self, endpoint_id: int) -> None:
        """Close and drop the endpoint's client (it holds the credentials in memory): a retired endpoint."""
        self._bind_loop()
        async with self._lock:
            cached = self._clients.pop(endpoint_id, None)
        if cached:
            await cached[1].aclose()

    async def aclose(self) -> None:
        self._bind_loop()
        async with self._lock:
            clients = [c for _, c in self._clients.values()]
            self._clients.clear()
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
