"""Four-eyes rules of deletion requests (netbox_hvsync.rules.deletion)."""

from __future__ import annotations

import pytest
from netbox_hvsync.rules.deletion import APPROVED, EXECUTED, PENDING, REJECTED, decide, edit_refusal


def test_another_person_approves_or_rejects_a_pending_request() -> None:
    assert decide(PENDING, 1, 2, APPROVED).status == APPROVED
    assert decide(PENDING, 1, 2, REJECTED).status == REJECTED
    assert decide(PENDING, None, 2, APPROVED).ok  # requester deleted: anyone else may decide


def test_requester_cannot_approve_but_may_withdraw() -> None:
    refused = decide(PENDING, 1, 1, APPROVED)
    assert not refused.ok and refused.status == PENDING and "four eyes" in refused.error
    assert decide(PENDING, 1, 1, REJECTED).status == REJECTED


@pytest.mark.parametrize("status", [APPROVED, REJECTED, EXECUTED])
def test_a_decided_request_stays_decided(status: str) -> None:
    result = decide(status, 1, 2, REJECTED)
    assert not result.ok and result.status == status and f"already {status}" in result.error


def test_executed_is_not_a_decision() -> None:
    result = decide(PENDING, 1, 2, EXECUTED)
    assert not result.ok and result.status == PENDING and "unknown decision" in result.error


@pytest.mark.parametrize("status", ["approved", "rejected", "executed"])
def test_a_decided_request_keeps_what_it_asked_for(status: str) -> None:
    refusal = edit_refusal(status, ["object_id"])
    assert refusal is not None and status in refusal and "object_id" in refusal
    assert edit_refusal(status, []) is None  # saving it unchanged (tags, comments) is fine


def test_a_pending_request_may_be_edited() -> None:
    assert edit_refusal("pending", ["object_id", "reason"]) is None
