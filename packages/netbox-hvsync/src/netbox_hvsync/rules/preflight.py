"""The preflight every sync job runs first, as a decision procedure over injected steps (SPEC 4.5).

Order: (1) resolve the backend context, else B1; (2) wait briefly for /health; (3) ensure the key is
registered (failure is a warning); (3b) retire the backend rows of deleted Proxmox endpoints still
pending (C3; a failure is a warning, retried next time); (4) no enabled inventory endpoint is B2, decided
without the backend's rows, after the backend's inventory row is disabled (a disable that failed before
is retried here); (5) push every enabled inventory endpoint, and if any push failed list the backend's
inventory rows and apply B3-B6; (6) list hv rows once, push each in-scope hv endpoint within the time
budget (a failed hv push is a warning; rows claiming one suffix twice refuse the sync). Step 7 (local
reconciliation, stages) belongs to the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .adoption import ensure_key_registered, wait_for_health
from .budgets import BudgetDecision, PushBudget, RowState, skip_warning
from .constants import HEALTH_WAIT_BUDGET, HV_PUSH_TIMEOUT, INVENTORY_PUSH_TIMEOUT
from .fingerprints import credential_fingerprint, fingerprint_changed
from .identity import hv_row_is_current, inventory_row_drift, inventory_row_is_ours, locate_hv_row
from .push import (
    HV_PATH,
    INVENTORY_PATH,
    Listing,
    PushResult,
    disable_inventory_row,
    list_rows,
    push_hv_endpoint,
    push_inventory_endpoint,
)
from .records import HvEndpointRecord, InventoryEndpointRecord
from .transport import BackendContext, Transport

DUPLICATE_HV_ROWS = "HV-DUP"


class PreflightBlocked(Exception):
    """A blocking preflight error: the job stops before local reconciliation and any stage."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class PreflightSteps:
    """The effects the preflight needs; the glue wires them to HTTP, tests to fakes."""

    resolve_context: Callable[[int | None], BackendContext | None]
    wait_for_health: Callable[[BackendContext], bool]
    ensure_key_registered: Callable[[BackendContext], str | None]  # a warning, or None when fine
    push_inventory: Callable[[BackendContext, InventoryEndpointRecord], PushResult]
    list_inventory_rows: Callable[[BackendContext], Listing]
    list_hv_rows: Callable[[BackendContext], Listing]
    push_hv: Callable[[BackendContext, HvEndpointRecord, Sequence[Mapping[str, Any]] | None], PushResult]
    fingerprint: Callable[[InventoryEndpointRecord], str]
    clock: Callable[[], float] = time.monotonic
    #: disable the backend's inventory row when no inventory endpoint is enabled (None: not wired)
    disable_inventory: Callable[[BackendContext], PushResult] | None = None
    #: retire the backend rows of deleted Proxmox endpoints; returns one warning per failure (C3)
    retire_deleted: Callable[[BackendContext], list[str]] | None = None


@dataclass
class PreflightReport:
    context: BackendContext
    warnings: list[str] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    inventory_results: dict[int, PushResult] = field(default_factory=dict)
    hv_results: dict[int, PushResult] = field(default_factory=dict)
    skipped_hv: dict[int, BudgetDecision] = field(default_factory=dict)

    def warn(self, phase: str, message: str, **extra: Any) -> None:
        self.warnings.append(message)
        self.phases.append({"phase": phase, "status": "warning", "message": message, **extra})

    @property
    def hint(self) -> str:
        """Non-fatal warnings, carried as a hint and appended to any later stage error."""
        return "; ".join(self.warnings)


def append_hint(error: str, hint: str) -> str:
    return f"{error} [preflight warnings: {hint}]" if hint else error


