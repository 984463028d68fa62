"""Preflight push time budget (SPEC 4.5 "Push time budget").

Past the soft budget (600 s) only endpoints whose backend row is already current are skipped; an
endpoint unknown to the backend, or whose listing failed, or whose row is stale, is still pushed.
Past the hard ceiling (1800 s) every remaining endpoint is skipped. Each skip is worded so soft and
hard skips are told apart in the runtime phase, the job log and the preflight hint.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .constants import PREFLIGHT_ENDPOINT_PUSH_BUDGET, PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING


class RowState(StrEnum):
    """What the backend's listing says about an endpoint before it is pushed."""

    CURRENT = "current"
    STALE = "stale"
    UNKNOWN = "unknown"  # no row claims the endpoint
    LISTING_FAILED = "listing_failed"


class BudgetDecision(StrEnum):
    PUSH = "push"
    SKIP_SOFT = "skip_soft"
    SKIP_HARD = "skip_hard"


@dataclass(frozen=True)
class PushBudget:
    soft: float = PREFLIGHT_ENDPOINT_PUSH_BUDGET
    hard: float = PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING

    def __post_init__(self) -> None:
        if not 0 < self.soft <= self.hard:
            raise ValueError("push budget: need 0 < soft <= hard")

    def decide(self, elapsed: float, state: RowState) -> BudgetDecision:
        if elapsed >= self.hard:
            return BudgetDecision.SKIP_HARD
        if elapsed >= self.soft and state is RowState.CURRENT:
            return BudgetDecision.SKIP_SOFT
        return BudgetDecision.PUSH


def skip_warning(decision: BudgetDecision, endpoint_label: str, elapsed: float, budget: PushBudget) -> str:
    """Wording for the job log and the preflight hint; it says which limit caused the skip."""
    if decision is BudgetDecision.SKIP_SOFT:
        return (
            f"{endpoint_label}: push skipped, soft push budget of {budget.soft:.0f} s exceeded "
            f"({elapsed:.0f} s elapsed); its backend row is already current"
        )
    if decision is BudgetDecision.SKIP_HARD:
        return (
            f"{endpoint_label}: push skipped, hard push ceiling of {budget.hard:.0f} s reached "
            f"({elapsed:.0f} s elapsed); the backend row may be stale"
        )
    raise ValueError("only skip decisions have a warning")
