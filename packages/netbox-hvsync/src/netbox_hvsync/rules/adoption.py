"""Plugin-to-backend key adoption, fail closed (SPEC 5.1.8, 5.2).

`verify_candidate` runs the SPEC 5.2.3 sequence over a transport that refuses redirects: GET / and
GET /health without credentials, GET /auth/bootstrap-status, then either one POST /auth/register-key
(only while the backend needs bootstrap; 201 expected, 409 is a failure) or GET /auth/keys with the
candidate (200 expected). `plan_key_save` decides, before any network call, what a save of the backend
endpoint record must do. No message ever contains the key.
"""

from __future__ import annotations

import secrets as secrets_module
import string
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from .constants import (
    API_KEY_HEADER,
    BACKEND_ENDPOINT_PUSH_TIMEOUT,
    BOOTSTRAP_STATUS_TIMEOUT,
    GENERATED_TOKEN_LENGTH,
    HEALTH_WAIT_BUDGET,
    MAX_BACKEND_KEY_LENGTH,
    MIN_BACKEND_KEY_LENGTH,
    REGISTER_KEY_TIMEOUT,
)
from .failures import TRANSPORT, classify_answer
from .proofs import proof_is_fresh
from .redaction import redacted_detail, sweep_text
from .transport import BackendContext, JsonAnswer, Transport, TransportError, call
from .urls import CanonicalTarget

REGISTER_LABEL = "netbox-hvsync"
_KEY_ALPHABET = frozenset(string.ascii_letters + string.digits + "-_.~+/=")


