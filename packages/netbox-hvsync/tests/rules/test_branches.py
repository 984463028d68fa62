"""SPEC 3.3 "Branch handling at the end of a sync job"."""

import pytest
from netbox_hvsync.rules.branches import BranchNotReady, Disposition, finish_branch, require_ready


class FakeBranch:
    def __init__(self, statuses, changes=(), merge_error=None) -> None:
        self.name = "hvsync-run-42"
        self.statuses = list(statuses)
        self.changes = list(changes)
        self.merge_error = merge_error
        self.calls: list[str] = []
        self.cached_status = "ready"  # a stale in-memory value the logic must never trust

    def refreshed_status(self) -> str:
        self.calls.append("refresh")
        return self.statuses.pop(0)

    def merge(self) -> None:
        self.calls.append("merge")
        if self.merge_error:
            raise self.merge_error

    def unmerged_changes(self):
        self.calls.append("changes")
        return self.changes

    def archive(self) -> None:
        self.calls.append("archive")


def test_stale_in_memory_status_is_not_authorization() -> None:
    """ "branch row refreshed; status must be READY ... stale in-memory status is not authorization"."""
    branch = FakeBranch(["merging"])
    outcome = finish_branch(branch, reconciliation_ok=True)
    assert outcome.job_failed and branch.calls == ["refresh"] and "not ready" in outcome.message
    with pytest.raises(BranchNotReady):
        require_ready(FakeBranch(["provisioning"]), "local activation")


def test_merge_accepted_only_if_merged() -> None:
    """ "READY | merge | after merge, branch refreshed | accepted only if MERGED"."""
    branch = FakeBranch(["ready", "merged"])
    outcome = finish_branch(branch, reconciliation_ok=True)
    assert outcome.disposition is Disposition.MERGED and not outcome.job_failed
    assert branch.calls == ["refresh", "merge", "refresh"]


def test_no_changes_is_archived_and_verified() -> None:
    """ "READY, no changes | merge path returns normally | unmerged-changes list empty | ARCHIVED after archive
    call, verified | job log notes no changes, branch archived"."""
    branch = FakeBranch(["ready", "ready", "archived"])
    outcome = finish_branch(branch, reconciliation_ok=True)
    assert outcome.disposition is Disposition.ARCHIVED and not outcome.job_failed
    assert branch.calls == ["refresh", "merge", "refresh", "changes", "archive", "refresh"]
    assert outcome.log == ["no changes to merge; branch hvsync-run-42 archived"]
    unverified = finish_branch(FakeBranch(["ready", "ready", "ready"]), reconciliation_ok=True)
    assert unverified.job_failed and unverified.disposition is Disposition.LEFT_OPEN


def test_unmerged_changes_keep_it_open_and_fail() -> None:
    """ "READY, unmerged changes remain | merge path returns normally | stays open | job fails"."""
    branch = FakeBranch(["ready", "ready"], changes=[1, 2, 3])
    outcome = finish_branch(branch, reconciliation_ok=True)
    assert outcome.job_failed and outcome.disposition is Disposition.LEFT_OPEN
    assert "3 unmerged change(s)" in outcome.message and "archive" not in branch.calls


def test_unsuccessful_reconciliation_skips_merge() -> None:
    """ "any local reconciliation result classified unsuccessful | merge skipped | completed stage evidence
    persisted, job raises; isolated run records branch disposition left_open with the branch name"."""
    persisted: list[bool] = []
    branch = FakeBranch([])
    outcome = finish_branch(
        branch, reconciliation_ok=False, isolated=True, persist_evidence=lambda: persisted.append(True)
    )
    assert outcome.job_failed and branch.calls == [] and persisted == [True]
    assert outcome.data == {"branch_disposition": "left_open", "branch": "hvsync-run-42"}
    assert finish_branch(FakeBranch([]), reconciliation_ok=False).data == {}


def test_merge_exception_leaves_open() -> None:
    outcome = finish_branch(
        FakeBranch(["ready"], merge_error=RuntimeError("conflict")), reconciliation_ok=True
    )
    assert (
        outcome.job_failed
        and outcome.disposition is Disposition.LEFT_OPEN
        and "RuntimeError" in outcome.message
    )
