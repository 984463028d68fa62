"""Branch handling at the end of a sync job (SPEC 3.3), as a decision procedure over branch operations.

The branch row is re-read before every decision: a stale in-memory status is never authorization. A
merge is accepted only if the refreshed row says MERGED; a merge that returns with no changes left is
archived and the archive verified; unmerged changes left behind keep the branch open and fail the job;
an unsuccessful local reconciliation skips the merge and leaves the branch open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class BranchStatus(StrEnum):
    """The netbox-branching status values this logic reads."""

    READY = "ready"
    MERGED = "merged"
    ARCHIVED = "archived"


class Disposition(StrEnum):
    MERGED = "merged"
    ARCHIVED = "archived"
    LEFT_OPEN = "left_open"


class BranchOps(Protocol):
    """What the glue does on the real branch; every status read refreshes the row from the database."""

    name: str

    def refreshed_status(self) -> str: ...
    def merge(self) -> None: ...
    def unmerged_changes(self) -> Sequence[Any]: ...
    def archive(self) -> None: ...


class BranchNotReady(Exception):
    """Activation or merge refused because the refreshed branch row is not READY."""


def require_ready(ops: BranchOps, action: str) -> None:
    """Local activation and the final merge both need a refreshed READY row."""
    status = ops.refreshed_status()
    if status != BranchStatus.READY:
        raise BranchNotReady(f"branch {ops.name} is {status!r}, not ready; {action} not attempted")


@dataclass
class BranchOutcome:
    disposition: Disposition
    job_failed: bool
    message: str
    log: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def finish_branch(
    ops: BranchOps,
    *,
    reconciliation_ok: bool,
    isolated: bool = False,
    persist_evidence: Callable[[], None] = lambda: None,
) -> BranchOutcome:
    """Decide and perform the end-of-job branch handling; the caller raises when `job_failed`."""
    if not reconciliation_ok:
        persist_evidence()  # completed stage evidence survives the raise
        data = {"branch_disposition": Disposition.LEFT_OPEN.value, "branch": ops.name} if isolated else {}
        return BranchOutcome(
            Disposition.LEFT_OPEN,
            True,
            f"a local reconciliation step was unsuccessful; merge of branch {ops.name} skipped, branch left open",
            data=data,
        )
    try:
        require_ready(ops, "merge")
    except BranchNotReady as exc:
        return BranchOutcome(Disposition.LEFT_OPEN, True, str(exc))
    try:
        ops.merge()
    except Exception as exc:
        return BranchOutcome(
            Disposition.LEFT_OPEN,
            True,
            f"merge of branch {ops.name} raised {type(exc).__name__}; branch left open",
        )
    status = ops.refreshed_status()
    if status == BranchStatus.MERGED:
        return BranchOutcome(Disposition.MERGED, False, f"branch {ops.name} merged")
    remaining = list(ops.unmerged_changes())
    if remaining:
        return BranchOutcome(
            Disposition.LEFT_OPEN,
            True,
            f"branch {ops.name} is {status!r} after merge with {len(remaining)} unmerged change(s); branch left open",
        )
    ops.archive()
    status = ops.refreshed_status()
    if status != BranchStatus.ARCHIVED:
        return BranchOutcome(
            Disposition.LEFT_OPEN, True, f"branch {ops.name} had no changes but is {status!r} after archiving"
        )
    return BranchOutcome(
        Disposition.ARCHIVED,
        False,
        f"branch {ops.name} had no changes; archived",
        log=[f"no changes to merge; branch {ops.name} archived"],
    )
