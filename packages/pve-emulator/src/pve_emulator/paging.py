"""Paged list answers: what a backend returns when Proxmox reports how many items matched in all.

Neutral ground between the state model (which counts) and the HTTP layer (which sends ``total`` beside
``data`` on the real paths), so neither has to import the other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Counted"]


class Counted(list[Any]):
    """A list answer with Proxmox's ``total`` result attribute (task list, task log): the number of
    matching items before ``start``/``limit`` cut the page, sent beside ``data`` on the real paths."""

    def __init__(self, items: list[Any], total: int) -> None:
        super().__init__(items)
        self.total = total
