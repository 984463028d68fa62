"""Change sets: one batch of NetBox writes that the plugin applies in one transaction (the apply path).

The format is `change-set.schema.json` beside this module; the paths a change set may write and its size
limit are read from there, so the schema, the plugin's checks and the backend's builder cannot drift.
Both sides use this module: the plugin parses and checks a body (every error names its field), the
backend builds bodies and reads outcomes. Standard library only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "FORMAT_VERSION",
    "MAX_OPERATIONS",
    "ROUTE",
    "ROWS_ROUTE",
    "WRITABLE_PATHS",
    "ChangeSet",
    "ChangeSetError",
    "Operation",
    "build",
    "error_status",
    "parse",
    "references_in",
    "resolve_references",
]

SCHEMA: Mapping[str, Any] = MappingProxyType(
    json.loads(Path(__file__).with_name("change-set.schema.json").read_text(encoding="utf-8"))
)
FORMAT_VERSION: int = int(SCHEMA["properties"]["version"]["const"])
MAX_OPERATIONS: int = int(SCHEMA["properties"]["operations"]["maxItems"])
WRITABLE_PATHS: frozenset[str] = frozenset(SCHEMA["$defs"]["path"]["enum"])
#: Under /api/: POST applies a change set, GET says what the plugin offers, GET <id>/ reads an outcome back.
ROUTE = "plugins/hvsync/change-sets"
#: Under /api/: GET <ROWS_ROUTE>/<path>/ lists one of the discovery's `read_paths` as flat rows (related
#: objects as {"id", plain fields}, no links), with the REST list's filters, fields, limit and offset.
ROWS_ROUTE = "plugins/hvsync/rows"
OPS = ("create", "update", "delete")
#: Per-object statuses, the first present wins for the batch (as NetBox ranks a failed bulk request):
#: a refusal outranks a conflict with the database, which outranks a missing object or a bad field.
STATUS_RANK = (403, 409, 404, 400)
REF = "$ref"


class ChangeSetError(ValueError):
    """A body that is not a change set; `field` names where (e.g. `operations[3].path`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Operation:
    """One write: `data` may hold `{"$ref": name}` values naming an earlier create's `ref`."""

    index: int
    op: str
    path: str
    data: Mapping[str, Any] = field(default_factory=dict)
    id: int | str | None = None  # an object id, or the name of a reference
    ref: str | None = None


@dataclass(frozen=True)
class ChangeSet:
    id: str
    operations: tuple[Operation, ...]


def _reference(value: Any) -> str | None:
    if isinstance(value, Mapping) and set(value) == {REF} and isinstance(value[REF], str) and value[REF]:
        return str(value[REF])
    return None


def references_in(value: Any) -> list[str]:
    """The reference names a value holds, at any depth."""
    name = _reference(value)
    if name is not None:
        return [name]
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in references_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in references_in(v)]
    return []


def parse(body: Any) -> ChangeSet:
    """A request body as a change set, or `ChangeSetError` naming the first field that is wrong."""
    if not isinstance(body, Mapping):
        raise ChangeSetError("body", "a change set is a JSON object")
    unknown = sorted(set(body) - {"version", "id", "operations"})
    if unknown:
        raise ChangeSetError(unknown[0], "unknown field")
    if body.get("version") != FORMAT_VERSION:
        raise ChangeSetError("version", f"this plugin applies change sets of version {FORMAT_VERSION}")
    try:
        set_id = str(uuid.UUID(str(body.get("id"))))
    except ValueError:
        raise ChangeSetError("id", "must be a UUID chosen by the client") from None
    operations = body.get("operations")
    if not isinstance(operations, list) or not operations:
        raise ChangeSetError("operations", "must be a non-empty list")
    if len(operations) > MAX_OPERATIONS:
        raise ChangeSetError("operations", f"at most {MAX_OPERATIONS} operations per change set")
    refs: set[str] = set()
    parsed = [_operation(i, item, refs) for i, item in enumerate(operations)]
    return ChangeSet(set_id, tuple(parsed))


def _operation(index: int, item: Any, refs: set[str]) -> Operation:
    where = f"operations[{index}]"
    if not isinstance(item, Mapping):
        raise ChangeSetError(where, "an operation is a JSON object")
    op = item.get("op")
    if op not in OPS:
        raise ChangeSetError(f"{where}.op", f"must be one of {', '.join(OPS)}")
    allowed = {"create": {"op", "path", "ref", "data"}, "update": {"op", "path", "id", "data"}}.get(
        op, {"op", "path", "id"}
    )
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise ChangeSetError(f"{where}.{unknown[0]}", f"not a field of a {op}")
    path = item.get("path")
    if path not in WRITABLE_PATHS:
        raise ChangeSetError(f"{where}.path", "not a path hvsync writes (see change-set.schema.json)")
    data = item.get("data", {})
    if op != "delete" and not isinstance(data, Mapping):
        raise ChangeSetError(f"{where}.data", "must be a JSON object")
    for name in references_in(data):
        if name not in refs:
            raise ChangeSetError(f"{where}.data", f"refers to '{name}', which no earlier create names")
    object_id: int | str | None = None
    if op != "create":
        raw = item.get("id")
        referred = _reference(raw)
        if referred is not None:
            if referred not in refs:
                raise ChangeSetError(f"{where}.id", f"refers to '{referred}', which no earlier create names")
            object_id = referred
        elif isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1:
            object_id = raw
        else:
            raise ChangeSetError(f"{where}.id", "must be a positive integer or a reference")
    ref = item.get("ref")
    if ref is not None:
        if not isinstance(ref, str) or not ref or len(ref) > 100:
            raise ChangeSetError(f"{where}.ref", "must be a name of 1 to 100 characters")
        if ref in refs:
            raise ChangeSetError(f"{where}.ref", f"'{ref}' names an earlier create already")
        refs.add(ref)
    return Operation(index, op, path, dict(data) if op != "delete" else {}, object_id, ref)


def resolve_references(value: Any, ids: Mapping[str, int]) -> Any:
    """`value` with every `{"$ref": name}` replaced by the id the named create received."""
    name = _reference(value)
    if name is not None:
        return ids[name]
    if isinstance(value, Mapping):
        return {k: resolve_references(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_references(v, ids) for v in value]
    return value


def error_status(statuses: Sequence[int]) -> int:
    """The HTTP status of a batch that was not applied, from its operations' statuses."""
    return next((s for s in STATUS_RANK if s in statuses), 400)


def build(operations: Sequence[Mapping[str, Any]], set_id: str | None = None) -> dict[str, Any]:
    """A change set body of `operations` (dicts of op, path, data, id, ref) under a new (or given) id."""
    return {"version": FORMAT_VERSION, "id": set_id or str(uuid.uuid4()), "operations": list(operations)}
