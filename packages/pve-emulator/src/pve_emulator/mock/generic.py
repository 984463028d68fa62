"""Schema-driven create/read/update/delete for every operation without a hand-modelled behaviour.

A path is one of three shapes, decided from the schema alone:
  collection  ``/cluster/ha/resources``        (a ``{var}`` child exists): list / create items
  item        ``/cluster/ha/resources/{sid}``  (ends in a variable): read / update / delete one item
  singleton   ``/cluster/options``             (neither): settings object, or an action for POST
Stored data lives in ``state.generic`` keyed by the concrete collection path.
"""

from __future__ import annotations

import re
from typing import Any

from pve_emulator.errors import bad_param, not_found
from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import ClusterState, GuestKind
from pve_emulator.schema import ApiSchema, Operation
from pve_emulator.validation import decimal

_DELETE_SPLIT = re.compile(r"[,;\s]+")
_CONTROL = {"delete", "digest", "lock-token"}
SINGLETON = "."


def concrete(path: str, params: dict[str, Any]) -> str:
    return re.sub(r"\{([^}]+)\}", lambda m: str(params.get(m.group(1), m.group(0))), path)


def check_context(state: ClusterState, op: Operation, params: dict[str, Any]) -> None:
    """404 when a path variable names something the model knows does not exist."""
    path = op.path
    if "node" in params and "{node}" in path and params["node"] not in state.nodes:
        raise not_found(f"node '{params['node']}'")
    if "vmid" in op.path_params:
        kind: GuestKind | None = "qemu" if "/qemu/" in path else "lxc" if "/lxc/" in path else None
        if kind is not None and state.guest(int(params["vmid"]), kind, params.get("node")) is None:
            raise not_found(f"{'VM' if kind == 'qemu' else 'CT'} {params['vmid']}")
    checks = (
        ("storage", state.storages),
        ("userid", state.users),
        ("poolid", state.pools),
        ("vnet", state.sdn_vnets),
        ("zone", state.sdn_zones),
    )
    for name, known in checks:
        if name in op.path_params and params[name] not in known and not op.path.endswith("{" + name + "}"):
            raise not_found(f"{name} '{params[name]}'")


def synthesize(spec: dict[str, Any], depth: int = 0) -> Any:
    """A plausible value for a declared return type (defaults, first enum value, empty containers)."""
    if "default" in spec:
        return spec["default"]
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    if kind == "object":
        props = spec.get("properties") or {}
        if depth > 3:
            return {}
        return {k: synthesize(v, depth + 1) for k, v in props.items() if not v.get("optional")}
    if kind == "array":
        return []
    return {"string": "", "integer": 0, "number": 0.0, "boolean": 0, "null": None}.get(kind or "null")


