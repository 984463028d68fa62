"""Start an emulator for someone's tests: ``with running_emulator() as pve: ...`` (like moto for AWS).

The server runs in a background thread of the calling process on a free loopback port; leaving the
``with`` block stops it and waits for the thread.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
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
    #: the certificate authority that signed this emulator's TLS certificate (None over plain HTTP)
    ca_file: Path | None = None
    #: the control API's secret, when it was started with one (``/_emulator/faults``)
    control_secret: str | None = None

    @property
    def tls_verify(self) -> str | bool:
        """What a client's ``verify`` should be: the CA file over TLS (a real check), True over HTTP."""
        return str(self.ca_file) if self.ca_file is not None else self.verify

    @property
    def faults(self) -> Any:
        """This emulator's faults now (``pve_emulator.mock.faults.Faults.view`` shape)."""
        gate = self.app.fault_gate
        return gate.faults.view() if gate is not None else None

    def set_faults(self, *, replace: bool = False, **settings: Any) -> dict[str, Any]:
        """Change faults in the middle of a test (the marker's keywords: ``node_offline=["pve2"]``, ...);
        the others stay unless ``replace``. No control secret needed: this is the test's own process."""
        from pve_emulator.server import install_faults

        gate = self.app.fault_gate or install_faults(self.app, {}, None)
        return gate.update(settings, replace=replace)  # type: ignore[no-any-return]

    def clear_faults(self) -> None:
        if self.app.fault_gate is not None:
            self.app.fault_gate.clear()

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
    faults: dict[str, Any] | None = None,
    control_secret: str | None = None,
) -> Iterator[EmulatorHandle]:
    """An emulator serving from a thread of this process.

    The response cache is off by default: tests change `handle.state` directly, which does not bump the
    revision the cache is keyed on, so a list read within the same second would still show the old state.
    With ``tls`` the emulator gets a certificate from a CA made for it alone (``handle.ca_file``, in a
    temporary directory removed on exit); ``faults`` start it with faults on demand and ``control_secret``
    serves the control API (``pve_emulator.fault_gate``)."""
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
        faults=dict(faults or {}),
        control_secret=control_secret,
    )
    with ExitStack() as stack:
        if tls:
            from pve_emulator.tls import make_test_pki

            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pve-emulator-tls-")))
            config.ca_file, config.cert = make_test_pki(directory)
            config.key = config.cert
        yield stack.enter_context(_serving(config))


@contextmanager
def _serving(config: EmulatorConfig) -> Iterator[EmulatorHandle]:
    import uvicorn

    from pve_emulator.server import create_app, uvicorn_config

    tls = config.tls
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
            user=config.user,
            password=config.password,
            token_id=config.token_id,
            token_secret=config.token_secret,
            verify=not tls,
            app=app,
            ca_file=config.ca_file,
            control_secret=config.control_secret,
        )
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
