"""The write plan: desired objects vs NetBox objects, keyed by Proxmox identity (pure reconcile).

Only the fields hvsync manages are compared, after normalising NetBox's read shapes (nested objects,
choices, tags) to the write shapes a stage produces. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Desired:
    """What NetBox should hold for one Proxmox object. `payload` is in NetBox write shape."""

    key: str
    label: str
    payload: dict[str, Any]
    #: the sync-state sidecar's identity and state fields (besides endpoint and link), for kinds with one
    state: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Current:
    """One managed NetBox object as read (only the fields needed for comparison)."""

    key: str
    id: int
    label: str
    data: Mapping[str, Any]


@dataclass(frozen=True)
class Update:
    key: str
    id: int
    label: str
    changes: dict[str, Any]
    #: the object as read: the dry run's `before`, and the parent of a write NetBox sums into one
    #: (inventory/batching.py)
    current: Mapping[str, Any]

    @property
    def before(self) -> dict[str, Any]:
        """The changed fields as NetBox holds them now (in write shape), for the dry-run plan."""
        return {k: normalise(self.current.get(k)) for k in self.changes}


@dataclass
class Plan:
    create: list[Desired] = field(default_factory=list)
    update: list[Update] = field(default_factory=list)
    unchanged: list[Current] = field(default_factory=list)
    delete: list[Current] = field(default_factory=list)
    orphaned: list[Current] = field(default_factory=list)

    def describe(self, limit: int = 500) -> list[dict[str, Any]]:
        """The dry-run plan as plain dicts (bounded)."""
        rows: list[dict[str, Any]] = []
        rows += [
            {"action": "create", "key": d.key, "object": d.label, "fields": d.payload} for d in self.create
        ]
        rows += [
            {
                "action": "update",
                "key": u.key,
                "object": u.label,
                "id": u.id,
                "changes": u.changes,
                "before": u.before,
            }
            for u in self.update
        ]
        rows += [{"action": "delete", "key": c.key, "object": c.label, "id": c.id} for c in self.delete]
        return rows[:limit]


def normalise(value: Any) -> Any:
    """NetBox read shape -> comparable write shape."""
    if isinstance(value, Mapping):
        if "value" in value and "label" in value:
            return value["value"]
        if "id" in value:
            return value["id"]
        if "slug" in value:
            return value["slug"]
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [normalise(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def tag_slugs(value: Any) -> list[str]:
    """Tags as sorted slugs, from read shape ({id, slug, ...}) or write shape ({slug} or a slug)."""
    return sorted(str(t.get("slug") if isinstance(t, Mapping) else t) for t in value or [])


def diff_fields(desired: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The desired fields whose normalised value differs from NetBox's (custom fields key by key)."""
    changes: dict[str, Any] = {}
    for name, want in desired.items():
        have = current.get(name)
        if name == "tags":
            if tag_slugs(want) != tag_slugs(have):
                changes[name] = want
            continue
        if name == "custom_fields" and isinstance(want, Mapping):
            have_cf = have if isinstance(have, Mapping) else {}
            if any(normalise(v) != normalise(have_cf.get(k)) for k, v in want.items()):
                changes[name] = dict(want)
            continue
        if normalise(want) != normalise(have):
            changes[name] = want
    return changes


def make_plan(
    desired: Mapping[str, Desired], current: Mapping[str, Current], *, delete_missing: bool = False
) -> Plan:
    """Create what is missing, update what differs, keep the rest; delete managed leftovers only on opt-in."""
    plan = Plan()
    for key, want in desired.items():
        have = current.get(key)
        if have is None:
            plan.create.append(want)
            continue
        changes = diff_fields(want.payload, have.data)
        if changes:
            plan.update.append(Update(key, have.id, want.label, changes, have.data))
        else:
            plan.unchanged.append(have)
    for key, have in current.items():
        if key not in desired:
            (plan.delete if delete_missing else plan.orphaned).append(have)
    return plan