class CandidateError(ValueError):
    """A candidate key that must not be sent anywhere; `field` names the form/REST field."""

    def __init__(self, message: str, field: str = "token") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def generate_token() -> str:
    """A 64-character key from the OS CSPRNG (SPEC 5.1.8, 8); it must be encrypted and stored before use."""
    token = secrets_module.token_hex(GENERATED_TOKEN_LENGTH // 2)
    assert len(token) == GENERATED_TOKEN_LENGTH
    return token


def validate_candidate(candidate: str, field: str = "token") -> str:
    """Refuse keys the backend would refuse or that could inject headers; the message never echoes it."""
    if not isinstance(candidate, str) or not candidate:
        raise CandidateError("a key is required", field)
    if len(candidate) < MIN_BACKEND_KEY_LENGTH:
        raise CandidateError(f"must be at least {MIN_BACKEND_KEY_LENGTH} characters", field)
    if len(candidate) > MAX_BACKEND_KEY_LENGTH:
        raise CandidateError(f"must be at most {MAX_BACKEND_KEY_LENGTH} characters", field)
    if not set(candidate) <= _KEY_ALPHABET:
        raise CandidateError("may contain only letters, digits and - _ . ~ + / =", field)
    return candidate


class AdoptionAction(StrEnum):
    REGISTERED = "registered"  # bootstrap: the backend had no key and now holds this one
    VERIFIED = "verified"  # the backend already knew this key


@dataclass(frozen=True)
class AdoptionOutcome:
    ok: bool
    action: AdoptionAction | None = None
    step: str = ""
    status: int | None = None
    error: str = ""
    failure_kind: str | None = None


def _fail(step: str, answer: JsonAnswer | None, message: str, candidate: str) -> AdoptionOutcome:
    hidden = (candidate,)
    if answer is None:
        return AdoptionOutcome(False, step=step, error=sweep_text(message, hidden), failure_kind=TRANSPORT)
    if answer.is_redirect:
        text = f"{step}: redirect refused (HTTP {answer.status})"
    elif answer.is_json:
        text = (
            f"{step}: {message} (HTTP {answer.status}: {redacted_detail(answer.body, answer.text, hidden)})"
        )
    else:
        text = f"{step}: {message} (HTTP {answer.status}, non-JSON body)"
    return AdoptionOutcome(
        False,
        step=step,
        status=answer.status,
        error=sweep_text(text, hidden),
        failure_kind=classify_answer(answer),
    )


def _get(
    transport: Transport, base: str, path: str, headers: Mapping[str, str], timeout: float
) -> JsonAnswer:
    return call(
        transport, "GET", base + path, headers={"Accept": "application/json", **headers}, timeout=timeout
    )


def verify_candidate(transport: Transport, target: CanonicalTarget, candidate: str) -> AdoptionOutcome:
    """Run the verification sequence once; any rejection or transport failure is a failed outcome and
    the caller keeps the previously stored value (SPEC 5.2.7)."""
    validate_candidate(candidate)
    base = target.base_url
    step = "GET /"
    try:
        answer = _get(transport, base, "/", {}, BACKEND_ENDPOINT_PUSH_TIMEOUT)
        if answer.status != 200 or not isinstance(answer.body, Mapping):
            return _fail(step, answer, "the target did not identify itself as a backend", candidate)
        step = "GET /health"
        answer = _get(transport, base, "/health", {}, BACKEND_ENDPOINT_PUSH_TIMEOUT)
        if answer.status != 200:
            return _fail(step, answer, "the backend is not ready", candidate)
        step = "GET /auth/bootstrap-status"
        answer = _get(transport, base, "/auth/bootstrap-status", {}, BOOTSTRAP_STATUS_TIMEOUT)
        needs = answer.body.get("needs_bootstrap") if isinstance(answer.body, Mapping) else None
        if answer.status != 200 or not isinstance(needs, bool):
            return _fail(step, answer, "unexpected bootstrap status answer", candidate)
        if needs:
            step = "POST /auth/register-key"
            answer = call(
                transport,
                "POST",
                base + "/auth/register-key",
                headers={"Accept": "application/json"},
                json={"api_key": candidate, "label": REGISTER_LABEL},
                timeout=REGISTER_KEY_TIMEOUT,
            )
            if answer.status == 201:
                return AdoptionOutcome(True, AdoptionAction.REGISTERED, step, 201)
            if answer.status == 409:
                return _fail(
                    step, answer, "the backend already holds a key; a 409 is not adoption", candidate
                )
            return _fail(step, answer, "key registration was refused", candidate)
        return _check_keys(transport, base, candidate)
    except TransportError as exc:
        return _fail(step, None, f"{step}: backend unreachable ({exc.kind}): {exc}", candidate)


def _check_keys(transport: Transport, base: str, key: str) -> AdoptionOutcome:
    step = "GET /auth/keys"
    answer = _get(transport, base, "/auth/keys", {API_KEY_HEADER: key}, BACKEND_ENDPOINT_PUSH_TIMEOUT)
    if answer.status == 200:
        return AdoptionOutcome(True, AdoptionAction.VERIFIED, step, 200)
    reasons = {
        401: "the backend rejected the key",
        429: "this client is locked out after failed attempts",
        503: "the backend has no key configured",
    }
    return _fail(step, answer, reasons.get(answer.status, "the key could not be verified"), key)


def verify_failover_address(transport: Transport, base_url: str, key: str) -> AdoptionOutcome:
    """Before the adopted key first goes to another address of its backend (the failover IP, issue 39):
    the address must identify itself as an hvsync backend (GET /), be initialised (a backend that still
    needs bootstrap never adopted this key: nothing is registered there) and accept the key (GET
    /auth/keys). The key travels only in the last step, as in SPEC 5.2.3."""
    base = base_url.rstrip("/")
    step = "GET /"
    try:
        answer = _get(transport, base, "/", {}, BACKEND_ENDPOINT_PUSH_TIMEOUT)
        if answer.status != 200 or not isinstance(answer.body, Mapping):
            return _fail(step, answer, "the address did not identify itself as a backend", key)
        step = "GET /auth/bootstrap-status"
        answer = _get(transport, base, "/auth/bootstrap-status", {}, BOOTSTRAP_STATUS_TIMEOUT)
        needs = answer.body.get("needs_bootstrap") if isinstance(answer.body, Mapping) else None
        if answer.status != 200 or needs is not False:
            return _fail(step, answer, "not the initialised backend that adopted the key", key)
        return _check_keys(transport, base, key)
    except TransportError as exc:
        return _fail(step, None, f"{step}: backend unreachable ({exc.kind}): {exc}", key)


def recheck_stored_key(transport: Transport, target: CanonicalTarget, key: str) -> AdoptionOutcome:
    """After a 401 during a stage: read-only re-check of the stored key (SPEC 5.2.10). No substitute key,
    no bootstrap: only GET /auth/keys."""
    try:
        return _check_keys(transport, target.base_url, key)
    except TransportError as exc:
        return _fail("GET /auth/keys", None, f"GET /auth/keys: backend unreachable ({exc.kind}): {exc}", key)


def ensure_key_registered(transport: Transport, ctx: BackendContext) -> str | None:
    """Preflight step 3: the stored key (already encrypted in the plugin) is known to the backend, or is
    registered while the backend still needs bootstrap. Returns a warning on failure, None when fine."""
    base = ctx.base_url.rstrip("/")
    try:
        answer = _get(transport, base, "/auth/bootstrap-status", {}, BOOTSTRAP_STATUS_TIMEOUT)
        needs = answer.body.get("needs_bootstrap") if isinstance(answer.body, Mapping) else None
        if answer.status != 200 or not isinstance(needs, bool):
            return _fail(
                "GET /auth/bootstrap-status", answer, "unexpected bootstrap status answer", ctx.api_key
            ).error
        if needs:
            answer = call(
                transport,
                "POST",
                base + "/auth/register-key",
                headers={"Accept": "application/json"},
                json={"api_key": ctx.api_key, "label": REGISTER_LABEL},
                timeout=REGISTER_KEY_TIMEOUT,
            )
            if answer.status == 201:
                return None
            return _fail("POST /auth/register-key", answer, "key registration was refused", ctx.api_key).error
        outcome = _check_keys(transport, base, ctx.api_key)
        return None if outcome.ok else outcome.error
    except TransportError as exc:
        return sweep_text(f"backend key check: backend unreachable ({exc.kind}): {exc}", (ctx.api_key,))


def wait_for_health(
    transport: Transport,
    ctx: BackendContext,
    *,
    budget: float = HEALTH_WAIT_BUDGET,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    interval: float = 0.5,
) -> bool:
    """Preflight step 2: poll GET /health until it answers 200 or the short budget runs out."""
    deadline = clock() + budget
    for _ in range(int(budget / interval) + 2):  # bounded even if the clock misbehaves
        remaining = deadline - clock()
        if remaining <= 0:
            return False
        try:
            answer = _get(transport, ctx.base_url.rstrip("/"), "/health", {}, min(remaining, 5.0))
            if answer.status == 200:
                return True
        except TransportError:
            pass
        if deadline - clock() <= interval:
            return False
        sleep(interval)
    return False


class KeyPlanAction(StrEnum):
    STORE_KEYLESS = "store_keyless"  # new disabled row without a key: no request
    STORE_PENDING_CANDIDATE = (
        "store_pending_candidate"  # disabled row given a key: stored pending, no request
    )
    VERIFY_CANDIDATE = "verify_candidate"  # explicit candidate: verify before persistence
    PENDING_GENERATED = (
        "pending_generated"  # persist an encrypted generated candidate, auto-configure after commit
    )
    REVERIFY_STORED = (
        "reverify_stored"  # enabled or re-targeted: stored key must be accepted by the new target
    )
    KEEP = "keep"  # nothing security-relevant changed, or the proof is still fresh


@dataclass(frozen=True)
class BackendEndpointState:
    """The security-relevant part of a backend endpoint row."""

    enabled: bool
    target: CanonicalTarget
    verify_ssl: bool
    has_key: bool = False
    proof: str | None = None
    adopted: bool = True  # False while the stored key is pending or was refused by this target


@dataclass(frozen=True)
class KeyPlan:
    action: KeyPlanAction
    network_before_persist: bool
    network_after_commit: bool
    reason: str


def plan_key_save(
    previous: BackendEndpointState | None,
    new: BackendEndpointState,
    candidate: str | None,
    *,
    proof_key: bytes,
    stored_key: str | None = None,
) -> KeyPlan:
    """What a save must do (SPEC 5.2.1, 5.2.2, 5.2.6, 5.2.8, 5.2.9, 5.2.11); never does it itself.

    A blank or None candidate counts as omitted and preserves the stored key."""
    explicit = candidate if candidate else None
    if explicit is not None:
        validate_candidate(explicit)
    if not new.enabled:
        if explicit is not None:
            return KeyPlan(
                KeyPlanAction.STORE_PENDING_CANDIDATE, False, False, "disabled rows make no request"
            )
        if previous is None:
            return KeyPlan(KeyPlanAction.STORE_KEYLESS, False, False, "a new disabled row is stored keyless")
        return KeyPlan(KeyPlanAction.KEEP, False, False, "disabled rows make no request")
    if explicit is not None:
        if proof_is_fresh(new.proof, proof_key, explicit, new.target, new.verify_ssl):
            return KeyPlan(KeyPlanAction.KEEP, False, False, "the proof for this key and target is fresh")
        return KeyPlan(
            KeyPlanAction.VERIFY_CANDIDATE, True, False, "an explicit key is verified before persistence"
        )
    if stored_key is None or not new.has_key:
        return KeyPlan(
            KeyPlanAction.PENDING_GENERATED,
            False,
            True,
            "no key: store a generated candidate encrypted, then configure",
        )
    changed = (
        previous is None
        or not previous.enabled
        or not previous.adopted  # saving again is how an operator retries a pending or refused key
        or previous.target != new.target
        or previous.verify_ssl != new.verify_ssl
    )
    if changed and not proof_is_fresh(new.proof, proof_key, stored_key, new.target, new.verify_ssl):
        return KeyPlan(
            KeyPlanAction.REVERIFY_STORED,
            False,
            True,
            "the stored key must be accepted by the newly persisted target",
        )
    return KeyPlan(KeyPlanAction.KEEP, False, False, "nothing security-relevant changed")


#: Backend endpoint fields whose change is security-sensitive (SPEC 5.2.8 optimistic snapshot).
SECURITY_FIELDS = ("enabled", "url", "ip_address", "port", "verify_ssl", "key_ciphertext", "key_fingerprint")


def security_snapshot(row: Mapping[str, object]) -> dict[str, object]:
    """What a security-sensitive save remembers before it talks to the backend."""
    return {name: row.get(name) for name in SECURITY_FIELDS if name in row}


def snapshot_conflicts(expected: Mapping[str, object], locked_row: Mapping[str, object]) -> list[str]:
    """Fields that changed between the snapshot and the row re-read under the row lock. A non-empty result
    means another save won the race: the caller must not persist its adoption result (SPEC 5.2.8)."""
    return sorted(name for name, value in expected.items() if locked_row.get(name) != value)
