"""Lockout, in memory: failed authentications per client IP in a sliding window, plus a global budget.

- Per IP: ``threshold`` failures within the last ``window`` seconds lock the IP for ``duration`` seconds.
  Failures older than the window age out one by one. A success from an IP that is not locked clears its
  failures (SPEC 3.1); a locked IP stays locked until the lock expires (or the process restarts).
- Global: at most ``global_budget`` failures from all IPs together within the window. Once spent, keys
  that would need a bcrypt check are not checked from any IP until the oldest failure ages out, so many
  addresses guessing in parallel get no more guesses than the budget.

A lock only slows guessing, it does not deny the owner: the caller lets keys it already verified (the
verification cache) through from a locked IP; only keys that would need checking are refused there.

All decisions happen under one lock, so concurrent failures are counted exactly: with a threshold of 5,
the first five failures answer 401 and lock the IP, any later failure (even one that started before the
lock) answers 429.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class _State:
    failures: deque[float] = field(default_factory=deque)
    locked_until: float = 0.0


class LockoutTracker:
    def __init__(
        self,
        threshold: int = 5,
        duration: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        max_tracked: int = 100_000,
        on_lock: Callable[[], None] | None = None,
        window: float | None = None,
        global_budget: int = 50,
    ) -> None:
        """``window`` defaults to ``duration``; ``on_lock`` is called once each time an IP becomes locked."""
        self.on_lock = on_lock
        self.threshold = threshold
        self.duration = duration
        self.window = duration if window is None else window
        self.global_budget = global_budget
        self._clock = clock
        self._states: dict[str, _State] = {}
        self._global: deque[float] = deque()
        self._lock = threading.Lock()
        self._max_tracked = max_tracked

    def retry_after(self, ip: str) -> float | None:
        """Seconds left on the IP's lock, or None when it is not locked (an expired lock is forgotten)."""
        with self._lock:
            return self._remaining(ip)

    def global_retry_after(self) -> float | None:
        """Seconds until the global budget has room again, or None when it has room now."""
        with self._lock:
            return self._global_remaining(self._clock())

    def _global_remaining(self, now: float) -> float | None:
        while self._global and self._global[0] <= now - self.window:
            self._global.popleft()
        if len(self._global) < self.global_budget:
            return None
        return self._global[0] + self.window - now

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
            now = self._clock()
            if len(self._states) >= self._max_tracked:
                self._prune(now)
            state = self._states.setdefault(ip, _State())
            while state.failures and state.failures[0] <= now - self.window:
                state.failures.popleft()
            state.failures.append(now)
            self._global.append(now)
            self._global_remaining(now)  # ages the global window out
            locked = len(state.failures) >= self.threshold
            if locked:
                state.locked_until = now + self.duration
        if locked and self.on_lock is not None:
            self.on_lock()
        return None

    def record_success(self, ip: str) -> None:
        """A success clears an unlocked IP's failures (SPEC 3.1); it never lifts a lock."""
        with self._lock:
            state = self._states.get(ip)
            if state is not None and state.locked_until == 0.0:
                del self._states[ip]

    def failures(self, ip: str) -> int:
        """Failures of the IP within the window."""
        with self._lock:
            state = self._states.get(ip)
            if state is None:
                return 0
            horizon = self._clock() - self.window
            return sum(1 for t in state.failures if t > horizon)

    def _prune(self, now: float) -> None:
        horizon = now - self.window
        for ip in [
            ip
            for ip, s in self._states.items()
            if (s.locked_until == 0.0 and (not s.failures or s.failures[-1] <= horizon))
            or (s.locked_until != 0.0 and s.locked_until <= now)
        ]:
            del self._states[ip]
        if len(self._states) >= self._max_tracked:  # still full of live IPs: forget the unlocked ones
            for ip in [ip for ip, s in self._states.items() if s.locked_until == 0.0]:
                del self._states[ip]
