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

__all__ = [
    "KEY_FIELD",
    "RECORD_SHAPES",
    "SEPARATOR",
    "SHAPES",
    "child_key",
    "endpoint_identity",
    "endpoint_of",
    "format_key",
    "parse_key",
]

_SPEC = DATA["hvsync_key"]
KEY_FIELD: str = _SPEC["custom_field"]
SEPARATOR: str = _SPEC["separator"]
SHAPES: Mapping[str, str] = MappingProxyType(dict(_SPEC["shapes"]))
_FIELD = re.compile(r"\{(\w+)\}")
#: Keys of the plugin's own records (its clusters, nodes, storages, backups, tasks, snapshots and jobs),
#: spelled like the `hvsync_key` shapes: the backend matches those records by them. They are never an
#: `hvsync_key` value, so `parse_key` does not know them.
RECORD_SHAPES: Mapping[str, str] = MappingProxyType(
    {
        "hv_cluster": "{endpoint}|hvcluster",
        "hv_node": "{endpoint}|hvnode|{node}",
        "hv_storage": "{endpoint}|storage|{storage}",
        "backup": "{endpoint}|storage|{storage}|backup|{volid}",
        "task": "{endpoint}|task|{upid}",
        "snapshot": "{endpoint}|vm|{vmid}|snap|{name}",
        "backup_routine": "{endpoint}|backup-routine|{id}",
        "replication": "{endpoint}|replication|{id}",
    }
)
#: The shape whose key leads each nested shape (`child_key`).
_PARENTS: Mapping[str, str] = MappingProxyType(
    {
        "node_interface": "node",
        "vm_interface": "vm",
        "vm_disk": "vm",
        "backup": "hv_storage",
        "snapshot": "vm",
    }
)


def endpoint_identity(*, plugin_pk: int | None = None, backend_id: int | None = None) -> str:
    """`inv<pk>` for an endpoint with the plugin's `(inv:<pk>)` suffix, else `ep<backend id>`."""
    if plugin_pk is not None:
        return str(_SPEC["endpoint"]["plugin"]).format(plugin_pk=plugin_pk)
    if backend_id is None:
        raise ValueError("an endpoint identity needs plugin_pk or backend_id")
    return str(_SPEC["endpoint"]["backend"]).format(backend_id=backend_id)


def _template(shape: str) -> str:
    return SHAPES[shape] if shape in SHAPES else RECORD_SHAPES[shape]


def format_key(shape: str, **fields: object) -> str:
    """The key of one object, e.g. `format_key("vm", endpoint="inv3", vmid=101)` -> `inv3|vm|101`
    (a shape of `SHAPES` or `RECORD_SHAPES`)."""
    return _template(shape).format(**fields)


def child_key(parent: str, shape: str, **fields: object) -> str:
    """The key of a nested object from its parent's key, e.g. `child_key("ep1|vm|100", "snapshot",
    name="pre")` -> `ep1|vm|100|snap|pre`: `parent` stands for the fields the parent's shape holds."""
    template = _template(shape)
    return parent + template[len(_template(_PARENTS[shape])) :].format(**fields)


def endpoint_of(key: str) -> str:
    """The endpoint identity a key starts with (`inv3` of `inv3|vm|101`)."""
    return key.split(SEPARATOR, 1)[0]


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
