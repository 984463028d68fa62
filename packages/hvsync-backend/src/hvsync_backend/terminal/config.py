"""Where the runner connects and with which key: flags, then environment, then a config file.

The key is a secret: it is kept out of `repr`, and no message built here contains it.
"""

from __future__ import annotations

import configparser
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

URL_ENV = "HVSYNC_URL"
KEY_ENV = "HVSYNC_API_KEY"
CONFIG_ENV = "HVSYNC_RUNNER_CONFIG"
#: Table (TOML) or section (INI) the runner reads; a TOML file may also put the keys at the top level.
SECTION = "runner"
DEFAULT_TIMEOUT = 60.0
DEFAULT_REQUEST_TIMEOUT = 1800.0


class ConfigError(Exception):
    """A usage or configuration problem (exit code 2); the message never holds the API key."""


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hvsync" / "runner.toml"


@dataclass(frozen=True)
class RunnerConfig:
    """Everything needed to reach the backend. `verify` is True, False or a CA bundle path."""

    url: str
    api_key: str = field(repr=False)
    verify: bool | str = True
    timeout: float = DEFAULT_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT


def read_file(path: Path) -> dict[str, Any]:
    """The runner's settings from a TOML file (`[runner]` table or top level) or an INI file (`[runner]`,
    chosen by a `.ini`, `.cfg` or `.conf` suffix)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    if path.suffix in (".ini", ".cfg", ".conf"):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text, source=str(path))
        except configparser.Error as exc:
            raise ConfigError(f"config file {path} is not valid INI: {type(exc).__name__}") from None
        return dict(parser[SECTION]) if parser.has_section(SECTION) else {}
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    table = data.get(SECTION, data)
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: [{SECTION}] must be a table")
    return table


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"insecure: expected true or false, got {str(value)[:20]!r}")


def _seconds(name: str, value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected seconds, got {str(value)[:20]!r}") from None
    if not 0 < seconds <= 86_400:
        raise ConfigError(f"{name}: expected 0 < seconds <= 86400")
    return seconds


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"backend URL must be http(s)://host[:port], got {url[:200]!r}")
    if parts.username or parts.password:
        raise ConfigError("backend URL must not carry credentials; give the API key via HVSYNC_API_KEY")
    return url.rstrip("/")


def _check_key(key: str) -> str:
    key = key.strip()
    if not key:
        raise ConfigError(f"no API key: set {KEY_ENV}, api_key in the config file, or --api-key-file")
    if not key.isascii() or not key.isprintable():
        raise ConfigError("the API key holds characters an HTTP header cannot carry")
    return key


def resolve(
    *,
    url: str | None,
    api_key_file: str | None,
    config: str | None,
    ca_bundle: str | None,
    insecure: bool,
    timeout: float | None,
    request_timeout: float | None,
    environ: Mapping[str, str],
) -> RunnerConfig:
    """Flags win over the environment, which wins over the config file (`--config`, else
    $HVSYNC_RUNNER_CONFIG, else ~/.config/hvsync/runner.toml when it exists)."""
    named = config or environ.get(CONFIG_ENV)
    path = Path(named).expanduser() if named else default_config_path()
    file = read_file(path) if named or path.is_file() else {}
    if api_key_file:
        try:
            key = Path(api_key_file).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read API key file {api_key_file}: {exc.strerror or exc}") from None
    else:
        key = environ.get(KEY_ENV) or str(file.get("api_key") or "")
    chosen_url = url or environ.get(URL_ENV) or str(file.get("url") or "")
    if not chosen_url:
        raise ConfigError(f"no backend URL: pass --url, set {URL_ENV}, or url in {path}")
    bundle = ca_bundle or (None if insecure else file.get("ca_bundle"))
    verify: bool | str = True
    if insecure or (not ca_bundle and _flag(file.get("insecure", False))):
        verify = False
    elif bundle:
        if not Path(str(bundle)).expanduser().is_file():
            raise ConfigError(f"CA bundle {bundle} is not a readable file")
        verify = str(Path(str(bundle)).expanduser())
    return RunnerConfig(
        url=_check_url(chosen_url),
        api_key=_check_key(key),
        verify=verify,
        timeout=_seconds("timeout", timeout or file.get("timeout") or DEFAULT_TIMEOUT),
        request_timeout=_seconds(
            "request_timeout", request_timeout or file.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT
        ),
    )
