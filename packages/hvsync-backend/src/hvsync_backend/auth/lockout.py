"""Per-client-IP lockout, in memory: N failed authentications lock the IP for a while; success clears it.

All decisions happen under one lock, so concurrent failures are counted exactly: with a threshold of 5,
the first five failures answer 401 and lock the IP, any later failure (even one that started before the
lock) answers 429.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _State:
    failures: int = 0
    locked_until: float = 0.0


class LockoutTracker:
    def __init__(
        self,
        threshold: int = 5,
        duration: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        max_tracked: int = 100_000,
        on_lock: Callable[[], None] | None = None,
    ) -> None:
        """``on_lock`` is called once each time an IP becomes locked (the backend counts lockouts)."""
        self.on_lock = on_lock
        self.threshold = threshold
        self.duration = duration
        self._clock = clock
        self._states: dict[str, _State] = {}
        self._lock = threading.Lock()
        self._max_tracked = max_tracked

    def retry_after(self, ip: str) -> float | None:
        """Seconds left on the IP's lock, or None when it is not locked (an expired lock is forgotten)."""
        with self._lock:
            return self._remaining(ip)

    def _remaining(self, ip: str) -> float | None:
        state = self._states.get(ip)
        if state is None or state.locked_until == 0.0:
            return None
        left = state.locked_until - self._clock()
        if left <= 0:
            del self._states[ip]
            return None
        return left

    def record_failure(self, ip: str) -> float | None:
        """Count one failure. Returns the seconds left on the lock if the IP is (now or already) locked
        and this failure must be answered 429, None when it is one of the allowed failures (401)."""
        with self._lock:
            left = self._remaining(ip)
            if left is not None:
                return left
            if len(self._states) >= self._max_tracked:
                self._prune()
            state = self._states.setdefault(ip, _State())
            state.failures += 1
            locked = state.failures >= self.threshold
            if locked:
                state.locked_until = self._clock() + self.duration
        if locked and self.on_lock is not None:
            self.on_lock()
        return None

    def record_success(self, ip: str) -> None:
        with self._lock:
            state = self._states.get(ip)
            if state is not None and state.locked_until == 0.0:
                del self._states[ip]

    def failures(self, ip: str) -> int:
        with self._lock:
            state = self._states.get(ip)
            return state.failures if state else 0

    def _prune(self) -> None:
        now = self._clock()
        for ip in [ip for ip, s in self._states.items() if s.locked_until == 0.0 or s.locked_until <= now]:
            del self._states[ip]
