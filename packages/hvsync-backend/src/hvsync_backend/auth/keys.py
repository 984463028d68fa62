"""Key lifecycle in the database: bootstrap registration, creation, listing, (de)activation, deletion.

Rules (documented in docs/backend.md):
- register-key works only while the database holds no key; concurrent first registrations yield exactly
  one row (process lock plus a unique ``bootstrap_slot`` column for other processes).
- The API refuses to deactivate or delete the last active key (the backend would be unreachable); the
  local CLI can always create a key, which is the recovery path.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hvsync_backend.auth.cache import VerificationCache
from hvsync_backend.auth.hashing import check_key, generate_key, hash_key
from hvsync_backend.db.models import ApiKey
from hvsync_backend.db.session import session_scope
from hvsync_backend.errors import AlreadyExists, NotFound
from hvsync_backend.wire.numbers import decimal

GENERATED_PREFIX = "hvsk_"


def key_id_hint(presented: str) -> int | None:
    """The id embedded in a generated key (``hvsk_<id>_<random>``); a hint only, never trusted alone."""
    if presented.startswith(GENERATED_PREFIX):
        head = presented[len(GENERATED_PREFIX) :].split("_", 1)[0]
        return decimal(head, high=999_999_999)
    return None


#: A password nobody holds: a wrong ``hvsk_<id>_...`` key naming no active key is checked against a hash
#: of it, so the answer takes as long as when key ``<id>`` exists (its existence does not leak by timing).
_DUMMY_SECRET = "hvsync-no-such-key-" + "0" * 40


def _rounds_of(key_hash: bytes) -> int | None:
    """The cost of a ``$2b$NN$...`` hash (None when it is not one)."""
    parts = key_hash.split(b"$")
    return int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else None


class VerificationBusy(Exception):
    """Every bcrypt slot stayed taken for VERIFY_WAIT seconds: answer 503 and let the client retry."""


#: How long a verification waits for a bcrypt slot before the request is answered 503.
VERIFY_WAIT = 10.0


class LastActiveKey(Exception):
    """The change would leave the backend without any active key."""


@dataclass(frozen=True)
class KeyView:
    id: int
    label: str
    is_active: bool
    created_at: float

    @classmethod
    def of(cls, row: ApiKey) -> KeyView:
        return cls(id=row.id, label=row.label, is_active=row.is_active, created_at=row.created_at)


class KeyStore:
    def __init__(
        self, factory: sessionmaker[Session], bcrypt_rounds: int, cache: VerificationCache, slots: int = 2
    ) -> None:
        self.session_factory = factory
        self._rounds = bcrypt_rounds
        self.cache = cache
        self._mutation_lock = threading.Lock()
        self._bcrypt_slots = threading.BoundedSemaphore(slots)
        self._in_flight: dict[bytes, threading.Lock] = {}
        self._in_flight_guard = threading.Lock()
        self._dummies: dict[int, bytes] = {}

    def _dummy_hash(self, rounds: int) -> bytes:
        """A fixed hash at the cost the stored keys use (made once per cost)."""
        if rounds not in self._dummies:
            self._dummies[rounds] = hash_key(_DUMMY_SECRET, rounds)
        return self._dummies[rounds]

    # --- reads -----------------------------------------------------------------------------------------
    def has_any_key(self) -> bool:
        with self.session_factory() as session:
            return session.execute(select(ApiKey.id).limit(1)).first() is not None

    def list_keys(self) -> list[KeyView]:
        with self.session_factory() as session:
            return [KeyView.of(r) for r in session.scalars(select(ApiKey).order_by(ApiKey.id))]

    def is_active(self, key_id: int) -> bool:
        """One primary-key lookup: keeps a cached verification honest even if another process changed keys."""
        with self.session_factory() as session:
            return bool(session.execute(select(ApiKey.is_active).where(ApiKey.id == key_id)).scalar())

    def verify(self, presented: str) -> int | None:
        """The id of the active key matching ``presented`` (the bcrypt path), remembering hit or miss.

        Candidates: the generated key whose id the presented key names (``hvsk_<id>_...``), plus every key
        not generated here (the bootstrap key, usually the only one). So a valid key costs one bcrypt check
        and a wrong key costs one per candidate, not one per stored key.
        """
        fingerprint = self.cache.fingerprint(presented)
        with self._in_flight_guard:
            same_key = self._in_flight.setdefault(fingerprint, threading.Lock())
        try:
            with same_key:  # concurrent requests with one key: the first computes, the others reuse it
                return self._verify(presented, fingerprint)
        finally:
            with self._in_flight_guard:
                if not same_key.locked():
                    self._in_flight.pop(fingerprint, None)

    def _verify(self, presented: str, fingerprint: bytes) -> int | None:
        generation = self.cache.generation
        cached = self.cache.get(fingerprint)
        if cached is not None and self.is_active(cached[0]):
            return cached[0]
        hinted = key_id_hint(presented)
        with self.session_factory() as session:
            stmt = (
                select(ApiKey.id, ApiKey.key_hash, ApiKey.id_in_key)
                .where(ApiKey.is_active.is_(True))
                .order_by(ApiKey.bootstrap_slot.is_(None), ApiKey.id)
            )
            rows = [(int(r[0]), bytes(r[1]), bool(r[2])) for r in session.execute(stmt)]
        active_ids = tuple(sorted(row[0] for row in rows))
        if self.cache.is_known_miss(fingerprint, active_ids):
            return None
        candidates = [row for row in rows if row[0] == hinted and row[2]]
        if hinted is not None and not candidates:
            # The named key does not exist (or is inactive): spend the same bcrypt check on a dummy.
            rounds = next((r for r in (_rounds_of(row[1]) for row in rows) if r), self._rounds)
            candidates = [(-1, self._dummy_hash(rounds), True)]
        candidates += [row for row in rows if not row[2]]
        if not candidates:
            return None
        if not self._bcrypt_slots.acquire(timeout=VERIFY_WAIT):
            raise VerificationBusy
        try:
            match = next(
                (key_id for key_id, key_hash, _ in candidates if check_key(presented, key_hash)), None
            )
            match = None if match == -1 else match
        finally:
            self._bcrypt_slots.release()
        if match is None:
            self.cache.put_miss(fingerprint, active_ids, generation)
        else:
            self.cache.put(fingerprint, match, generation)
        return match

    # --- writes ----------------------------------------------------------------------------------------
    def register_bootstrap(self, raw_key: str, label: str) -> KeyView:
        with self._mutation_lock:
            if self.has_any_key():
                raise AlreadyExists
            row = ApiKey(
                label=label,
                key_hash=hash_key(raw_key, self._rounds),
                is_active=True,
                created_at=time.time(),
                bootstrap_slot=1,
            )
            try:
                with session_scope(self.session_factory) as session:
                    # Re-check inside the writing transaction for other processes.
                    if session.execute(select(func.count(ApiKey.id))).scalar():
                        raise AlreadyExists
                    session.add(row)
            except IntegrityError as exc:
                raise AlreadyExists from exc
            self.cache.clear()
            self.cache.put(self.cache.fingerprint(raw_key), row.id)
            return KeyView.of(row)

    def create(self, label: str = "", raw_key: str | None = None) -> tuple[KeyView, str]:
        """A new active key. Generated ones embed their id, so verifying them costs one bcrypt check;
        ``raw_key`` (operator-chosen) keys are checked like the bootstrap key."""
        with session_scope(self.session_factory) as session:
            row = ApiKey(
                label=label, key_hash=b"", is_active=True, created_at=time.time(), id_in_key=raw_key is None
            )
            session.add(row)
            session.flush()
            raw = raw_key or f"{GENERATED_PREFIX}{row.id}_{generate_key()}"
            row.key_hash = hash_key(raw, self._rounds)
        # Known valid: its first use needs no bcrypt, and works even from a locked-out address.
        self.cache.put(self.cache.fingerprint(raw), row.id)
        return KeyView.of(row), raw

    def set_active(self, key_id: int, active: bool, allow_no_active: bool = False) -> KeyView:
        with self._mutation_lock, session_scope(self.session_factory) as session:
            row = session.get(ApiKey, key_id, with_for_update=True)
            if row is None:
                raise NotFound
            if not active and row.is_active and not allow_no_active:
                self._ensure_another_active(session, key_id)
            row.is_active = active
            view = KeyView.of(row)
        self.cache.invalidate(key_id)
        return view

    def delete(self, key_id: int, allow_no_active: bool = False) -> None:
        with self._mutation_lock, session_scope(self.session_factory) as session:
            row = session.get(ApiKey, key_id, with_for_update=True)
            if row is None:
                raise NotFound
            if row.is_active and not allow_no_active:
                self._ensure_another_active(session, key_id)
            session.delete(row)
        self.cache.invalidate(key_id)

    @staticmethod
    def _ensure_another_active(session: Session, key_id: int) -> None:
        others = session.execute(
            select(ApiKey.id).where(ApiKey.is_active.is_(True), ApiKey.id != key_id).with_for_update()
        ).first()
        if others is None:
            raise LastActiveKey
