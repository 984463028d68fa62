"""Batch sizes that follow NetBox's answer times, so a slow NetBox gets smaller writes instead of timeouts.

Additive growth would take long to reach a good size for a 5,000-object list, and a timeout must shrink
at once, so the size doubles while answers come back well inside the target and halves (a quarter after
a timeout) when they do not. The target is a fraction of the client's timeout: an answer near the target
still leaves room for NetBox to slow down before a write times out.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BatchSizer:
    """The size of the next write batch for one write path (REST lists or change sets)."""

    size: int
    ceiling: int
    target_seconds: float
    floor: int = 1
    #: (batch size, seconds) of every answer, for benchmarks and the tests of a slowed NetBox
    history: list[tuple[int, float]] = field(default_factory=list)

    def take(self, remaining: int) -> int:
        return max(1, min(self.size, remaining))

    def answered(self, size: int, seconds: float) -> None:
        """Grow after a quick answer to a full batch, shrink after a slow one."""
        self.history.append((size, round(seconds, 3)))
        if seconds > self.target_seconds:
            self.size = max(self.floor, min(self.size, size) // 2)
        elif seconds < self.target_seconds / 2 and size >= self.size:
            self.size = min(self.ceiling, self.size * 2)

    def timed_out(self, size: int) -> None:
        """No answer at all: the next batches are a quarter of this one."""
        self.history.append((size, -1.0))
        self.size = max(self.floor, min(self.size, size) // 4)
