"""Real-mode settings: where the Proxmox VE is, how to reach it, what to do about drift."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DRIFT_WARN = "warn"
DRIFT_FAIL = "fail"
# Environment variables holding server-side secrets (never command-line flags: those show up in ``ps``).
ENV_PASSWORD = "PVE_EMULATOR_UPSTREAM_PASSWORD"
ENV_TOKEN_SECRET = "PVE_EMULATOR_UPSTREAM_TOKEN_SECRET"


@dataclass(slots=True)
class ProxyConfig:
    upstream: str
    release: str = "9.1"
    verify_tls: bool = True
    ca_file: Path | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = 2
    max_connections: int = 64
    on_drift: str = DRIFT_WARN
    # Optional server-side credentials for callers that send none: a token, or a user and password.
    token_id: str | None = None
    token_secret: str | None = None
    user: str | None = None
    password: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("upstream must be an http(s) URL such as https://pve.example:8006")
        if parts.path.rstrip("/") not in ("", "/api2/json"):
            raise ValueError("upstream must name the server only (https://host:8006), not a path")
        self.upstream = f"{parts.scheme}://{parts.netloc}"
        if self.on_drift not in (DRIFT_WARN, DRIFT_FAIL):
            raise ValueError("on_drift must be 'warn' or 'fail'")
        if self.retries < 0:
            raise ValueError("retries must be >= 0")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ValueError("timeouts must be positive")
        if (self.token_id is None) != (self.token_secret is None):
            raise ValueError(f"an upstream token needs both its id and its secret (${ENV_TOKEN_SECRET})")
        if (self.user is None) != (self.password is None):
            raise ValueError(f"an upstream user needs both its name and its password (${ENV_PASSWORD})")
        if self.token_id is not None and self.user is not None:
            raise ValueError("configure either an upstream token or an upstream user, not both")
        if self.token_id is not None and "!" not in self.token_id:
            raise ValueError("upstream token id must look like user@realm!name")
        if self.ca_file is not None and not self.ca_file.is_file():
            raise ValueError(f"CA file not found: {self.ca_file}")

    @property
    def api_base(self) -> str:
        return self.upstream + "/api2/json"
