"""Gone from Proxmox, the rules without Django (issue 40): the endpoint's gone settings, what a gone
transition does under each policy, and the mass-vanish guard's failure kind on a stage stream."""

from __future__ import annotations

import pytest
from netbox_hvsync.rules import gone
from netbox_hvsync.rules.failures import APPLICATION, MASS_VANISH
from netbox_hvsync.rules.sse import consume_stage_stream
from test_sse import COUNTS, frame, lines_of

VM_STATUSES = ("offline", "active", "planned", "staged", "failed", "decommissioning", "paused")


@pytest.mark.parametrize(
    ("policy", "status", "share", "fields"),
    [
        ("keep", "", 0.3, set()),
        ("status", "offline", 0.0, set()),
        ("request-deletion", "", 1.0, set()),
        ("status", "", 0.3, {"gone_status"}),
        ("keep", "gone-fishing", 0.3, {"gone_status"}),
        ("delete", "", 0.3, {"gone_policy"}),
        ("keep", "", 1.01, {"gone_guard_share"}),
        ("keep", "", -0.5, {"gone_guard_share"}),
        ("keep", "", None, {"gone_guard_share"}),
    ],
)
def test_gone_settings_are_checked_field_by_field(policy, status, share, fields) -> None:
    assert set(gone.gone_setting_errors(policy, status, share, statuses=VM_STATUSES)) == fields


def test_the_status_policy_sets_and_remembers_then_restores_only_what_it_set() -> None:
    went = gone.on_gone("status", "offline", "active", asked=False)
    assert (went.set_status, went.remember, went.request) == ("offline", "active", False)
    assert gone.on_gone("status", "offline", "offline", asked=False).set_status is None  # already so
    assert gone.on_gone("status", "offline", None, asked=False).set_status is None  # no status field
    assert gone.on_return("offline", "offline", "active") == gone.Transition(
        set_status="active", withdraw=True
    )
    assert gone.on_return("offline", "planned", "active").set_status is None  # changed by someone since
    assert gone.on_return("offline", "offline", "").set_status is None  # hvsync set nothing


def test_deletion_is_requested_by_the_policy_or_by_the_run() -> None:
    assert gone.on_gone("request-deletion", "", "active", asked=False).request is True
    assert gone.on_gone("keep", "", "active", asked=True).request is True
    assert gone.on_gone("keep", "", "active", asked=False) == gone.Transition()


def test_a_stage_the_mass_vanish_guard_stopped_has_its_own_failure_kind() -> None:
    problem = {
        "source": "backend",
        "status": None,
        "detail": "mass-vanish guard: this run would mark 10 of 25 virtual machine objects ... gone",
        "failure_kind": MASS_VANISH,
    }
    base = {
        "stage": "virtual-machines",
        "ok": False,
        "summary": COUNTS,
        "duration_ms": 1.0,
        "errors": [problem],
    }
    guarded = consume_stage_stream(lines_of(frame("complete", 1, {**base, "error": problem})))
    assert guarded.failure_kind == MASS_VANISH and "10 of 25" in guarded.error
    other = consume_stage_stream(
        lines_of(frame("complete", 1, {**base, "error": {**problem, "failure_kind": None}}))
    )
    assert other.failure_kind == APPLICATION
