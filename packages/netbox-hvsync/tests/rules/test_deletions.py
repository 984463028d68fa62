"""Lifecycle and four-eyes rules of deletion requests (netbox_hvsync.rules.deletions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from netbox_hvsync.rules.deletions import (
    APPLIED,
    APPROVED,
    EXPIRED,
    FAILED,
    PENDING,
    REJECTED,
    TRANSITIONS,
    WITHDRAWN,
    Decider,
    apply_verdict,
    decision_refusal,
    edit_refusal,
    expiry_cutoff,
    guest_presence,
    is_expired,
    may_move,
    node_presence,
)

ALICE = Decider(1, has_permission=True)
BOB = Decider(2, has_permission=True)
ROOT = Decider(1, has_permission=True, is_superuser=True)


def test_another_person_with_the_permission_approves_or_rejects_a_pending_request() -> None:
    assert decision_refusal(PENDING, 1, BOB, APPROVED) is None
    assert decision_refusal(PENDING, 1, BOB, REJECTED) is None
    assert decision_refusal(PENDING, None, BOB, APPROVED) is None  # requester deleted: anyone else may decide


def test_requester_cannot_approve_but_may_reject() -> None:
    refused = decision_refusal(PENDING, 1, ALICE, APPROVED)
    assert refused is not None and refused.kind == "forbidden" and "four eyes" in refused.message
    assert decision_refusal(PENDING, 1, ALICE, REJECTED) is None


def test_without_the_permission_nobody_decides_and_learns_nothing_of_the_state() -> None:
    nobody = Decider(2, has_permission=False, is_superuser=False)
    for status in (PENDING, APPLIED):
        for decision in (APPROVED, REJECTED):
            refused = decision_refusal(status, 1, nobody, decision)
            assert refused is not None and refused.kind == "forbidden"
            assert "approve_deletionrequest" in refused.message


def test_a_superuser_is_no_exception_unless_the_setting_says_so() -> None:
    refused = decision_refusal(PENDING, 1, ROOT, APPROVED)
    assert refused is not None and refused.kind == "forbidden" and "allow_self_approval" in refused.message
    assert decision_refusal(PENDING, 1, ROOT, APPROVED, allow_self_approval=True) is None
    # the setting exempts superusers only
    assert decision_refusal(PENDING, 1, ALICE, APPROVED, allow_self_approval=True) is not None


@pytest.mark.parametrize("status", [APPROVED, APPLIED, FAILED, REJECTED, WITHDRAWN, EXPIRED])
@pytest.mark.parametrize("decision", [APPROVED, REJECTED])
def test_only_a_pending_request_is_decided(status: str, decision: str) -> None:
    refused = decision_refusal(status, 1, BOB, decision)
    assert refused is not None and refused.kind == "conflict" and status in refused.message


def test_applied_is_not_a_decision() -> None:
    refused = decision_refusal(PENDING, 1, BOB, APPLIED)
    assert refused is not None and refused.kind == "invalid"


def test_transitions_follow_the_lifecycle() -> None:
    assert may_move(PENDING, APPROVED) and may_move(APPROVED, APPLIED) and may_move(APPROVED, FAILED)
    assert may_move(PENDING, WITHDRAWN) and may_move(APPROVED, WITHDRAWN) and may_move(PENDING, EXPIRED)
    assert not may_move(PENDING, APPLIED)  # deleting needs an approval first
    assert not may_move(APPROVED, EXPIRED)  # an approval does not age away
    for final in (APPLIED, FAILED, REJECTED, WITHDRAWN, EXPIRED):
        assert TRANSITIONS[final] == frozenset()
        assert not may_move(final, PENDING)
    assert not may_move("executed", APPLIED)


def test_a_pending_request_expires_at_its_configured_age() -> None:
    now = datetime(2026, 12, 2, 12, tzinfo=UTC)
    old = now - timedelta(days=30)
    assert is_expired(PENDING, old, now, 30)
    assert not is_expired(PENDING, old + timedelta(seconds=1), now, 30)
    assert not is_expired(APPROVED, old, now, 30)
    assert not is_expired(PENDING, old - timedelta(days=999), now, 0)  # 0: never
    assert expiry_cutoff(now, 30) == old
    assert expiry_cutoff(now, 0) is None


def test_applying_deletes_only_the_same_object_still_gone() -> None:
    assert apply_verdict("qemu/101", "qemu/101", "absent").outcome == "delete"
    back = apply_verdict("qemu/101", "qemu/101", "present")
    assert back.outcome == "withdraw" and "back" in back.reason
    unread = apply_verdict("qemu/101", "qemu/101", "unknown")
    assert unread.outcome == "fail" and "could not be read" in unread.reason
    other = apply_verdict("qemu/101", "lxc/101", "absent")
    assert other.outcome == "fail" and "'lxc/101'" in other.reason
    assert apply_verdict("qemu/101", None, "absent").outcome == "fail"
    # a request filed by hand for an object hvsync does not manage has nothing to re-read
    assert apply_verdict("", None, None).outcome == "delete"


def test_a_decided_request_keeps_what_it_asks_for() -> None:
    assert edit_refusal(PENDING, ["object_id"]) is None
    assert edit_refusal(APPROVED, []) is None
    refusal = edit_refusal(APPROVED, ["object_id", "identity"])
    assert refusal is not None and "object_id, identity" in refusal and "approved" in refusal


def _guest(exists: bool, keys: list[str] | None = None, *, endpoint_id: int = 7, ok: bool = True) -> dict:
    data = {"vmid": 101, "exists": exists, "node": "pve1" if exists else None, "config_keys": keys or []}
    return {"endpoints": [{"endpoint_id": endpoint_id, "endpoint_name": "pve-a", "ok": ok, "data": data}]}


def test_the_guest_read_answers_for_a_guest_its_disks_and_its_nics() -> None:
    assert guest_presence(_guest(True, ["net0", "scsi0"]), 7) == "present"
    assert guest_presence(_guest(False), 7) == "absent"
    assert guest_presence(_guest(True, ["net0", "scsi0"]), 7, "scsi0") == "present"
    assert guest_presence(_guest(True, ["net0"]), 7, "scsi1") == "absent"  # the disk went, the guest stayed
    assert guest_presence(_guest(False), 7, "net0") == "absent"


def test_an_unread_or_foreign_answer_is_unknown_never_absent() -> None:
    assert guest_presence(_guest(False, endpoint_id=8), 7) == "unknown"  # another endpoint's answer
    assert guest_presence(_guest(False, ok=False), 7) == "unknown"
    assert guest_presence({"detail": "no hv endpoint answered"}, 7) == "unknown"
    assert guest_presence(None, 7) == "unknown"
    assert node_presence({"endpoints": []}, 7, "pve1") == "unknown"


def test_the_node_read_answers_for_a_node() -> None:
    body = {"endpoints": [{"endpoint_id": 7, "ok": True, "data": [{"node": "pve1"}, {"node": "pve2"}]}]}
    assert node_presence(body, 7, "pve2") == "present"
    assert node_presence(body, 7, "pve3") == "absent"
