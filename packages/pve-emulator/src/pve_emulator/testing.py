"""Start an emulator for someone's tests: ``with running_emulator() as pve: ...`` (like moto for AWS).

The server runs in a background thread of the calling process on a free loopback port; leaving the
``with`` block stops it and waits for the thread.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pve_emulator.config import DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET, EmulatorConfig


@dataclass(slots=True)
class EmulatorHandle:
    host: str
    port: int
    scheme: str
    user: str
    password: str
    token_id: str
    token_secret: str
    verify: bool
    app: Any

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return self.url + "/api2/json"

    @property
    def state(self) -> Any:
        """The live mock model (for assertions in tests)."""
        return self.app.backend.state

    @property
    def clock(self) -> Any:
        """The emulator's credential clock: ``pve.clock.advance(7201)`` ages tickets and CSRF tokens
        past their two hours and makes ``expire`` dates pass, without sleeping."""
        return self.app.clock


@contextmanager
def running_emulator(
    scenario: str = "demo",
    vms: int | None = None,
    tls: bool = False,
    user: str = "root@pam",
    password: str = DEFAULT_PASSWORD,
    *,
    nodes: int | None = None,
    token_id: str | None = None,
    token_secret: str = DEFAULT_TOKEN_SECRET,
    task_duration: float = 0.2,
    response_cache: bool = False,
    release: str = "9.1",
    response_delay: float = 0.0,
    concurrency: int | None = None,
) -> Iterator[EmulatorHandle]:
    """An emulator serving from a thread of this process.

    The response cache is off by default: tests change `handle.state` directly, which does not bump the
    revision the cache is keyed on, so a list read within the same second would still show the old state."""
    import uvicorn

    from pve_emulator.server import create_app, uvicorn_config

    if token_id is None:
        token_id = DEFAULT_TOKEN_ID if user == "root@pam" else f"{user}!hvsync"
    config = EmulatorConfig(
        host="127.0.0.1",
        port=0,
        scenario=scenario,
        vms=vms,
        nodes=nodes,
        release=release,
        tls=tls,
        user=user,
        password=password,
        token_id=token_id,
        token_secret=token_secret,
        task_duration=task_duration,
        response_cache=response_cache,
        response_delay=response_delay,
        concurrency=concurrency,
    )
    app = create_app(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, config, sock))
    # uvicorn installs signal handlers only on the main thread, so the test process keeps its own.
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"pve-emulator:{port}", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("pve-emulator did not start")
        time.sleep(0.005)
    try:
        yield EmulatorHandle(
            host="127.0.0.1",
            port=port,
            scheme="https" if tls else "http",
            user=user,
            password=password,
            token_id=token_id,
            token_secret=token_secret,
            verify=not tls,
            app=app,
        )
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
