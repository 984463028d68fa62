"""The emulator's notion of "now" for credential lifetimes, movable by tests.

Tickets, CSRF prevention tokens and the ``expire`` of users and API tokens are judged against this
clock, so a test can age a session by two hours with ``pve.clock.advance(7200)`` instead of sleeping.
It is wall time plus an offset; nothing patches :func:`time.time` for the rest of the process, and no
HTTP route can move it.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Clock:
    """Seconds since the epoch as the emulator sees them: ``source()`` plus a test-set offset."""

    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self.offset = 0.0

    def now(self) -> float:
        return self._source() + self.offset

    def advance(self, seconds: float) -> float:
        """Move the emulator's time forward (negative: back) and return the new now."""
        self.offset += seconds
        return self.now()

    def reset(self) -> None:
        self.offset = 0.0
