"""Batch sizes that follow NetBox's answer times, so a slow NetBox gets smaller writes instead of timeouts.

Additive growth would take long to reach a good size for a 5,000-object list, and a timeout must shrink
at once, so the size doubles while answers come back well inside the target and halves (a quarter after
a timeout) when they do not. The target is a fraction of the client's timeout: an answer near the target
still leaves room for NetBox to slow down before a write times out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


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


#: Paths whose objects NetBox sums into a parent inside each transaction: a VM's `disk` is recomputed from
#: the disks that transaction sees. Two batches writing disks of one VM at once each write their own sum,
#: the later commit wins, and NetBox then refuses that VM's next save ("disk size must match the
#: aggregate"). So a parent's children always travel in one batch (creates, updates and deletes alike),
#: and a stage writes such a path's creates, updates and deletes one after another (sync/framework.py).
SUMMED_INTO_PARENT = {"virtualization/virtual-disks": "virtual_machine"}


def _key(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("id", value.get("$ref"))
    return None if value is None else str(value)


def parent_keys(
    path: str, items: Sequence[Mapping[str, Any]], parents: Sequence[Any] | None = None
) -> list[str | None]:
    """The parent NetBox sums each item into (None: none, or a path that sums nothing). A create names
    its parent; an update or a delete does not, so its caller gives `parents` (the objects as read)."""
    link = SUMMED_INTO_PARENT.get(path)
    if link is None:
        return [None] * len(items)
    if parents is not None:
        return [_key(parent) for parent in parents]
    return [_key(item.get(link)) for item in items]


def grouped_order(keys: Sequence[str | None]) -> list[int]:
    """The order to write items with these parent keys in: the children of one parent next to each
    other, everything else as given (a stable sort, so the first child of each parent keeps its place)."""
    first: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key is not None:
            first.setdefault(key, index)

    def place(index: int) -> int:
        key = keys[index]
        return index if key is None else first[key]

    return sorted(range(len(keys)), key=place)


def batch_end(keys: Sequence[str | None], start: int, size: int) -> int:
    """Where the batch that starts at `start` ends: after at most `size` items, earlier when that would
    split the children of one parent (`keys` in `grouped_order`). Only a parent whose children alone
    outnumber `size` makes a longer batch."""
    end = min(len(keys), start + size)
    if end >= len(keys):
        return end
    parent = keys[end]
    if parent is None or parent != keys[end - 1]:
        return end
    back = end
    while back > start and keys[back - 1] == parent:
        back -= 1
    if back > start:
        return back
    while end < len(keys) and keys[end] == parent:
        end += 1
    return end
