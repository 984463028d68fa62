"""The apply path as the backend sees it: what the plugin offers, and change sets built from list writes.

When the plugin answers `GET /api/plugins/hvsync/change-sets/` with a format version this backend
speaks, the client sends each batch of a list write as one change set (one transaction inside NetBox)
instead of a REST list request (one transaction per object). What is written, and the per-object results
the stages read, stay the same on both paths. Format: contracts/wire/change-set.schema.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hvsync_backend.wire import change_sets

#: REST method of a list write -> change-set operation
OPERATIONS = {"POST": "create", "PATCH": "update", "DELETE": "delete"}


@dataclass(frozen=True)
class ApplyOffer:
    """What the plugin of this NetBox applies: the paths and the largest change set it takes, and the
    lists it also serves as flat rows (`rows/<path>/`; empty from plugins before the rows route)."""

    paths: frozenset[str]
    max_operations: int
    read_paths: frozenset[str] = frozenset()

    @classmethod
    def from_discovery(cls, body: Any) -> ApplyOffer | None:
        """The offer in a discovery answer, or None when it is off or speaks no version we do."""
        if not isinstance(body, Mapping) or body.get("enabled") is not True:
            return None
        if change_sets.FORMAT_VERSION not in (body.get("versions") or []):
            return None
        paths = frozenset(str(p) for p in body.get("paths") or []) & change_sets.WRITABLE_PATHS
        try:
            largest = int(body.get("max_operations") or 0)
        except (TypeError, ValueError):
            return None
        if not paths or largest < 1:
            return None
        served = body.get("read_paths")
        listed = frozenset(str(p) for p in served) if isinstance(served, list) else frozenset()
        read_paths = listed & change_sets.WRITABLE_PATHS
        return cls(paths, min(largest, change_sets.MAX_OPERATIONS), read_paths)


def change_set(method: str, path: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A REST list write (`POST`/`PATCH`/`DELETE` bodies) as one change set under a new id."""
    op = OPERATIONS[method]
    operations: list[dict[str, Any]] = []
    for item in items:
        if op == "create":
            operations.append({"op": op, "path": path, "data": dict(item)})
        elif op == "update":
            data = {k: v for k, v in item.items() if k != "id"}
            operations.append({"op": op, "path": path, "id": int(item["id"]), "data": data})
        else:
            operations.append({"op": op, "path": path, "id": int(item["id"])})
    return change_sets.build(operations)


def is_outcome(body: Any) -> bool:
    """Whether an answer is a change set's outcome (applied or not), as opposed to some other error."""
    return isinstance(body, Mapping) and isinstance(body.get("applied"), bool) and "results" in body