class GenericHandler:
    def __init__(self, schema: ApiSchema) -> None:
        self.schema = schema
        self._child_var: dict[str, str | None] = {}
        paths = {op.path for op in schema.operations}
        for path in paths:
            child = next(
                (
                    p
                    for p in paths
                    if p.startswith(path.rstrip("/") + "/{")
                    and p.count("/") == path.rstrip("/").count("/") + 1
                ),
                None,
            )
            self._child_var[path] = child.rsplit("{", 1)[1].rstrip("}") if child else None

    def __call__(self, call: Call) -> Any:
        op, state = call.op, call.state
        check_context(state, op, call.params)
        own = {k: v for k, v in call.params.items() if k not in op.path_params}
        if op.path_params and op.path.endswith("}"):
            result = self._item(call, own)
        elif self._child_var.get(op.path):
            result = self._collection(call, own)
        else:
            result = self._singleton(call, own)
        if isinstance(result, list) and ("start" in op.params or "limit" in op.params):
            start = int(own.get("start", 0) or 0)
            limit = own.get("limit")
            result = result[start : start + int(limit)] if limit is not None else result[start:]
        return result

    # -- shapes ---------------------------------------------------------------------------------

    def _collection(self, call: Call, own: dict[str, Any]) -> Any:
        op, state = call.op, call.state
        key = self._child_var[op.path] or "id"
        store = state.generic.setdefault(concrete(op.path, call.params), {})
        if op.method == "GET" and op.returns.get("type") == "object":
            return synthesize(op.returns)
        if op.method == "GET":
            items = [dict(v) for v in store.values()]
            if not items and _is_index(op):
                return self._index(op)
            for name, value in own.items():
                if name in ("limit", "start"):
                    continue
                items = [i for i in items if name not in i or str(i[name]) == str(value)]
            return items
        if op.method == "POST":
            _add_item(store, key, own)
            state.bump()
            return self._result(call)
        if op.method == "PUT":
            return self._singleton(call, own)
        if op.method == "DELETE":
            store.clear()
            state.bump()
        return self._result(call)

    def _item(self, call: Call, own: dict[str, Any]) -> Any:
        op, state = call.op, call.state
        key = op.path_params[-1]
        ident = str(call.params[key])
        parent = op.path[: op.path.rfind("/")]
        store = state.generic.setdefault(concrete(parent, call.params), {})
        child_key = self._child_var.get(op.path)
        lists = op.method == "GET" and op.returns.get("type") == "array"
        if child_key and ident in store and (lists or (op.method == "POST" and _creates(op))):
            return self._nested(call, own, child_key)
        if op.method == "GET" and (_is_index(op) or op.returns.get("type") == "array"):
            return self._index(op) if _is_index(op) else []
        if op.method == "POST" and ident not in store:
            if self._child_var.get(parent) == key and _creates(op):
                store[ident] = {key: _typed_id(ident), **{k: v for k, v in own.items() if k not in _CONTROL}}
                state.bump()
            return self._result(call)
        if ident not in store:
            raise not_found(f"{key} '{ident}'")
        item = store[ident]
        if op.method == "GET":
            return {**synthesize(op.returns), **item} if op.returns.get("type") == "object" else item
        if op.method == "PUT":
            _apply(item, own, call.get("delete"))
            state.bump()
        elif op.method == "DELETE":
            del store[ident]
            state.bump()
        return self._result(call)

    def _singleton(self, call: Call, own: dict[str, Any]) -> Any:
        op, state = call.op, call.state
        path = concrete(op.path, call.params)
        store = state.generic.setdefault(path, {})
        if op.method == "GET":
            if op.returns.get("type") == "array":
                return (
                    self._index(op)
                    if _is_index(op)
                    else list(store.values())
                    if SINGLETON not in store
                    else []
                )
            if op.returns.get("type") == "object":
                return {**synthesize(op.returns), **store.get(SINGLETON, {})}
            return synthesize(op.returns)
        if op.method == "PUT":
            _apply(store.setdefault(SINGLETON, {}), own, call.get("delete"))
            state.bump()
        elif op.method == "DELETE":
            store.pop(SINGLETON, None)
            state.bump()
        return self._result(call)

    def _nested(self, call: Call, own: dict[str, Any], child_key: str) -> Any:
        """An existing item that is itself a collection (a firewall group's rules, an ipset's entries)."""
        op, state = call.op, call.state
        children = state.generic.setdefault(concrete(op.path, call.params), {})
        if op.method == "GET":
            return [dict(v) for v in children.values()]
        _add_item(children, child_key, own)
        state.bump()
        return self._result(call)

    # -- helpers --------------------------------------------------------------------------------

    def _index(self, op: Operation) -> list[dict[str, Any]]:
        items = op.returns.get("items") or {}
        props = items.get("properties") or {}
        link = (op.returns.get("links") or [{}])[0].get("href", "")
        name_key = link.strip("{}") if link.startswith("{") else next(iter(props), "name")
        return [{name_key: child} for child in self.schema.children(op.path)]

    def _result(self, call: Call) -> Any:
        """Non-GET result: a task UPID for operations that return a string on a node, else synthesized."""
        returns = call.op.returns
        if (
            returns.get("type") == "string"
            and "node" in call.params
            and call.params["node"] in call.state.nodes
        ):
            ident = str(
                call.params.get("vmid", call.params.get(call.op.path_params[-1], ""))
                if call.op.path_params
                else ""
            )
            return call.state.add_task(
                call.params["node"], call.op.name or "generic", ident, call.identity.subject
            ).upid
        return synthesize(returns)


def _is_index(op: Operation) -> bool:
    """Directory-style GETs return links to their child paths."""
    if op.method != "GET" or op.returns.get("type") != "array":
        return False
    if op.returns.get("links"):
        return True
    props = (op.returns.get("items") or {}).get("properties") or {}
    return len(props) <= 1 and op.name == "index"


def _creates(op: Operation) -> bool:
    return op.name.startswith(("create", "add", "new"))


def _add_item(store: dict[str, Any], key: str, own: dict[str, Any]) -> None:
    """POST into a collection: the given id (or the next free one), refused when it already exists."""
    ident = str(own.get(key) if own.get(key) is not None else _next_id(store))
    if ident in store:
        raise bad_param(key, f"'{ident}' already exists")
    store[ident] = {key: _typed_id(ident), **{k: v for k, v in own.items() if k not in _CONTROL and k != key}}


def _next_id(store: dict[str, Any]) -> int:
    numeric = [n for n in (decimal(k) for k in store) if n is not None]
    return max(numeric) + 1 if numeric else 0


def _typed_id(ident: str) -> Any:
    number = decimal(ident)
    return ident if number is None else number


def _apply(target: dict[str, Any], own: dict[str, Any], delete: Any) -> None:
    for key in (k for k in _DELETE_SPLIT.split(str(delete or "")) if k):
        target.pop(key, None)
    target.update({k: v for k, v in own.items() if k not in _CONTROL})
