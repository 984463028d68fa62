"""Assemble the application for a configuration and run it under uvicorn."""

from __future__ import annotations

import socket
from typing import Any

from pve_emulator.app import EmulatorApp
from pve_emulator.config import EmulatorConfig
from pve_emulator.mock.backend import MockBackend
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
    return app


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


def serve(config: EmulatorConfig) -> None:
    import uvicorn

    app = create_app(config)
    uvicorn.Server(uvicorn_config(app, config)).run()
