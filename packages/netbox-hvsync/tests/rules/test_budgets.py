"""SPEC 4.5 "Push time budget"."""

import pytest
from netbox_hvsync.rules.budgets import BudgetDecision, PushBudget, RowState, skip_warning


@pytest.mark.parametrize(
    ("elapsed", "state", "decision"),
    [
        (10, RowState.CURRENT, BudgetDecision.PUSH),
        (599.9, RowState.CURRENT, BudgetDecision.PUSH),
        (600, RowState.CURRENT, BudgetDecision.SKIP_SOFT),
        (900, RowState.STALE, BudgetDecision.PUSH),
        (900, RowState.UNKNOWN, BudgetDecision.PUSH),
        (900, RowState.LISTING_FAILED, BudgetDecision.PUSH),
        (1800, RowState.UNKNOWN, BudgetDecision.SKIP_HARD),
        (1800, RowState.LISTING_FAILED, BudgetDecision.SKIP_HARD),
        (2500, RowState.CURRENT, BudgetDecision.SKIP_HARD),
    ],
)
def test_soft_and_hard_limits(elapsed: float, state: RowState, decision: BudgetDecision) -> None:
    """ "PREFLIGHT_ENDPOINT_PUSH_BUDGET is 600 s. Past it, only endpoints whose backend row is already
    current are skipped." "PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING is 1800 s ... Past it all remaining endpoints
    are skipped." "An endpoint unknown to the backend, or whose listing failed, is pushed even past the soft
    budget." """
    assert PushBudget().decide(elapsed, state) is decision


def test_wording_distinguishes_soft_from_hard() -> None:
    """ "with wording that distinguishes soft from hard skips"."""
    budget = PushBudget()
    soft = skip_warning(BudgetDecision.SKIP_SOFT, "hv endpoint 7 (pve)", 612, budget)
    hard = skip_warning(BudgetDecision.SKIP_HARD, "hv endpoint 7 (pve)", 1801, budget)
    assert soft == (
        "hv endpoint 7 (pve): push skipped, soft push budget of 600 s exceeded (612 s elapsed); "
        "its backend row is already current"
    )
    assert "hard push ceiling of 1800 s reached (1801 s elapsed)" in hard
    with pytest.raises(ValueError):
        skip_warning(BudgetDecision.PUSH, "x", 1, budget)
    with pytest.raises(ValueError):
        PushBudget(soft=100, hard=50)
