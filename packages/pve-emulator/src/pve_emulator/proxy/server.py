"""Build and serve the real-mode application (same listener options as mock mode: host, port, TLS)."""

from __future__ import annotations

import logging

from pve_emulator.config import EmulatorConfig
from pve_emulator.proxy.app import ProxyApp
from pve_emulator.proxy.config import ProxyConfig
from pve_emulator.schema import load_schema


def create_proxy_app(config: ProxyConfig) -> ProxyApp:
    return ProxyApp(load_schema(config.release), config)


def serve_real(listen: EmulatorConfig, config: ProxyConfig) -> None:
    import uvicorn

    from pve_emulator.server import uvicorn_config

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its request lines would log query strings
    app = create_proxy_app(config)
    uv = uvicorn_config(app, listen)  # type: ignore[arg-type]
    uv.lifespan = "on"  # closes the upstream connection pool on shutdown
    uvicorn.Server(uv).run()
