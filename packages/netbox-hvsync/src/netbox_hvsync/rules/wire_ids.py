"""Resolving a plugin hv endpoint to the backend's id (SPEC 4.5 identity rule 4).

Resolution requires exactly one `(inv:<plugin_pk>)` suffix match and an equal target including port.
A failure names its cause: unregistered, duplicate claim, no resolvable host, target mismatch (with the
actual host), or no usable id. The batch path drops failed endpoints from scope and reports why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .identity import locate_hv_row, row_target
from .records import HvEndpointRecord, identity_suffix


@dataclass(frozen=True)
class WireIdResult:
    backend_id: int | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.backend_id is not None


def _fmt(target: tuple[str, int] | None) -> str:
    if target is None:
        return "no resolvable host"
    host, port = target
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resolve_wire_id(record: HvEndpointRecord, rows: Sequence[Mapping[str, Any]]) -> WireIdResult:
    label = f"hv endpoint {record.pk} ({record.name})"
    suffix = identity_suffix(record.pk)
    lookup = locate_hv_row(record.pk, rows)
    if lookup.status == "unregistered":
        return WireIdResult(None, f"{label}: unregistered, no backend row ends with {suffix}")
    if lookup.status == "duplicate":
        return WireIdResult(None, f"{label}: {len(lookup.matches)} backend rows claim {suffix}")
    row = lookup.row
    assert row is not None
    mine = record.resolved_target()
    if mine is None:
        return WireIdResult(
            None, f"{label}: no resolvable host (domain or IP address plus port) on the plugin record"
        )
    theirs = row_target(row)
    if theirs is None:
        return WireIdResult(None, f"{label}: backend row {suffix} has no resolvable host")
    if theirs != mine:
        return WireIdResult(
            None,
            f"{label}: target mismatch, plugin expects {_fmt(mine)} but the backend row points at {_fmt(theirs)}",
        )
    row_id = row.get("id")
    if not isinstance(row_id, int) or isinstance(row_id, bool) or row_id <= 0:
        return WireIdResult(None, f"{label}: backend row {suffix} has no usable id")
    return WireIdResult(row_id)


@dataclass
class BatchResolution:
    """Plugin pk -> backend id for the endpoints that resolved; `dropped` says why the others did not."""

    scope_map: dict[int, int] = field(default_factory=dict)
    dropped: dict[int, str] = field(default_factory=dict)

    @property
    def backend_ids_csv(self) -> str:
        return ",".join(str(i) for i in sorted(set(self.scope_map.values())))


def resolve_wire_ids(
    records: Sequence[HvEndpointRecord], rows: Sequence[Mapping[str, Any]]
) -> BatchResolution:
    """Batch path: one listing, every endpoint resolved against it; failures drop out of scope."""
    out = BatchResolution()
    for record in records:
        result = resolve_wire_id(record, rows)
        if result.backend_id is not None:
            out.scope_map[record.pk] = result.backend_id
        else:
            out.dropped[record.pk] = result.error
    return out
