"""netbox-branching glue for sync jobs (SPEC 3.3): a working branch per job, merged or archived at the end.

`rules.branches` decides; this module performs the decisions on the real `netbox_branching.Branch` row.
Every status read re-reads the row from the database: an in-memory status may have been changed by a
merge or archive job elsewhere and is never authorization.

Provisioning runs in the sync job's own worker (`Branch.provision()` is synchronous): enqueueing
netbox-branching's ProvisionBranchJob and waiting for it would deadlock a single-worker queue. The wait
for READY still polls the database, so a branch provisioned by someone else is handled the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from netbox_hvsync.rules.branches import BranchOutcome, Disposition, finish_branch, require_ready
from netbox_hvsync.rules.redaction import sweep_text

logger = logging.getLogger("netbox_hvsync.branching")

#: How long a job waits for its working branch to reach READY.
READY_TIMEOUT = 600.0
READY_POLL_INTERVAL = 1.0
#: Terminal states a branch being provisioned never leaves on its own.
NOT_COMING_READY = ("failed", "archived", "merged", "pending-migrations")


class BranchingUnavailable(RuntimeError):
    """The job asked for a branch but netbox-branching is not installed or not enabled."""


class BranchSetupFailed(RuntimeError):
    """The working branch could not be created, provisioned, or did not become READY."""


def branching_installed() -> bool:
    from django.apps import apps

    return apps.is_installed("netbox_branching")


def branch_name_for(run_id: str) -> str:
    """One branch per run; the run id makes it unique and findable from the job's data."""
    return f"hvsync-sync-{run_id}"


def create_working_branch(run_id: str, user: Any) -> Any:
    """Create and provision the job's branch; returns the row once a database re-read says READY."""
    if not branching_installed():
        raise BranchingUnavailable("netbox-branching is not installed: a branched sync cannot run")
    from django.core.exceptions import ValidationError
    from netbox_branching.models import Branch

    branch = Branch(name=branch_name_for(run_id), owner=user, description="hvsync sync job working branch")
    try:
        branch.full_clean()  # netbox-branching's own limits (max_branches, max_working_branches)
    except ValidationError as exc:
        raise BranchSetupFailed(
            f"branch {branch.name} cannot be created: {'; '.join(exc.messages)}"
        ) from None
    branch.save(provision=False)
    try:
        branch.provision(user)
    except Exception as exc:
        raise BranchSetupFailed(f"provisioning branch {branch.name} failed: {type(exc).__name__}") from None
    wait_until_ready(branch)
    return branch


def wait_until_ready(
    branch: Any, *, timeout: float = READY_TIMEOUT, poll: float = READY_POLL_INTERVAL
) -> None:
    """Poll the database until the branch row is READY; a terminal other state or the timeout fails."""
    deadline = time.monotonic() + timeout
    while True:
        branch.refresh_from_db(fields=["status"])
        if branch.status == "ready":
            return
        if branch.status in NOT_COMING_READY:
            raise BranchSetupFailed(f"branch {branch.name} is {branch.status!r}, it will not become ready")
        if time.monotonic() >= deadline:
            raise BranchSetupFailed(f"branch {branch.name} still {branch.status!r} after {timeout:.0f} s")
        time.sleep(poll)


class DatabaseBranchOps:
    """`rules.branches.BranchOps` over a real Branch row; every status read refreshes the row first."""

    def __init__(self, branch: Any, user: Any) -> None:
        self.branch = branch
        self.user = user
        self.name: str = str(branch.name)
        #: why netbox-branching's archive raised, when it did (the job records it instead of crashing)
        self.archive_error: str = ""

    def _refresh(self) -> None:
        self.branch.refresh_from_db()
        for cached in ("can_merge", "can_archive"):
            self.branch.__dict__.pop(cached, None)

    def refreshed_status(self) -> str:
        self._refresh()
        return str(self.branch.status)

    def merge(self) -> None:
        self._refresh()
        self.branch.merge(self.user)

    def unmerged_changes(self) -> Sequence[Any]:
        self._refresh()
        return list(self.branch.get_unmerged_changes().values_list("pk", flat=True))

    def archive(self) -> None:
        """netbox-branching's archive may raise (a schema it cannot drop, a status it refuses, a database
        error): the branch then stays as it is, the rules read its refreshed status (not ARCHIVED: left
        open), and `finish_working_branch` names the exception in the job's error, so the job ends with its
        disposition recorded instead of crashing."""
        self._refresh()
        try:
            self.branch.archive(self.user)
        except Exception as exc:
            self.archive_error = f"{type(exc).__name__}: {sweep_text(str(exc))[:300]}"
            logger.warning("archiving branch %s raised %s", self.name, self.archive_error)


def require_branch_ready(branch: Any, user: Any, action: str) -> None:
    """Before the job writes into the branch: a refreshed READY row (raises the rules' BranchNotReady)."""
    require_ready(DatabaseBranchOps(branch, user), action)


def finish_working_branch(
    branch: Any, user: Any, *, reconciliation_ok: bool, persist_evidence: Any
) -> BranchOutcome:
    """Merge, archive or leave open, as the rules decide; the caller fails the job when `job_failed`."""
    ops = DatabaseBranchOps(branch, user)
    outcome = finish_branch(
        ops, reconciliation_ok=reconciliation_ok, isolated=True, persist_evidence=persist_evidence
    )
    if ops.archive_error and outcome.disposition != Disposition.ARCHIVED:
        outcome.message = (
            f"branch {ops.name} had no changes to merge, but archiving it raised {ops.archive_error}; "
            "branch left open"
        )
        outcome.log.append(f"archive of branch {ops.name} failed: {ops.archive_error}")
    return outcome


__all__ = [
    "BranchSetupFailed",
    "BranchingUnavailable",
    "DatabaseBranchOps",
    "branch_name_for",
    "create_working_branch",
    "finish_working_branch",
    "require_branch_ready",
    "wait_until_ready",
]
