"""Response checking: does what a Proxmox VE answered match the operation's declared return type?

Real mode runs this on every successful upstream answer to report schema drift (a field of the wrong
type, a missing required property, a value outside its enum). It works on plain decoded JSON and names
only *where* the data differs and *how*, never the value itself, so a drift report cannot leak a ticket
or a secret that happens to sit in a response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pve_emulator.schema import Operation

# Reports stop after this many problems: a list of 1,000 wrongly shaped guests is one kind of drift.
MAX_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class Drift:
    """One place where a response differs from the schema (``where`` is a path like ``data[3].vmid``)."""

    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


def check_response(op: Operation, data: Any, limit: int = MAX_PROBLEMS) -> list[Drift]:
    """List how ``data`` (the value of ``{"data": ...}``) breaks ``op``'s return schema; empty if it fits."""
    checker = _CHECKERS.get(id(op))
    if checker is None:
        checker = _CHECKERS[id(op)] = _compile(op.returns or {})
    found: list[Drift] = []
    checker(data, "data", found, limit)
    return found


Checker = Callable[[Any, str, list[Drift], int], None]
# Compiled per operation on first use: a 1,000-guest list is checked in a few milliseconds.
_CHECKERS: dict[int, Checker] = {}
_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool, int}),  # Proxmox encodes booleans as 0/1
    "array": frozenset({list}),
    "object": frozenset({dict}),
    "null": frozenset({type(None)}),
}
_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def _noop(value: Any, where: str, found: list[Drift], limit: int) -> None:
    return None


def _compile(spec: dict[str, Any]) -> Checker:
    kinds = spec.get("type")
    alternatives = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    if not alternatives or any(k not in _TYPES for k in alternatives):
        allowed: frozenset[type] | None = None  # "any" or a type this checker does not know
    else:
        allowed = frozenset().union(*(_TYPES[k] for k in alternatives))
    expected = "|".join(str(k) for k in alternatives)
    nullable = (
        not alternatives or "null" in alternatives or "any" in alternatives or bool(spec.get("optional"))
    )
    strict_bool = "boolean" in alternatives and "integer" not in alternatives and "number" not in alternatives
    enum = frozenset(str(e) for e in spec["enum"]) if "enum" in spec else None
    items = _compile(spec["items"]) if isinstance(spec.get("items"), dict) else None
    props = spec.get("properties") if isinstance(spec.get("properties"), dict) else None
    fields = (
        [
            (name, _compile(sub), not sub.get("optional") and "default" not in sub)
            for name, sub in props.items()
        ]
        if props
        else []
    )
    declared: frozenset[str] = frozenset(props or ())
    closed = props is not None and spec.get("additionalProperties") == 0
    if allowed is None and enum is None and items is None and not fields and not closed:
        return _noop

    def check(value: Any, where: str, found: list[Drift], limit: int) -> None:
        if len(found) >= limit:
            return
        if value is None:
            if not nullable:
                found.append(Drift(where, f"null where {expected} expected"))
            return
        if allowed is not None:
            kind = type(value)
            if kind not in allowed or (strict_bool and kind is int and value not in (0, 1)):
                found.append(Drift(where, f"{_NAMES.get(kind, kind.__name__)} where {expected} expected"))
                return
        if enum is not None and isinstance(value, (str, int)) and str(value) not in enum:
            found.append(Drift(where, "value outside the declared enumeration"))
        if items is not None and type(value) is list:
            if items is _noop:
                return
            for index, item in enumerate(value):
                items(item, f"{where}[{index}]", found, limit)
                if len(found) >= limit:
                    return
        elif fields and type(value) is dict:
            for name, sub, required in fields:
                if name in value:
                    if sub is not _noop:
                        sub(value[name], f"{where}.{name}", found, limit)
                elif required:
                    found.append(Drift(where, f"required property '{name}' is missing"))
            if closed:
                for name in value:
                    if name not in declared:
                        found.append(Drift(f"{where}.{name}", "property not declared by the schema"))
                        if len(found) >= limit:
                            return

    return check