def run_preflight(
    steps: PreflightSteps,
    *,
    inventory_endpoints: Sequence[InventoryEndpointRecord],
    hv_endpoints: Sequence[HvEndpointRecord],
    selected_backend_id: int | None = None,
    budget: PushBudget | None = None,
    unusable: Sequence[str] = (),
) -> PreflightReport:
    """Run steps 1-6; raise PreflightBlocked for B1-B6 and for duplicate hv claims.

    `unusable`: why backend endpoint rows were passed over (a key not adopted), appended to B1."""
    budget = budget or PushBudget()
    started = steps.clock()

    ctx = steps.resolve_context(selected_backend_id)
    if ctx is None:
        pinned = (
            f" (selected backend endpoint id {selected_backend_id})"
            if selected_backend_id is not None
            else ""
        )
        why = "".join(f"; {reason}" for reason in unusable)
        raise PreflightBlocked("B1", f"no usable backend endpoint{pinned}{why}")
    report = PreflightReport(context=ctx)

    if not steps.wait_for_health(ctx):
        report.warn("health", "backend /health did not answer within the wait budget")
    key_warning = steps.ensure_key_registered(ctx)
    if key_warning:
        report.warn("backend_key", key_warning)

    if steps.retire_deleted is not None:
        for warning in steps.retire_deleted(ctx):
            report.warn("hv_retire", warning)

    enabled = [r for r in inventory_endpoints if r.enabled]
    if not enabled:
        disabled = ""
        if inventory_endpoints and steps.disable_inventory is not None:
            result = steps.disable_inventory(ctx)
            disabled = (
                "; the backend's inventory endpoint is disabled"
                if result.ok
                else f"; disabling the backend's inventory endpoint failed ({result.error}), retried next time"
            )
        raise PreflightBlocked(
            "B2",
            "no enabled inventory endpoint; refusing to let the backend write to a disabled inventory system"
            + disabled,
        )
    for record in enabled:
        report.inventory_results[record.pk] = steps.push_inventory(ctx, record)
    failed = [r for r in enabled if not report.inventory_results[r.pk].ok]
    if failed:
        _apply_blocking_rules(steps, ctx, enabled, failed, report)

    _push_hv_endpoints(steps, ctx, hv_endpoints, report, budget, started)
    return report


def _apply_blocking_rules(
    steps: PreflightSteps,
    ctx: BackendContext,
    enabled: Sequence[InventoryEndpointRecord],
    failed: Sequence[InventoryEndpointRecord],
    report: PreflightReport,
) -> None:
    listing = steps.list_inventory_rows(ctx)
    errors = {r.pk: report.inventory_results[r.pk].error for r in failed}
    if not listing.ok:
        if len(failed) == len(enabled):
            raise PreflightBlocked(
                "B5",
                "every enabled inventory endpoint push failed and listing the backend's inventory rows failed "
                f"too (unknown is not ours): {listing.error}; push errors: " + "; ".join(errors.values()),
            )
        for record in failed:
            report.warn(
                "inventory_push",
                f"inventory endpoint {record.pk} push failed ({errors[record.pk]}); another enabled "
                "inventory endpoint pushed successfully, continuing",
                endpoint=record.pk,
            )
        return
    if not listing.rows:
        raise PreflightBlocked(
            "B3",
            "inventory push failed and the backend confirms it holds no inventory endpoint: "
            + "; ".join(errors.values()),
        )
    for record in failed:
        ours = [row for row in listing.rows if inventory_row_is_ours(record, row)]
        if not ours:
            target = record.resolved_target()
            where = f"{target[0]}:{target[1]}" if target else "an unresolvable target"
            raise PreflightBlocked(
                "B4",
                f"inventory endpoint {record.pk} push failed ({errors[record.pk]}) and no backend row provably "
                f"points at this inventory system ({where})",
            )
        current = [row for row in ours if not inventory_row_drift(record, row)]
        if not current:
            drift = sorted({f for row in ours for f in inventory_row_drift(record, row)})
            raise PreflightBlocked(
                "B4",
                f"inventory endpoint {record.pk} push failed ({errors[record.pk]}) and the backend row for this "
                f"inventory system is superseded (drifted: {', '.join(drift)})",
            )
        if fingerprint_changed(record.pushed_credential_fingerprint, steps.fingerprint(record)):
            never = (
                "was never pushed"
                if not record.pushed_credential_fingerprint
                else "changed since the last successful push"
            )
            raise PreflightBlocked(
                "B6",
                f"inventory endpoint {record.pk} push failed ({errors[record.pk]}); the backend row is ours and "
                f"current but the local credentials {never}",
            )
        report.warn(
            "inventory_push",
            f"inventory endpoint {record.pk} push failed ({errors[record.pk]}); the backend row is ours, current "
            "and holds the last pushed credentials, continuing",
            endpoint=record.pk,
        )


