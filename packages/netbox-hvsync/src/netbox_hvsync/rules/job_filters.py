"""Sync-job filter predicates over a core Job's `data` (SPEC 4.4 "Sync-job filter rules" 1-5).

The sync block lives under `data["sync"]` (older rows may carry it flat in `data`):
`sync_types` (or the legacy singular `sync_type`), `hv_endpoint_ids`, `vm_ids`, `run_id`,
`batch_object_type`, `errors`, `stages`. The NetBox glue may translate these predicates into database
lookups; these functions are the reference the glue's tests compare against.

What runs in production is the SQL in `netbox_hvsync.querysets`: each of its `Q` builders has the
name of the predicate here that it mirrors (`matches_sync_type`, `matches_hv_endpoint`, `matches_vm`,
`matches_value`, `is_errored`), and `tests/netbox/test_sync_job_filter_parity.py` runs both over the same
rows. Object permissions (rule 5) come from NetBox's `restrict()` before any of these filters.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..wire.numbers import decimal

ALL = "all"
FAILED_STATUSES = frozenset({"failed", "errored"})


def sync_block(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The recorded parameters of a run: `data["sync"]`, or `data` itself for flat legacy rows."""
    if not isinstance(data, Mapping):
        return {}
    block = data.get("sync")
    return block if isinstance(block, Mapping) else data


def recorded_sync_types(data: Mapping[str, Any] | None) -> list[str] | None:
    """The run's sync types; None means `all` (absent, empty, or containing `all`). Rule 2."""
    block = sync_block(data)
    types = block.get("sync_types")
    if types is None and "sync_type" in block:  # legacy singular key of old rows
        types = [block.get("sync_type")]
    if isinstance(types, str):
        types = [types]
    if not isinstance(types, list | tuple):
        return None
    names = [str(t) for t in types if t not in (None, "")]
    if not names or ALL in names:
        return None
    return names


def matches_sync_type(data: Mapping[str, Any] | None, wanted: Collection[str]) -> bool:
    """Runs that included the stage; a run recorded with `all` or no types matches every sync_type."""
    if not wanted:
        return True
    types = recorded_sync_types(data)
    return types is None or any(t in types for t in wanted)


def _int_list(value: object) -> list[int] | None:
    """An id list, or None for absent / null; strings of digits are accepted, junk is ignored."""
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        value = [value]
    out: list[int] = []
    for item in value:
        number = decimal(item)
        if number is not None:
            out.append(number)
    return out


def recorded_endpoints(data: Mapping[str, Any] | None) -> list[int] | None:
    """None means every endpoint: an empty list, an absent key or null (rule 1)."""
    raw = sync_block(data).get("hv_endpoint_ids")
    if raw is None or raw == [] or raw == "":
        return None
    return _int_list(raw) or []  # a non-empty list of junk names no endpoint: it is not a wildcard


def matches_hv_endpoint(data: Mapping[str, Any] | None, wanted: Collection[int]) -> bool:
    if not wanted:
        return True
    ids = recorded_endpoints(data)
    return ids is None or any(i in ids for i in wanted)


def matches_through_endpoint(
    data: Mapping[str, Any] | None, wanted: Collection[int], endpoint_of: Callable[[int], int | None]
) -> bool:
    """`cluster_id` / `node_id`: the object is resolved through its endpoint. A run for every endpoint
    matches any; otherwise the object's endpoint must be in the run's list (unresolvable never is)."""
    if not wanted:
        return True
    ids = recorded_endpoints(data)
    if ids is None:
        return True
    return any((ep := endpoint_of(obj)) is not None and ep in ids for obj in wanted)


def matches_vm(data: Mapping[str, Any] | None, wanted: Collection[int]) -> bool:
    """Rule 3: an empty VM list is not a wildcard; it never matches `inventory_vm_id`."""
    if not wanted:
        return True
    ids = _int_list(sync_block(data).get("vm_ids")) or []
    return any(i in ids for i in wanted)


def matches_value(data: Mapping[str, Any] | None, key: str, wanted: Collection[str]) -> bool:
    """`run_id` / `batch_object_type`: the recorded parameter equals one of the wanted values."""
    if not wanted:
        return True
    value = sync_block(data).get(key)
    return value is not None and str(value) in {str(w) for w in wanted}


def recorded_error(data: Mapping[str, Any] | None) -> bool:
    """A run that finished while recording an error: sync errors, a failed stage, or a stage error."""
    block = sync_block(data)
    if block.get("errors") or block.get("error"):
        return True
    stages = block.get("stages")
    if isinstance(stages, Mapping):
        stages = list(stages.values())
    if isinstance(stages, list):
        for stage in stages:
            if isinstance(stage, Mapping) and (
                stage.get("ok") is False or stage.get("error") or stage.get("errors")
            ):
                return True
    return False


def is_errored(status: str | None, data: Mapping[str, Any] | None) -> bool:
    """Rule 4: `errored` is broader than a failed status."""
    return (status or "").lower() in FAILED_STATUSES or recorded_error(data)


@dataclass(frozen=True)
class SyncJobCriteria:
    """The plugin-specific sync-job filters (empty = not filtering on it)."""

    sync_type: tuple[str, ...] = ()
    hv_endpoint_id: tuple[int, ...] = ()
    cluster_id: tuple[int, ...] = ()
    node_id: tuple[int, ...] = ()
    inventory_vm_id: tuple[int, ...] = ()
    run_id: tuple[str, ...] = ()
    batch_object_type: tuple[str, ...] = ()
    errored: bool | None = None


@dataclass(frozen=True)
class EndpointResolvers:
    cluster_endpoint: Callable[[int], int | None] = field(default=lambda _pk: None)
    node_endpoint: Callable[[int], int | None] = field(default=lambda _pk: None)


def job_matches(
    status: str | None,
    data: Mapping[str, Any] | None,
    criteria: SyncJobCriteria,
    resolvers: EndpointResolvers | None = None,
) -> bool:
    resolvers = resolvers or EndpointResolvers()
    if criteria.errored is not None and is_errored(status, data) is not criteria.errored:
        return False
    return (
        matches_sync_type(data, criteria.sync_type)
        and matches_hv_endpoint(data, criteria.hv_endpoint_id)
        and matches_through_endpoint(data, criteria.cluster_id, resolvers.cluster_endpoint)
        and matches_through_endpoint(data, criteria.node_id, resolvers.node_endpoint)
        and matches_vm(data, criteria.inventory_vm_id)
        and matches_value(data, "run_id", criteria.run_id)
        and matches_value(data, "batch_object_type", criteria.batch_object_type)
    )
