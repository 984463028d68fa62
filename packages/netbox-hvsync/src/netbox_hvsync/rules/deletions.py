"""Deletion requests (issue 40): their lifecycle, who may decide them, and when they expire.

    pending -> approved -> applied | failed      (a second person approves; applying deletes)
    pending -> rejected                          (a person keeps the object)
    pending | approved -> withdrawn              (the object came back in Proxmox before it was deleted)
    pending -> expired                           (nobody decided within the configured age)

Four eyes: approving needs the permission `approve_deletionrequest` and must be done by someone else than
the requester; a superuser is no exception unless `allow_self_approval` is set. Rejecting needs the same
permission, and the requester may reject their own request: keeping an object needs no second pair of
eyes, deleting one does. `applied`/`failed` are reached only by applying (never by a click), and a request
is decided once: what it asks for is fixed from then on (`edit_refusal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

PENDING: Final = "pending"
APPROVED: Final = "approved"
APPLIED: Final = "applied"
FAILED: Final = "failed"
REJECTED: Final = "rejected"
WITHDRAWN: Final = "withdrawn"
EXPIRED: Final = "expired"

#: Statuses of a request that may still lead to a deletion; at most one per object (a DB constraint).
OPEN_STATUSES: Final = (PENDING, APPROVED)
#: Statuses a person's decision leads to; the record names who decided.
DECIDED_BY_A_PERSON: Final = (REJECTED,)
DECISIONS: Final = (APPROVED, REJECTED)
#: Statuses that follow an approval (by a person, or by an endpoint's auto-approval: then nobody).
APPROVED_STATUSES: Final = (APPROVED, APPLIED, FAILED)

#: Every allowed move; anything else is refused.
TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    PENDING: frozenset({APPROVED, REJECTED, WITHDRAWN, EXPIRED}),
    APPROVED: frozenset({APPLIED, FAILED, WITHDRAWN}),
    APPLIED: frozenset(),
    FAILED: frozenset(),
    REJECTED: frozenset(),
    WITHDRAWN: frozenset(),
    EXPIRED: frozenset(),
}

#: The permission (app_label.codename) that approving and rejecting need.
APPROVE_PERMISSION: Final = "netbox_hvsync.approve_deletionrequest"


def may_move(current: str, target: str) -> bool:
    """Whether a request in `current` may become `target`."""
    return target in TRANSITIONS.get(current, frozenset())


@dataclass(frozen=True)
class Refusal:
    """Why a decision is refused; `kind` maps to the HTTP answer (forbidden: 403, conflict: 409)."""

    kind: Literal["forbidden", "conflict", "invalid"]
    message: str


@dataclass(frozen=True)
class Decider:
    """Who decides: their id, whether they hold the approve permission, whether they are a superuser."""

    user_id: int
    has_permission: bool
    is_superuser: bool = False


def decision_refusal(
    status: str,
    requester_id: int | None,
    decider: Decider,
    decision: str,
    *,
    allow_self_approval: bool = False,
) -> Refusal | None:
    """Why `decider` may not `decision` (approved/rejected) a request now in `status`, or None.

    The permission is checked first (a user who may not decide learns nothing about the request's
    state), then the status (only a pending request is decided), then four eyes."""
    if decision not in DECISIONS:
        return Refusal("invalid", f"unknown decision {decision!r}; use approved or rejected")
    if not decider.has_permission:
        return Refusal("forbidden", f"deciding a deletion request needs the permission {APPROVE_PERMISSION}")
    if status != PENDING:
        return Refusal("conflict", f"the request is already {status}; only a pending request is decided")
    own = requester_id is not None and requester_id == decider.user_id
    if decision == APPROVED and own and not (decider.is_superuser and allow_self_approval):
        return Refusal(
            "forbidden",
            "four eyes: the requester cannot approve their own request"
            + (" (a superuser may only when allow_self_approval is set)" if decider.is_superuser else ""),
        )
    return None


def is_expired(status: str, created: datetime | None, now: datetime, max_age_days: int) -> bool:
    """A pending request older than `max_age_days` has expired; 0 means requests never expire."""
    if status != PENDING or max_age_days <= 0 or created is None:
        return False
    return now - created >= timedelta(days=max_age_days)


def expiry_cutoff(now: datetime, max_age_days: int) -> datetime | None:
    """Pending requests created before this instant have expired (None: expiry is off)."""
    return None if max_age_days <= 0 else now - timedelta(days=max_age_days)


RecheckAnswer = Literal["absent", "present", "unknown"]
Outcome = Literal["delete", "withdraw", "fail"]


@dataclass(frozen=True)
class ApplyVerdict:
    outcome: Outcome
    reason: str = ""


def apply_verdict(
    stored_identity: str, current_identity: str | None, proxmox: RecheckAnswer | None
) -> ApplyVerdict:
    """What applying an approved request does, from the identity it names and a fresh Proxmox read.

    `current_identity` is the object's hvsync identity now (None: it has no sync-state record any more);
    `proxmox` is the fresh read (None: the request names no hvsync identity, so there is nothing to read).
    Fail closed: a different identity or an unanswered read never deletes."""
    if stored_identity:
        if current_identity != stored_identity:
            now = "none" if current_identity is None else repr(current_identity)
            return ApplyVerdict("fail", f"not the same object: requested for {stored_identity!r}, now {now}")
        if proxmox == "present":
            return ApplyVerdict("withdraw", "the object is back in Proxmox")
        if proxmox != "absent":
            return ApplyVerdict("fail", "Proxmox could not be read to confirm the object is still gone")
    return ApplyVerdict("delete")


def _entry(body: object, backend_id: int) -> Mapping[str, Any] | None:
    """The backend's answer for endpoint `backend_id` (`{"endpoints": [{endpoint_id, ok, data}]}`)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("endpoints"), list):
        return None
    for entry in body["endpoints"]:
        if isinstance(entry, Mapping) and entry.get("endpoint_id") == backend_id:
            return entry if entry.get("ok") is True else None
    return None


def guest_presence(body: object, backend_id: int, key: str | None = None) -> RecheckAnswer:
    """From `GET /hv/guests/{vmid}`: is the guest (or, with `key`, its disk/NIC `key`) in Proxmox?

    An IP address is re-checked by its guest (the guest agent's addresses are not read here): a guest that
    still exists keeps it, so the request is withdrawn rather than an address of a living guest deleted."""
    entry = _entry(body, backend_id)
    data = entry.get("data") if entry is not None else None
    if not isinstance(data, Mapping) or not isinstance(data.get("exists"), bool):
        return "unknown"
    if not data["exists"]:
        return "absent"
    if key is None:
        return "present"
    keys = data.get("config_keys")
    if not isinstance(keys, list):
        return "unknown"
    return "present" if key in keys else "absent"


def node_presence(body: object, backend_id: int, node: str) -> RecheckAnswer:
    """From `GET /hv/nodes/`: is node `node` (or, for a node interface, its node) in Proxmox?"""
    entry = _entry(body, backend_id)
    data = entry.get("data") if entry is not None else None
    if not isinstance(data, list):
        return "unknown"
    names = {row.get("node") for row in data if isinstance(row, Mapping)}
    return "present" if node in names else "absent"


#: What a deletion request asks for; editable only while it is pending (a decision is about these values).
REQUEST_FIELDS: Final = ("endpoint_id", "object_type_id", "object_id", "object_repr", "identity", "reason")


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
