"""Service configuration: environment variables (prefix ``HVSYNC_``) over an optional TOML file.

Precedence, highest first: constructor arguments, environment, the TOML file named by
``HVSYNC_CONFIG_FILE``, defaults. Nothing here holds API keys: keys live only in the database.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

CONFIG_FILE_ENV = "HVSYNC_CONFIG_FILE"


def _default_data_dir() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "hvsync"


class _TomlFileSource(PydanticBaseSettingsSource):
    """Reads the ``[backend]`` table (or the top level) of the TOML file named by HVSYNC_CONFIG_FILE."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self._values: dict[str, Any] = {}
        if path is not None:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
            table = data.get("backend", data)
            self._values = {str(k).lower(): v for k, v in table.items()}

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._values.items() if k in self.settings_cls.model_fields}


class Settings(BaseSettings):
    """Everything the backend reads at start. See docs/backend.md for the table of variables."""

    model_config = SettingsConfigDict(env_prefix="HVSYNC_", extra="ignore", populate_by_name=True)

    data_dir: Path = Field(default_factory=_default_data_dir)
    database_url: str | None = None
    encryption_key: SecretStr | None = None
    encryption_key_file: Path | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8800, ge=1, le=65535)
    # comma-separated in the environment (NoDecode: not parsed as JSON first), a list or a string in TOML
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    lockout_threshold: int = Field(default=5, ge=1)
    lockout_seconds: float = Field(default=300.0, gt=0)
    # Failures age out of this sliding window (per IP and for the global budget); threshold failures
    # within it lock the IP for lockout_seconds.
    lockout_window_seconds: float = Field(default=300.0, gt=0)
    # Failed authentications from all addresses together within the window; once spent, no key is
    # bcrypt-checked (429) until the oldest failure ages out. Keys already verified still work.
    lockout_global_budget: int = Field(default=50, ge=1)
    bcrypt_rounds: int = Field(default=12, ge=4, le=16)
    # How long a cached verification is trusted before the key's row is re-read. Changes made through
    # this process's API apply at once regardless; this bounds how late a change made by another process
    # (the CLI, a second worker) is seen. 0 (the default) = read the row on every request (one primary-key
    # lookup), so a revoked key stops everywhere at once.
    key_recheck_seconds: float = Field(default=0.0, ge=0, le=60)
    # bcrypt checks run at once per process; more wait (up to 10 s, then 503 with Retry-After), so a flood
    # of wrong keys cannot take every core. Concurrent checks of one presented key share one result.
    bcrypt_slots: int = Field(default=2, ge=1, le=64)
    # GET /metrics needs the API key like every route unless the operator opens it (for a Prometheus
    # that cannot send headers, on a network where the counters are not sensitive).
    metrics_public: bool = False
    # Write through the plugin's apply path (change sets, one transaction per batch) when NetBox offers
    # it; false: REST list writes only (docs/apply-path.md).
    netbox_apply_path: bool = True
    # --- upstream answer caps (docs/backend.md "Answer size caps"; engineer secrets-backend) ---
    # Longest answer read from NetBox / from Proxmox, in bytes: reading stops there and the request
    # fails naming the limit. A 1,000-guest cluster's largest answers are a few MiB.
    netbox_max_answer_bytes: int = Field(default=32 * 1024 * 1024, ge=1_048_576, le=1_073_741_824)
    proxmox_max_answer_bytes: int = Field(default=32 * 1024 * 1024, ge=1_048_576, le=1_073_741_824)
    # A sync job's stage streams share their Proxmox answers and NetBox lists (sync/job_reads.py), kept
    # this long after the job's last stream (0: a stream shares nothing with the job's next one) and for
    # at most this many jobs (running ones never dropped): memory (about 24 MiB per 1,000 guests and job,
    # measured) against reads.
    job_reads_keep_seconds: float = Field(default=60.0, ge=0, le=3600)
    job_reads_max_jobs: int = Field(default=4, ge=1, le=64)
    log_level: str = "info"
    # --- limits against hostile load (docs/backend.md "Limits") ---
    # Request bodies above this are refused with 413 before they are read whole (every real body is a
    # few KiB: endpoint records, a key label).
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=1_073_741_824)
    # Stage runs (streams, the full update) running at once; one more is refused with 503 naming it.
    max_concurrent_runs: int = Field(default=8, ge=1, le=256)
    # `serve`: seconds a connection may take to send a request's headers (from connect, or from the end
    # of the previous response) before it is closed; idle keep-alive connections close after
    # keep_alive_seconds; at most max_connections connections and requests at once (more get 503);
    # header block at most max_header_bytes.
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    keep_alive_seconds: int = Field(default=5, ge=1, le=300)
    max_connections: int = Field(default=512, ge=8, le=65536)
    max_header_bytes: int = Field(default=65536, ge=4096, le=1_048_576)

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_proxies(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_network(item, strict=False)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = os.environ.get(CONFIG_FILE_ENV)
        toml = _TomlFileSource(settings_cls, Path(path) if path else None)
        return (init_settings, env_settings, toml)

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL; a SQLite file inside the data directory unless configured."""
        if self.database_url:
            # Plain postgresql:// (or postgres://) would pick psycopg2, which is not installed: use psycopg 3.
            for prefix in ("postgresql://", "postgres://"):
                if self.database_url.startswith(prefix):
                    return "postgresql+psycopg://" + self.database_url[len(prefix) :]
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'hvsync.db').resolve()}"

    @property
    def resolved_key_file(self) -> Path:
        return self.encryption_key_file or (self.data_dir / "fernet.key")

    @cached_property
    def proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(item, strict=False) for item in self.trusted_proxies)