def _row_state(record: HvEndpointRecord, listing: Listing) -> RowState:
    if not listing.ok:
        return RowState.LISTING_FAILED
    lookup = locate_hv_row(record.pk, listing.rows)
    if lookup.status == "unregistered":
        return RowState.UNKNOWN
    if lookup.row is not None and hv_row_is_current(record, lookup.row):
        return RowState.CURRENT
    return RowState.STALE


def _push_hv_endpoints(
    steps: PreflightSteps,
    ctx: BackendContext,
    records: Sequence[HvEndpointRecord],
    report: PreflightReport,
    budget: PushBudget,
    started: float,
) -> None:
    if not records:
        return
    listing = steps.list_hv_rows(ctx)
    if not listing.ok:
        report.warn("hv_listing", f"listing the backend's hv rows failed: {listing.error}")
    rows = listing.rows if listing.ok else None
    duplicates: list[str] = []
    for record in records:
        label = f"hv endpoint {record.pk} ({record.name})"
        elapsed = steps.clock() - started
        decision = budget.decide(elapsed, _row_state(record, listing))
        if decision is not BudgetDecision.PUSH:
            report.skipped_hv[record.pk] = decision
            report.warn(
                f"hv_push_{decision.value}",
                skip_warning(decision, label, elapsed, budget),
                endpoint=record.pk,
            )
            continue
        result = steps.push_hv(ctx, record, rows)
        report.hv_results[record.pk] = result
        if result.duplicate_claim:
            duplicates.append(result.error)
        elif not result.ok:
            report.warn("hv_push", f"{label} push failed: {result.error}", endpoint=record.pk)
    if duplicates:
        raise PreflightBlocked(DUPLICATE_HV_ROWS, "; ".join(duplicates))


def http_steps(
    transport: Transport,
    resolve_context: Callable[[int | None], BackendContext | None],
    fingerprint_key: bytes,
    *,
    health_budget: float = HEALTH_WAIT_BUDGET,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PreflightSteps:
    """The preflight wired to real HTTP through one transport (the glue supplies context and key)."""
    return PreflightSteps(
        resolve_context=resolve_context,
        wait_for_health=lambda ctx: wait_for_health(
            transport, ctx, budget=health_budget, clock=clock, sleep=sleep
        ),
        ensure_key_registered=lambda ctx: ensure_key_registered(transport, ctx),
        push_inventory=lambda ctx, record: push_inventory_endpoint(transport, ctx, record),
        list_inventory_rows=lambda ctx: list_rows(
            transport, ctx, INVENTORY_PATH, timeout=INVENTORY_PUSH_TIMEOUT
        ),
        list_hv_rows=lambda ctx: list_rows(transport, ctx, HV_PATH, timeout=HV_PUSH_TIMEOUT),
        push_hv=lambda ctx, record, rows: push_hv_endpoint(transport, ctx, record, rows=rows),
        fingerprint=lambda record: credential_fingerprint(
            fingerprint_key, record.token_version, record.token_key, record.token
        ),
        clock=clock,
        disable_inventory=lambda ctx: disable_inventory_row(transport, ctx),
    )
