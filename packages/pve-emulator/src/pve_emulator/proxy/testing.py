"""Serve real mode (or any ASGI app) from a thread on a free loopback port, for tests and benchmarks.

``with running_proxy("https://127.0.0.1:8006", ca_file=pem) as url: ...`` gives the proxy's base URL
and stops it when the block ends, like ``pve_emulator.testing.running_emulator`` does for mock mode.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pve_emulator.config import EmulatorConfig


@contextmanager
def serve_in_thread(app: Any, *, cert: Path | None = None) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 (HTTPS if ``cert``, a PEM with its key); yield its URL."""
    import uvicorn

    from pve_emulator.server import uvicorn_config

    listen = EmulatorConfig(host="127.0.0.1", port=0, tls=cert is not None, cert=cert, key=cert)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, listen, sock))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"asgi:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("server did not start")
        time.sleep(0.005)
    try:
        yield f"{'https' if cert else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def running_proxy(upstream: str, *, cert: Path | None = None, **settings: Any) -> Iterator[Any]:
    """Real mode in front of ``upstream``; ``settings`` are ``ProxyConfig`` fields. Yields (url, app)."""
    from pve_emulator.proxy.config import ProxyConfig
    from pve_emulator.proxy.server import create_proxy_app

    app = create_proxy_app(ProxyConfig(upstream=upstream, **settings))
    with serve_in_thread(app, cert=cert) as url:
        yield url, app
