"""Verification results, remembered under an HMAC of the presented key so bcrypt runs once per key.

The HMAC secret lives only in this process's memory, so the cache (or a dump of it) cannot be used to test
candidate keys offline. A hit maps to a key id and the time the key was last confirmed active in the
database. Misses (presented keys that matched nothing) are remembered together with the set of active key
ids they were checked against, so repeating a wrong key does not buy another bcrypt scan while that set is
unchanged, and a key added by another process is never hidden by an old miss. A key change in this process
drops only that key's hits (``invalidate``) and starts a new generation: a verification that began before
the change cannot put a hit for the changed key back afterwards, while other keys' hits stay (a deactivation
must not send every other key back through bcrypt, nor out of the lockout's cached-key path).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time


class VerificationCache:
    def __init__(self, max_entries: int = 4096) -> None:
        self._secret = os.urandom(32)
        self._hits: dict[bytes, tuple[int, float]] = {}
        self._misses: dict[bytes, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        self._max = max_entries
        #: bumped by every clear() and invalidate(); results computed under an older generation are not
        #: stored when they concern a key changed since (a miss: when anything changed since)
        self.generation = 0
        #: key id -> the generation its last change started
        self._changed_at: dict[int, int] = {}
        #: generation of the last clear(): every hit computed before it is refused
        self._cleared_at = 0

    def fingerprint(self, presented: str) -> bytes:
        return hmac.new(self._secret, presented.encode("utf-8"), hashlib.sha256).digest()

    def get(self, fingerprint: bytes) -> tuple[int, float] | None:
        """``(key_id, confirmed_at)`` for a cached success (``time.monotonic`` clock), else None."""
        return self._hits.get(fingerprint)

    def is_known_miss(self, fingerprint: bytes, active_ids: tuple[int, ...]) -> bool:
        return self._misses.get(fingerprint) == active_ids

    def put(self, fingerprint: bytes, key_id: int, generation: int | None = None) -> None:
        with self._lock:
            if generation is not None and (
                generation < self._cleared_at or generation < self._changed_at.get(key_id, 0)
            ):
                return  # this key changed (or all were cleared) while this result was computed
            if len(self._hits) >= self._max:
                self._hits.clear()
            self._hits[fingerprint] = (key_id, time.monotonic())

    def put_miss(
        self, fingerprint: bytes, active_ids: tuple[int, ...], generation: int | None = None
    ) -> None:
        with self._lock:
            if generation is not None and generation != self.generation:
                return
            if len(self._misses) >= self._max:
                self._misses.clear()
            self._misses[fingerprint] = active_ids

    def drop(self, fingerprint: bytes) -> None:
        with self._lock:
            self._hits.pop(fingerprint, None)

    def invalidate(self, key_id: int) -> None:
        """Key ``key_id`` changed (deactivated, activated, deleted): forget its hits; other keys' hits stay.
        Misses need nothing: each is tied to the set of active ids it was checked against."""
        with self._lock:
            self.generation += 1
            self._changed_at[key_id] = self.generation
            for fingerprint in [f for f, (kid, _) in self._hits.items() if kid == key_id]:
                del self._hits[fingerprint]

    def clear(self) -> None:
        with self._lock:
            self._hits.clear()
            self._misses.clear()
            self.generation += 1
            self._cleared_at = self.generation

    def __len__(self) -> int:
        return len(self._hits)
