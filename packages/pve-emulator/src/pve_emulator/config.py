"""Emulator settings and their documented defaults (credentials included: this is a test double)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_USER = "root@pam"
DEFAULT_PASSWORD = "pve-emulator"
DEFAULT_TOKEN_ID = "root@pam!hvsync"
DEFAULT_TOKEN_SECRET = "5f0c8a52-3b1e-4d6f-9a7c-2e8b1d4f6a90"


@dataclass(slots=True)
class EmulatorConfig:
    host: str = "127.0.0.1"
    port: int = 8006
    scenario: str = "demo"
    vms: int | None = None
    nodes: int | None = None
    release: str = "9.1"
    tls: bool = False
    cert: Path | None = None
    key: Path | None = None
    user: str = DEFAULT_USER
    password: str = DEFAULT_PASSWORD
    token_id: str = DEFAULT_TOKEN_ID
    token_secret: str = DEFAULT_TOKEN_SECRET
    task_duration: float = 0.2
    response_cache: bool = True
    #: seconds every API request waits before it is answered (a slow or distant Proxmox; 0: none)
    response_delay: float = 0.0
    #: API requests handled at a time, the others waiting their turn (None: no limit)
    concurrency: int | None = None
    #: faults on demand from the start (``pve_emulator.mock.faults``: the keys of ``FAULT_KEYS``)
    faults: dict[str, Any] = field(default_factory=dict)
    #: secret of the control API ``/_emulator/faults`` (None: no control API, the path is a 404)
    control_secret: str | None = None
    #: a certificate authority file clients verify ``cert`` with (tests' per-emulator CA), if any
    ca_file: Path | None = None
