"""The compiled Proxmox VE API schema: operations, their parameters and a path router built once.

The JSON files beside this module are produced by ``tools/compile_pve_schema.py`` from Proxmox's
``apidoc.js``; they hold facts only (paths, methods, parameter constraints, return types, permissions).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent
RELEASE_FILES: dict[str, str] = {"9.1": "pve-9.1.json", "8.4": "pve-8.4.json"}
DEFAULT_RELEASE = "9.1"

_VAR = re.compile(r"^\{([^}]+)\}$")
_INDEXED = re.compile(r"^(.+)\[n\]$")
#: The index of ``net[n]``-style parameters as Proxmox names them: ``net0`` to ``net31``, ``mp0`` to
#: ``mp255``; ASCII digits, no leading zero, at most three (an index is an int everywhere it is used).
INDEX = "(?:0|[1-9][0-9]{0,2})"


@dataclass(slots=True)
class Operation:
    """One API operation (method + path template) with the facts needed to serve and check it."""

    method: str
    path: str
    name: str
    params: dict[str, dict[str, Any]]
    returns: dict[str, Any]
    permissions: dict[str, Any] | None
    allowtoken: bool
    protected: bool
    additional_params: bool
    path_params: tuple[str, ...]
    indexed_params: tuple[tuple[re.Pattern[str], str], ...] = field(default=())

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    def param_spec(self, name: str) -> dict[str, Any] | None:
        """Schema of a parameter, resolving indexed names such as ``net0`` to ``net[n]`` (the template
        ``net[n]`` itself is not a parameter)."""
        spec = self.params.get(name)
        if spec is not None:
            return None if name.endswith("[n]") else spec
        for pattern, template in self.indexed_params:
            if pattern.fullmatch(name):
                return self.params[template]
        return None


class _Node:
    __slots__ = ("literals", "methods", "var", "var_name")

    def __init__(self) -> None:
        self.literals: dict[str, _Node] = {}
        self.var: _Node | None = None
        self.var_name: str | None = None
        self.methods: dict[str, Operation] = {}


class Router:
    """Path-template router: a segment tree where literal segments win over ``{var}`` segments."""

    def __init__(self, operations: list[Operation]) -> None:
        self.root = _Node()
        for op in operations:
            node = self.root
            for segment in _segments(op.path):
                match = _VAR.match(segment)
                if match:
                    if node.var is None:
                        node.var = _Node()
                        node.var_name = match.group(1)
                    node = node.var
                else:
                    node = node.literals.setdefault(segment, _Node())
            node.methods[op.method] = op

    def match(self, segments: list[str]) -> tuple[dict[str, Operation], dict[str, str]] | None:
        """Find the operations of a concrete path; returns (methods, path variables) or None."""
        found = self._walk(self.root, segments, 0, {})
        if found is None:
            return None
        node, values = found
        return node.methods, values

    def _walk(
        self, node: _Node, segments: list[str], index: int, values: dict[str, str]
    ) -> tuple[_Node, dict[str, str]] | None:
        if index == len(segments):
            return (node, values) if node.methods else None
        segment = segments[index]
        child = node.literals.get(segment)
        if child is not None:
            found = self._walk(child, segments, index + 1, values)
            if found is not None:
                return found
        if node.var is not None and node.var_name is not None:
            found = self._walk(node.var, segments, index + 1, {**values, node.var_name: segment})
            if found is not None:
                return found
            # A trailing variable (volume ids like ``local:backup/x.vma``) may hold unescaped slashes.
            if node.var.methods and not node.var.literals and node.var.var is None:
                return node.var, {**values, node.var_name: "/".join(segments[index:])}
        return None


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s]


@dataclass(slots=True)
class ApiSchema:
    release: str
    source: str
    operations: list[Operation]
    router: Router
    by_key: dict[str, Operation]

    def operation(self, method: str, path: str) -> Operation:
        return self.by_key[f"{method} {path}"]

    def children(self, path: str) -> list[str]:
        """Literal child segment names of a path template (for generic directory indexes)."""
        prefix = path.rstrip("/") + "/"
        names: list[str] = []
        for op in self.operations:
            if op.path.startswith(prefix):
                rest = op.path[len(prefix) :].split("/", 1)[0]
                if rest and not rest.startswith("{") and rest not in names:
                    names.append(rest)
        return names


def _operation(raw: dict[str, Any]) -> Operation:
    params: dict[str, dict[str, Any]] = raw.get("params") or {}
    indexed = []
    for name in params:
        m = _INDEXED.match(name)
        if m:
            indexed.append((re.compile(rf"{re.escape(m.group(1))}{INDEX}"), name))
    return Operation(
        method=raw["method"],
        path=raw["path"],
        name=raw.get("name") or "",
        params=params,
        returns=raw.get("returns") or {},
        permissions=raw.get("permissions"),
        allowtoken=bool(raw.get("allowtoken", 1)),
        protected=bool(raw.get("protected", 0)),
        additional_params=bool(raw.get("additionalParams", 0)),
        path_params=tuple(m.group(1) for s in _segments(raw["path"]) if (m := _VAR.match(s))),
        indexed_params=tuple(indexed),
    )


@cache
def load_schema(release: str = DEFAULT_RELEASE) -> ApiSchema:
    """Load a compiled release once per process."""
    try:
        filename = RELEASE_FILES[release]
    except KeyError:
        raise ValueError(f"unknown API release {release!r}; known: {', '.join(RELEASE_FILES)}") from None
    raw = json.loads((SCHEMA_DIR / filename).read_text(encoding="utf-8"))
    operations = [_operation(op) for op in raw["operations"]]
    return ApiSchema(
        release=raw["release"],
        source=raw.get("source", filename),
        operations=operations,
        router=Router(operations),
        by_key={op.key: op for op in operations},
    )
