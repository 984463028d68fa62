"""The `hvsync_key` custom field: the readable mirror of a synced object's Proxmox identity.

The backend writes it on every core object it manages; the plugin reads it back (a VM's VMID when the VM
has no sync-state sidecar). Shapes live in `wire.json` (`hvsync_key.shapes`), e.g. `{endpoint}|vm|{vmid}`,
where `endpoint` is `inv<plugin_pk>` for an endpoint the plugin pushed, else `ep<backend_id>`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from . import DATA

__all__ = ["KEY_FIELD", "SEPARATOR", "SHAPES", "endpoint_identity", "format_key", "parse_key"]

_SPEC = DATA["hvsync_key"]
KEY_FIELD: str = _SPEC["custom_field"]
SEPARATOR: str = _SPEC["separator"]
SHAPES: Mapping[str, str] = MappingProxyType(dict(_SPEC["shapes"]))
_FIELD = re.compile(r"\{(\w+)\}")


def endpoint_identity(*, plugin_pk: int | None = None, backend_id: int | None = None) -> str:
    """`inv<pk>` for an endpoint with the plugin's `(inv:<pk>)` suffix, else `ep<backend id>`."""
    if plugin_pk is not None:
        return str(_SPEC["endpoint"]["plugin"]).format(plugin_pk=plugin_pk)
    if backend_id is None:
        raise ValueError("an endpoint identity needs plugin_pk or backend_id")
    return str(_SPEC["endpoint"]["backend"]).format(backend_id=backend_id)


def format_key(shape: str, **fields: object) -> str:
    """The key of one object, e.g. `format_key("vm", endpoint="inv3", vmid=101)` -> `inv3|vm|101`."""
    return SHAPES[shape].format(**fields)


def _pattern(template: str) -> re.Pattern[str]:
    names = _FIELD.findall(template)
    parts = re.split(r"\{\w+\}", template)
    regex = ""
    for i, literal in enumerate(parts):
        regex += re.escape(literal)
        if i < len(names):
            regex += f"(?P<{names[i]}>[^{re.escape(SEPARATOR)}]+)"
    return re.compile(regex + r"\Z")


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (shape, _pattern(template)) for shape, template in SHAPES.items()
)


def parse_key(key: str) -> tuple[str, dict[str, str]] | None:
    """`(shape, fields)` of a key, or None when it has none of the shapes (a hand-edited value)."""
    for shape, pattern in _PATTERNS:
        match = pattern.match(key)
        if match:
            return shape, match.groupdict()
    return None
