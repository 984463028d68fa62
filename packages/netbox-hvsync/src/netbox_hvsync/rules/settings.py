"""The plugin's settings (`PLUGINS_CONFIG["netbox_hvsync"]`): names, types, defaults and ranges.

NetBox hands the plugin its settings once, at start-up (`PluginConfig.validate`); a typo or a wrong type
found only when a sync runs would be silently ignored or fail far from its cause. So every setting is
declared here, one line each, and `problems()` names each unknown key and each bad value. Values are
never echoed for text settings (one of them is a key); numbers out of range are shown.

Adding a setting is one line in `SETTINGS`; the PluginConfig's `default_settings` come from it.
"""

from __future__ import annotations

import base64
import binascii
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from .job_timeout import MIN_CONFIGURED_JOB_TIMEOUT

__all__ = ["SETTINGS", "SETTINGS_PATH", "Setting", "defaults", "fernet_key_problem", "problems"]

#: How a message names the plugin's settings, as an operator writes them in configuration.py.
SETTINGS_PATH: Final[str] = 'PLUGINS_CONFIG["netbox_hvsync"]'


def fernet_key_problem(value: object) -> str | None:
    """An `encryption_key` must be empty (derive from SECRET_KEY) or a urlsafe base64 Fernet key of 32
    bytes, decoded as `cryptography.fernet.Fernet` decodes it."""
    if not isinstance(value, str) or value == "":
        return None
    try:
        raw = base64.urlsafe_b64decode(value.encode())
    except (binascii.Error, ValueError):
        return "must be a urlsafe base64 Fernet key (32 bytes), or empty"
    if len(raw) != 32:
        return "must be a urlsafe base64 Fernet key (32 bytes), or empty"
    return None


@dataclass(frozen=True)
class Setting:
    """One setting: its accepted types, default, optional lower bound and value check.

    `nullable`: None is accepted and means "not set" (the plugin decides, e.g. the job timeout rule)."""

    name: str
    types: tuple[type, ...]
    default: object
    minimum: float | None = None
    nullable: bool = False
    check: Callable[[object], str | None] | None = None

    def problem(self, value: object) -> str | None:
        """What is wrong with `value`, in words that name the setting; None when it is fine."""
        where = f'{SETTINGS_PATH}["{self.name}"]'
        if value is None and self.nullable:
            return None
        is_bool = isinstance(value, bool)
        if not isinstance(value, self.types) or (is_bool and bool not in self.types):
            wanted = _wanted(self.types) + (" or None" if self.nullable else "")
            return f"{where} must be {wanted}, got {_type_name(type(value))}"
        if self.minimum is not None and isinstance(value, int | float) and value < self.minimum:
            return f"{where} must be at least {self.minimum:g}, got {value!r}"
        found = self.check(value) if self.check is not None else None
        return f"{where} {found}" if found else None


def _wanted(types: tuple[type, ...]) -> str:
    """`(int, float)` reads "a number"; otherwise each type's name."""
    names = [_type_name(t) for t in types if not (t is int and float in types)]
    return " or ".join(names)


def _type_name(kind: type) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "None"}
    return names.get(kind, kind.__name__)


#: Every setting of the plugin (docs/plugin.md "Settings"), one line each.
SETTINGS: Final[tuple[Setting, ...]] = (
    Setting("encryption_key", (str,), "", check=fernet_key_problem),
    Setting("stream_read_timeout", (int, float), 120, minimum=30),
    Setting("queue", (str,), "netbox_hvsync.sync"),
    Setting("change_sets", (bool,), True),
    Setting("job_timeout", (int,), None, minimum=MIN_CONFIGURED_JOB_TIMEOUT, nullable=True),
    # Deletion requests (docs/plugin-operations.md "Deletion requests"): a pending request older than this
    # many days expires (0: never); a superuser may approve their own request only when this says so.
    Setting("deletion_request_max_age_days", (int,), 30, minimum=0),
    Setting("allow_self_approval", (bool,), False),
)


def defaults() -> dict[str, object]:
    """The PluginConfig's `default_settings`."""
    return {setting.name: setting.default for setting in SETTINGS}


def problems(config: object) -> list[str]:
    """Each unknown key and each bad value of the plugin's settings, one message each (empty: fine)."""
    if not isinstance(config, Mapping):
        return [f"{SETTINGS_PATH} must be a dict, got {_type_name(type(config))}"]
    known = {setting.name: setting for setting in SETTINGS}
    found: list[str] = []
    for key in config:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        found.append(
            f"{SETTINGS_PATH} has an unknown setting {str(key)!r}{hint}; known settings: {', '.join(sorted(known))}"
        )
    for name, setting in known.items():
        if name in config:
            problem = setting.problem(config[name])
            if problem:
                found.append(problem)
    return found
