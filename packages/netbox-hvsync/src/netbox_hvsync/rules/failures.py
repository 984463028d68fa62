"""Failure classification, attempt records, retry policy, status propagation and the composed
primary cause (SPEC 6.2, 6.3, 7.3).

`application`: the backend authored the answer (a completed stream with `ok` false, any JSON error body
including a 5xx, an unparseable `complete` frame, a missing backend URL). `transport`: no
backend-authored body arrived (connection, TLS, timeout, refused redirect, stream ended without
`complete`, non-JSON gateway page, backend still bootstrapping).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .constants import ATTEMPT_LINE_LIMIT
from .transport import JsonAnswer

APPLICATION: Final = "application"
TRANSPORT: Final = "transport"
#: the backend's mass-vanish guard stopped the stage (an application answer a person must look at: a
#: run would have marked too many of an endpoint's objects gone from Proxmox at once; docs/sync.md)
MASS_VANISH: Final = "mass_vanish"
FAILURE_KINDS = (APPLICATION, TRANSPORT, MASS_VANISH)

#: Statuses an unstamped payload falls back to as transport-level (SPEC 7.3).
GATEWAY_STATUSES = frozenset({502, 503, 504})

_TRANSPORT_PHRASES = re.compile(
    r"(?i)connection (?:refused|reset|aborted|error)|could not connect|unreachable|timed? ?out|timeout|"
    r"\btls\b|\bssl\b|certificate|redirect refused|name or service not known|"
    r"stream ended without|non-json|bad gateway|gateway time|still bootstrapping"
)


def is_bootstrapping_answer(answer: JsonAnswer) -> bool:
    """A backend with no key configured answers 503 naming register-key: it is not ready yet."""
    if answer.status != 503 or not isinstance(answer.body, Mapping):
        return False
    detail = str(answer.body.get("detail", "")).lower()
    return "register-key" in detail or "no api key" in detail


def classify_answer(answer: JsonAnswer) -> str:
    """Kind of a failed HTTP answer: JSON of any shape is application, except a bootstrapping backend."""
    if answer.is_redirect or not answer.is_json:
        return TRANSPORT
    if is_bootstrapping_answer(answer):
        return TRANSPORT
    return APPLICATION


def classify_payload(payload: Mapping[str, Any]) -> str:
    """Kind of a recorded failure payload: the stamped `failure_kind` outranks phrases in the text;
    only unstamped payloads fall back to cause text, then to statuses 502, 503, 504."""
    stamped = payload.get("failure_kind")
    if stamped in FAILURE_KINDS:
        return str(stamped)
    cause = " ".join(str(payload.get(key) or "") for key in ("error", "detail", "message", "cause"))
    if _TRANSPORT_PHRASES.search(cause):
        return TRANSPORT
    status = payload.get("status")
    if isinstance(status, int) and status in GATEWAY_STATUSES:
        return TRANSPORT
    return APPLICATION


def stamp(payload: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Copy of a failed stage payload stamped with its `failure_kind`."""
    if kind not in FAILURE_KINDS:
        raise ValueError(f"failure_kind must be one of {FAILURE_KINDS}, not {kind!r}")
    return {**payload, "failure_kind": kind}


def should_retry(status: int | None) -> bool:
    """Retries happen only for statuses of 500 and above (SPEC 7.3, 8)."""
    return status is not None and status >= 500


@dataclass(frozen=True)
class StatusDecision:
    status: int
    retry: bool
    recheck_key: bool


def propagate_status(backend_status: int | None) -> StatusDecision:
    """The plugin returns the backend's actual status (503 only when none is known); a 401 asks for a
    read-only re-check of the stored key, never a substitute key or a bootstrap."""
    status = backend_status if backend_status is not None else 503
    return StatusDecision(
        status=status, retry=should_retry(backend_status), recheck_key=backend_status == 401
    )


