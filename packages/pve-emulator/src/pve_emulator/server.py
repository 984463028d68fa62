"""Assemble the application for a configuration and run it under uvicorn."""

from __future__ import annotations

import socket
from typing import Any

from pve_emulator.app import EmulatorApp
from pve_emulator.config import EmulatorConfig
from pve_emulator.fault_gate import FaultGate
from pve_emulator.mock.backend import MockBackend
from pve_emulator.mock.faults import Faults
from pve_emulator.schema import load_schema


def create_app(config: EmulatorConfig) -> EmulatorApp:
    if "!" not in config.token_id:
        raise ValueError("token id must look like user@realm!name")
    schema = load_schema(config.release)
    backend = MockBackend.from_scenario(
        schema,
        config.scenario,
        vms=config.vms,
        nodes=config.nodes,
        user=config.user,
        password=config.password,
        token_id=config.token_id,
        token_secret=config.token_secret,
    )
    backend.state.task_duration = config.task_duration
    app = EmulatorApp(schema, backend, response_cache=config.response_cache)
    app.response_delay = config.response_delay
    app.concurrency = config.concurrency
    if config.faults or config.control_secret is not None:
        install_faults(app, config.faults, config.control_secret)
    return app


def install_faults(app: EmulatorApp, faults: dict[str, Any], secret: str | None) -> FaultGate:
    """Give the app its fault gate (a seed first, so every later draw is repeatable)."""
    gate = FaultGate(Faults(app.backend.state), app.signer, secret)
    if "seed" in faults:
        gate.update({"seed": faults["seed"]})
    gate.update(faults)
    app.fault_gate = gate
    return gate


def uvicorn_config(app: EmulatorApp, config: EmulatorConfig, sock: socket.socket | None = None) -> Any:
    import uvicorn

    ssl: dict[str, Any] = {}
    if config.tls:
        cert, key = config.cert, config.key
        if cert is None or key is None:
            from pve_emulator.tls import ensure_certificate

            cert, key = ensure_certificate()
        ssl = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port if sock is None else 0,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http="httptools",
        loop="uvloop",
        timeout_keep_alive=30,
        server_header=False,
        **ssl,
    )


def serve(config: EmulatorConfig, app: EmulatorApp | None = None) -> None:
    import uvicorn

    app = app or create_app(config)
    uvicorn.Server(uvicorn_config(app, config)).run()
