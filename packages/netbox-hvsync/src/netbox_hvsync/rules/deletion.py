"""Four-eyes decisions on deletion requests: who may move a request out of `pending`, and to what.

A request is decided once, and what it asks for is fixed from then on (`edit_refusal`): the requester may not approve their own request (they may withdraw it by
rejecting it), a decided request stays decided, and `executed` is reached only from `approved`, by the
component that performs the deletion (the intent path), never by a person's click.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

PENDING: Final = "pending"
APPROVED: Final = "approved"
REJECTED: Final = "rejected"
EXECUTED: Final = "executed"
DECISIONS: Final = (APPROVED, REJECTED)


@dataclass(frozen=True)
class Decision:
    ok: bool
    status: str
    error: str = ""


def decide(status: str, requester_id: int | None, decider_id: int, decision: str) -> Decision:
    """The status after `decider_id` approves or rejects a request now in `status`, or why not."""
    if decision not in DECISIONS:
        return Decision(False, status, f"unknown decision {decision!r}; use approved or rejected")
    if status != PENDING:
        return Decision(False, status, f"the request is already {status}; only a pending request is decided")
    if decision == APPROVED and requester_id is not None and requester_id == decider_id:
        return Decision(False, status, "four eyes: the requester cannot approve their own request")
    return Decision(True, decision)


#: What a deletion request asks for; editable only while it is pending (a decision is about these values).
REQUEST_FIELDS: Final = ("endpoint_id", "object_type_id", "object_id", "object_repr", "reason")


def edit_refusal(stored_status: str, changed: list[str]) -> str | None:
    """Why an edit that changes `changed` of a request now in `stored_status` is refused, or None.

    An approval is for the object it names: editing a decided request would keep its status while it
    named another object, so only a pending request may change."""
    if stored_status == PENDING or not changed:
        return None
    return (
        f"the request is already {stored_status}; {', '.join(changed)} cannot change after the decision "
        "(file a new request instead)"
    )
