"""The gone settings of a Proxmox endpoint and what the policy does on a gone transition (no Django).

A sync that reads an endpoint completely and no longer finds a managed object marks it gone
(`gone_since` on its sync-state record); one that sees it again clears the mark. The endpoint's
`gone_policy` says what the mark does to NetBox's own fields, once, on each transition:
`keep` nothing, `status` sets `gone_status` (and restores the previous status when the object returns,
if it still carries the status hvsync set), `request-deletion` also raises a deletion request.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

KEEP: Final = "keep"
STATUS: Final = "status"
REQUEST_DELETION: Final = "request-deletion"
POLICIES: Final = (KEEP, STATUS, REQUEST_DELETION)


def gone_setting_errors(
    policy: str, status: str, share: float | None, *, statuses: Collection[str]
) -> dict[str, str]:
    """Field -> message for gone settings that cannot work together (`statuses`: VM status values)."""
    errors: dict[str, str] = {}
    if policy not in POLICIES:
        errors["gone_policy"] = f"Choose one of {', '.join(POLICIES)}."
    if status and status not in statuses:
        errors["gone_status"] = f"{status!r} is not a virtual machine status ({', '.join(sorted(statuses))})."
    elif policy == STATUS and not status:
        errors["gone_status"] = "The 'status' policy needs the status to set."
    if share is None or not 0.0 <= share <= 1.0:
        errors["gone_guard_share"] = "Give a share between 0 and 1 (e.g. 0.3 for 30%)."
    return errors


@dataclass(frozen=True)
class Transition:
    """What to do to a managed object whose gone mark changed."""

    #: the status to set (None: leave it)
    set_status: str | None = None
    #: remember this status to restore later ("" : nothing to remember)
    remember: str = ""
    #: raise a deletion request / withdraw the open one
    request: bool = False
    withdraw: bool = False


def on_gone(policy: str, gone_status: str, current_status: str | None, *, asked: bool) -> Transition:
    """The object went: `asked` when the run that marked it asked for its deletion (delete_stale).
    `current_status` is None for objects without a status (interfaces, disks)."""
    set_status = None
    remember = ""
    if policy == STATUS and gone_status and current_status is not None and current_status != gone_status:
        set_status, remember = gone_status, current_status
    return Transition(set_status=set_status, remember=remember, request=asked or policy == REQUEST_DELETION)


def on_return(gone_status: str, current_status: str | None, prior_status: str) -> Transition:
    """The object came back: the status hvsync set is restored unless someone changed it since."""
    restore = prior_status and current_status is not None and current_status == gone_status
    return Transition(set_status=prior_status if restore else None, withdraw=True)
