"""The sync-state page and its repair action (SPEC 4.6, 5.3, 7.3 "Repair").

Loading the page needs view permission on the backend endpoint and shows the backend's bootstrap report
as a badge; repair needs `core.add_job` (SPEC 5.3) and, as every sync does, view permission on the Proxmox
endpoints it syncs, plus view permission on the backend endpoint it calls (`REPAIR_PERMISSIONS`). It
reconciles custom fields best-effort (a rejection is a warning), then queues a full sync through the
regular pipeline. Hard stops: missing permission, a repair already running (checked first, and again
under a lock when the sync is queued: `RepairAlreadyRunning`), or failure to queue. Repair never mutates
the hypervisor platform: it only calls the backend's reconcile route and queues a sync.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .redaction import sweep_text

REPAIR_PERMISSION = "core.add_job"
BOOTSTRAP_VIEW_PERMISSION = "netbox_hvsync.view_backendendpoint"
#: Everything repair needs: SPEC 5.3's job permission, the endpoints it syncs, the backend it calls.
REPAIR_PERMISSIONS = (REPAIR_PERMISSION, "netbox_hvsync.view_hvendpoint", BOOTSTRAP_VIEW_PERMISSION)
ALREADY_RUNNING = "a repair sync is already running"


class RepairAlreadyRunning(Exception):
    """Raised by `queue_full_sync` when, under its lock, another repair's sync is found queued: two
    clicks that both passed the first check queue one sync between them."""


@dataclass(frozen=True)
class BootstrapBadge:
    state: str  # "ok" | "problem" | "skipped" | "unavailable"
    detail: str
    payload: Any


def bootstrap_badge(status: int | None, body: Any) -> BootstrapBadge:
    """GET /extras/bootstrap-status: "a real problem is HTTP 200 with ok false; payload may carry skipped
    true with reason no_inventory_session" (SPEC 4.3)."""
    if status != 200 or not isinstance(body, Mapping):
        detail = "backend unreachable" if status is None else f"backend answered HTTP {status}"
        return BootstrapBadge("unavailable", detail, body)
    if body.get("skipped") is True:
        reason = str(body.get("reason") or "unknown")
        if reason == "no_inventory_session":
            return BootstrapBadge("skipped", "the backend has no inventory endpoint of its own yet", body)
        return BootstrapBadge("skipped", f"skipped: {reason}", body)
    if body.get("ok") is True:
        return BootstrapBadge("ok", "custom fields, content types and endpoint are in place", body)
    detail = body.get("detail") or body.get("error") or "bootstrap report says ok=false"
    return BootstrapBadge("problem", str(detail), body)


@dataclass
class RepairOutcome:
    ok: bool
    error: str = ""
    job_id: int | None = None
    warnings: list[str] = field(default_factory=list)


def run_repair(
    *,
    has_permission: bool,
    repair_running: bool,
    reconcile: Callable[[], tuple[bool, str]],
    queue_full_sync: Callable[[], int],
) -> RepairOutcome:
    """Reconcile (best effort), then queue a full sync; hard stops return before anything is called."""
    if not has_permission:
        return RepairOutcome(False, f"repair needs the {' and '.join(REPAIR_PERMISSIONS)} permissions")
    if repair_running:
        return RepairOutcome(False, ALREADY_RUNNING)
    warnings: list[str] = []
    try:
        ok, message = reconcile()
    except Exception as exc:  # best effort: a failed reconcile never stops the repair
        ok, message = False, f"{type(exc).__name__}"
    if not ok:
        warnings.append(f"custom-field reconcile was rejected: {sweep_text(message)}")
    try:
        job_id = queue_full_sync()
    except RepairAlreadyRunning:
        return RepairOutcome(False, ALREADY_RUNNING, warnings=warnings)
    except Exception as exc:
        return RepairOutcome(
            False,
            f"could not queue the full sync: {type(exc).__name__}: {sweep_text(str(exc))}",
            warnings=warnings,
        )
    return RepairOutcome(True, job_id=job_id, warnings=warnings)
