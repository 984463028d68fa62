"""Identity and currency of backend rows (SPEC 4.5 "Identity and currency rules (fail closed)").

Identity answers "does this backend row point at our system?"; currency answers "does it still carry
our policy?". Both fail closed: an unparseable or absent value never counts as a match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .records import HvEndpointRecord, InventoryEndpointRecord, identity_suffix
from .urls import resolve_target

_MISSING = object()

#: Hv policy keys compared for currency; site and tenant metadata are deliberately absent.
HV_POLICY_KEYS = (
    "enabled",
    "allow_template_builds",
    "username",
    "access_methods",
    "verify_ssl",
    "timeout",
    "max_retries",
    "retry_backoff",
)


def row_target(row: Mapping[str, Any]) -> tuple[str, int] | None:
    """Resolved (host, port) of a backend row: domain, else ip_address, plus port."""
    return resolve_target(row.get("domain"), row.get("ip_address"), row.get("port"))


def inventory_row_is_ours(record: InventoryEndpointRecord, row: Mapping[str, Any]) -> bool:
    """Rule 1: equal resolved target on both sides; both must resolve a host and a parseable port."""
    mine = record.resolved_target()
    theirs = row_target(row)
    return mine is not None and theirs is not None and mine == theirs


def _same_int(left: object, right: object) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return False
    return isinstance(left, int) and isinstance(right, int) and left == right


def inventory_row_drift(record: InventoryEndpointRecord, row: Mapping[str, Any]) -> list[str]:
    """Rule 2: fields on which the row is not current; an absent value counts as drifted."""
    drift: list[str] = []
    if row.get("verify_ssl", _MISSING) is not record.verify_ssl:
        drift.append("verify_ssl")
    if not _same_int(row.get("token_version", _MISSING), record.token_version):
        drift.append("token_version")
    if row.get("scheme", _MISSING) != record.scheme:  # C1: a row dialling another scheme is not current
        drift.append("scheme")
    return drift


def inventory_row_is_current(record: InventoryEndpointRecord, row: Mapping[str, Any]) -> bool:
    """`name` is never compared (SPEC 4.5 rule 2)."""
    return not inventory_row_drift(record, row)


def rows_with_suffix(plugin_pk: int, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows whose name ends with exactly `(inv:<plugin_pk>)`."""
    suffix = identity_suffix(plugin_pk)
    return [row for row in rows if isinstance(row.get("name"), str) and row["name"].endswith(suffix)]


@dataclass(frozen=True)
class HvRowLookup:
    """Rule 3: `found` carries the single row; `unregistered` and `duplicate` fail closed."""

    status: str  # "found" | "unregistered" | "duplicate"
    row: Mapping[str, Any] | None
    matches: tuple[Mapping[str, Any], ...]


def locate_hv_row(plugin_pk: int, rows: Sequence[Mapping[str, Any]]) -> HvRowLookup:
    matches = tuple(rows_with_suffix(plugin_pk, rows))
    if not matches:
        return HvRowLookup("unregistered", None, matches)
    if len(matches) > 1:
        return HvRowLookup("duplicate", None, matches)
    return HvRowLookup("found", matches[0], matches)


def _policy_equal(key: str, mine: object, theirs: object) -> bool:
    if theirs is _MISSING or theirs is None:
        return False
    if key in ("enabled", "allow_template_builds", "verify_ssl"):
        return theirs is mine
    if key in ("timeout", "max_retries"):
        return _same_int(theirs, mine)
    if key == "retry_backoff":
        if isinstance(theirs, bool) or not isinstance(theirs, int | float):
            return False
        return float(theirs) == float(mine)  # type: ignore[arg-type]
    if key == "access_methods":
        return isinstance(theirs, list | tuple) and list(theirs) == list(mine)  # type: ignore[call-overload]
    return theirs == mine


def hv_row_drift(record: HvEndpointRecord, row: Mapping[str, Any]) -> list[str]:
    """Rule 3: fields on which an hv row is stale; missing policy keys count as stale."""
    drift: list[str] = []
    mine = record.resolved_target()
    if mine is None or row_target(row) != mine:
        drift.append("target")
    for key in HV_POLICY_KEYS:
        if not _policy_equal(key, getattr(record, key), row.get(key, _MISSING)):
            drift.append(key)
    return drift


def hv_row_is_current(record: HvEndpointRecord, row: Mapping[str, Any]) -> bool:
    return not hv_row_drift(record, row)