@dataclass(frozen=True)
class AttemptRecord:
    """One failed stage attempt (SPEC 6.3): number, HTTP status, redacted detail, kind, elapsed time."""

    attempt: int
    status: int | None
    detail: str
    failure_kind: str
    elapsed_s: float
    bootstrapping: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "status": self.status,
            "detail": self.detail,
            "failure_kind": self.failure_kind,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def primary_attempt(attempts: Sequence[AttemptRecord]) -> AttemptRecord:
    """The first application-level failure; if all are transport-level, the final attempt."""
    if not attempts:
        raise ValueError("no attempts to choose from")
    for attempt in attempts:
        if attempt.failure_kind == APPLICATION:
            return attempt
    return attempts[-1]


def _bounded(text: str, limit: int = ATTEMPT_LINE_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _describe(attempt: AttemptRecord) -> str:
    status = f"HTTP {attempt.status}" if attempt.status is not None else "no HTTP status"
    return f"{status} ({attempt.failure_kind}): {attempt.detail}"


def compose_primary_cause(attempts: Sequence[AttemptRecord], *, what: str = "stage") -> str:
    """One message for the job error and the raised error alike: the primary cause first, then one
    bounded line per divergent other attempt; identical failures collapse into one line."""
    primary = primary_attempt(attempts)
    lines = [f"{what} failed after {len(attempts)} attempt(s): {_describe(primary)}"]
    seen = {(primary.status, primary.failure_kind, primary.detail)}
    for attempt in attempts:
        key = (attempt.status, attempt.failure_kind, attempt.detail)
        if key in seen:
            continue
        seen.add(key)
        lines.append(_bounded(f"attempt {attempt.attempt}: {_describe(attempt)}"))
    return "\n".join(lines)


def readiness_advisory(attempts: Sequence[AttemptRecord]) -> str | None:
    """Evaluated over all attempts, not just the last: say so when the backend was not ready."""
    not_ready = [a for a in attempts if a.bootstrapping or a.failure_kind == TRANSPORT]
    if not not_ready:
        return None
    if any(a.bootstrapping for a in not_ready):
        return (
            f"backend was still bootstrapping on {len(not_ready)} of {len(attempts)} attempt(s); "
            "register a key or wait for it to become ready"
        )
    return f"backend was unreachable or not ready on {len(not_ready)} of {len(attempts)} attempt(s)"


@dataclass(frozen=True)
class CandidateFailure:
    """A failure seen while trying one address candidate (hostname or IP) of the backend."""

    candidate: str
    failure_kind: str
    detail: str
    status: int | None = None


def select_candidate_failure(failures: Sequence[CandidateFailure]) -> CandidateFailure:
    """The first backend-authored failure; the last transport failure only if none reached the backend."""
    if not failures:
        raise ValueError("no candidate failures")
    for failure in failures:
        if failure.failure_kind == APPLICATION:
            return failure
    return failures[-1]


@dataclass
class AttemptLog:
    """Attempts of one stage, grouped in failure-selection epochs (SPEC 5.2.10: a successful key
    rebind starts a new epoch, so failures before it no longer select the primary cause)."""

    epochs: list[list[AttemptRecord]] = field(default_factory=lambda: [[]])

    def record(self, attempt: AttemptRecord) -> None:
        self.epochs[-1].append(attempt)

    def start_epoch(self) -> None:
        if self.epochs[-1]:
            self.epochs.append([])

    @property
    def current(self) -> list[AttemptRecord]:
        return self.epochs[-1]

    def all_attempts(self) -> list[AttemptRecord]:
        return [a for epoch in self.epochs for a in epoch]

    def composed_message(self, *, what: str = "stage") -> str:
        return compose_primary_cause(self.current or self.all_attempts(), what=what)


def missing_backend_url_failure() -> dict[str, Any]:
    """A missing backend URL is an application failure (SPEC 6.2): configuration, not the network."""
    return {
        "ok": False,
        "error": "backend URL is not configured",
        "status": None,
        "failure_kind": APPLICATION,
    }


def stamp_all(payloads: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stamp every unstamped failed payload with its classified kind (idempotent for stamped ones)."""
    return [stamp(p, classify_payload(p)) for p in payloads]
