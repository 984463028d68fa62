"""A demo emulator answered in-process (httpx's ASGI transport, no server, no port) for fast tests."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from pve_emulator.config import DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET, EmulatorConfig
from pve_emulator.server import create_app

TOKEN = {"Authorization": f"PVEAPIToken={DEFAULT_TOKEN_ID}={DEFAULT_TOKEN_SECRET}"}


class InProcess:
    """A fresh emulator (``EmulatorConfig`` keywords) and a synchronous request helper; ``close()`` it."""

    def __init__(self, **config: Any) -> None:
        self.app = create_app(EmulatorConfig(response_cache=False, **config))
        self.loop = asyncio.new_event_loop()

    @property
    def state(self) -> Any:
        return self.app.backend.state

    @property
    def clock(self) -> Any:
        return self.app.clock

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request with the API token; ``url`` is under ``/api2/json`` unless it starts with ``/api2/``."""
        if not url.startswith("/api2/"):
            url = "/api2/json" + url
        kwargs["headers"] = {**TOKEN, **(kwargs.get("headers") or {})}

        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://pve") as client:
                return await client.request(method, url, **kwargs)

        return self.loop.run_until_complete(go())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def close(self) -> None:
        self.loop.close()
