"""SPEC 5.1.8 and 5.2 "Plugin to backend key adoption (fail closed)"."""

import json
from dataclasses import replace

import pytest
from fakes import FakeResponse, FakeTransport, refused
from netbox_hvsync.rules.adoption import (
    AdoptionAction,
    BackendEndpointState,
    CandidateError,
    KeyPlanAction,
    ensure_key_registered,
    generate_token,
    plan_key_save,
    recheck_stored_key,
    validate_candidate,
    verify_candidate,
)
from netbox_hvsync.rules.proofs import issue_proof
from netbox_hvsync.rules.transport import BackendContext
from netbox_hvsync.rules.urls import canonicalize_target

CANDIDATE = "cand" + "0123456789abcdef" * 3 + "planted"
TARGET = canonicalize_target("https://backend.example:8800")
PROOF_KEY = b"proof-key"


def backend(needs_bootstrap: bool, **routes) -> FakeTransport:
    t = FakeTransport()
    t.on("GET", "/", FakeResponse(200, {"service": "hvsync-backend"}))
    t.on("GET", "/health", FakeResponse(200, {"ready": True}))
    t.on(
        "GET",
        "/auth/bootstrap-status",
        FakeResponse(200, {"needs_bootstrap": needs_bootstrap, "has_db_keys": not needs_bootstrap}),
    )
    t.on("POST", "/auth/register-key", FakeResponse(201, {"detail": "API key registered"}))
    t.on("GET", "/auth/keys", FakeResponse(200, {"keys": [{"id": 1, "label": "", "is_active": True}]}))
    for key, value in routes.items():
        method, _, path = key.partition(" ")
        t.on(method, path, value)
    return t


def test_generated_token() -> None:
    """SPEC 5.1.8 / 8: "it generates a 64-character token"."""
    tokens = {generate_token() for _ in range(20)}
    assert len(tokens) == 20 and all(len(t) == 64 for t in tokens)
    assert all(validate_candidate(t) == t for t in tokens)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "required"),
        ("short", "at least 32"),
        ("x" * 600, "at most"),
        ("a" * 40 + "\r\nX-Evil: 1", "may contain only"),
    ],
)
def test_bad_candidates_name_the_field_and_never_echo(value: str, why: str) -> None:
    with pytest.raises(CandidateError) as info:
        validate_candidate(value)
    assert info.value.field == "token" and why in str(info.value)
    if value:
        assert value not in str(info.value)


def test_bootstrap_registers_once() -> None:
    """SPEC 5.2.3: "GET / and GET /health without credentials; GET /auth/bootstrap-status. If
    needs_bootstrap is true, POST /auth/register-key once with the candidate (expect 201)." 5.2.4: every
    request rejects redirects."""
    t = backend(True)
    outcome = verify_candidate(t, TARGET, CANDIDATE)
    assert outcome.ok and outcome.action is AdoptionAction.REGISTERED and outcome.status == 201
    assert t.paths() == ["GET /", "GET /health", "GET /auth/bootstrap-status", "POST /auth/register-key"]
    assert all("X-Service-API-Key" not in c.headers for c in t.calls)
    assert t.calls[-1].json == {"api_key": CANDIDATE, "label": "netbox-hvsync"}
    assert all(c.allow_redirects is False and c.timeout > 0 for c in t.calls)
    assert all(c.url.startswith("https://backend.example:8800/") for c in t.calls)


def test_initialised_backend_checks_keys_and_never_bootstraps() -> None:
    """SPEC 5.2.3: "Otherwise GET /auth/keys with the candidate header (expect 200). A bootstrap POST is
    never sent to an initialized backend." """
    t = backend(False)
    outcome = verify_candidate(t, TARGET, CANDIDATE)
    assert outcome.ok and outcome.action is AdoptionAction.VERIFIED
    assert t.paths() == ["GET /", "GET /health", "GET /auth/bootstrap-status", "GET /auth/keys"]
    assert t.calls[-1].headers["X-Service-API-Key"] == CANDIDATE


def test_409_is_a_failure_not_adoption() -> None:
    """SPEC 5.2.3: "a 409 is a failure, not adoption"."""
    t = backend(
        True, **{"POST /auth/register-key": FakeResponse(409, {"detail": "An API key is already registered"})}
    )
    outcome = verify_candidate(t, TARGET, CANDIDATE)
    assert not outcome.ok and outcome.status == 409 and "409 is not adoption" in outcome.error
    assert t.paths().count("POST /auth/register-key") == 1


@pytest.mark.parametrize(
    ("routes", "step", "text"),
    [
        (
            {"GET /": FakeResponse(302, raw_text="", headers={"Location": "https://evil.example/"})},
            "GET /",
            "redirect refused",
        ),
        ({"GET /": FakeResponse(200, raw_text="<html>router login</html>")}, "GET /", "non-JSON"),
        ({"GET /health": FakeResponse(503, {"ready": False})}, "GET /health", "not ready"),
        (
            {"GET /auth/bootstrap-status": FakeResponse(200, {"needs_bootstrap": "maybe"})},
            "GET /auth/bootstrap-status",
            "unexpected",
        ),
        (
            {"GET /auth/keys": FakeResponse(401, {"detail": "Invalid API key"})},
            "GET /auth/keys",
            "rejected the key",
        ),
        (
            {"GET /auth/keys": FakeResponse(429, {"detail": "Too many failed authentication attempts"})},
            "GET /auth/keys",
            "locked out",
        ),
        ({"GET /auth/keys": FakeResponse(301, raw_text="")}, "GET /auth/keys", "redirect refused"),
        ({"GET /health": refused()}, "GET /health", "backend unreachable (connection)"),
    ],
)
def test_every_rejection_fails_closed_without_the_key(routes, step, text) -> None:
    """SPEC 5.2.7: "Any rejection or transport failure preserves the previously stored value ... the
    plaintext is never included in logs, validation errors or diagnostics." """
    echo = {"GET /auth/keys": FakeResponse(401, {"detail": f"Invalid API key {CANDIDATE}"})}
    t = backend(False, **{**echo, **routes})
    outcome = verify_candidate(t, TARGET, CANDIDATE)
    assert not outcome.ok and outcome.step == step and text in outcome.error
    assert CANDIDATE not in json.dumps(outcome.__dict__, default=str)
    assert "POST /auth/register-key" not in t.paths()


def test_recheck_is_read_only() -> None:
    """SPEC 5.2.10: "After a 401 from the backend during a stage, the stored key is re-checked read-only; no
    substitute key and no bootstrap is tried." """
    t = backend(True)
    outcome = recheck_stored_key(t, TARGET, CANDIDATE)
    assert outcome.ok and t.paths() == ["GET /auth/keys"]
    t = backend(True, **{"GET /auth/keys": FakeResponse(401, {"detail": "Invalid API key"})})
    outcome = recheck_stored_key(t, TARGET, CANDIDATE)
    assert not outcome.ok and t.paths() == ["GET /auth/keys"]


def test_preflight_key_step() -> None:
    """SPEC 4.5 step 3: "Ensure the backend key is registered. Failure is a warning." """
    ctx = BackendContext("https://backend.example:8800", CANDIDATE)
    t = backend(False)
    assert ensure_key_registered(t, ctx) is None
    t = backend(True)
    assert ensure_key_registered(t, ctx) is None and "POST /auth/register-key" in t.paths()
    t = backend(True, **{"POST /auth/register-key": FakeResponse(409, {"detail": "exists"})})
    warning = ensure_key_registered(t, ctx)
    assert warning is not None and "refused" in warning and CANDIDATE not in warning
    t = backend(False, **{"GET /auth/bootstrap-status": refused()})
    warning = ensure_key_registered(t, ctx)
    assert warning is not None and "unreachable" in warning


def state(enabled=True, target=TARGET, verify=True, has_key=True, proof=None) -> BackendEndpointState:
    return BackendEndpointState(
        enabled=enabled, target=target, verify_ssl=verify, has_key=has_key, proof=proof
    )


def test_plan_new_rows() -> None:
    """SPEC 5.2.8: "A new disabled row is stored keyless and makes no request." 5.2.2: "An explicit candidate
    key is verified before persistence. Without one, the row is saved in a pending state (blank fingerprint)
    with an encrypted generated candidate, and bounded auto-configuration runs after the transaction
    commits." """
    plan = plan_key_save(None, state(enabled=False, has_key=False), None, proof_key=PROOF_KEY)
    assert (
        plan.action is KeyPlanAction.STORE_KEYLESS
        and not plan.network_before_persist
        and not plan.network_after_commit
    )
    plan = plan_key_save(None, state(has_key=False), CANDIDATE, proof_key=PROOF_KEY)
    assert plan.action is KeyPlanAction.VERIFY_CANDIDATE and plan.network_before_persist
    plan = plan_key_save(None, state(has_key=False), None, proof_key=PROOF_KEY)
    assert (
        plan.action is KeyPlanAction.PENDING_GENERATED
        and plan.network_after_commit
        and not plan.network_before_persist
    )


def test_plan_blank_token_is_omitted() -> None:
    """SPEC 5.2.9: "A blank or null token on a partial REST update counts as omitted and preserves the
    stored key." """
    proof = str(issue_proof(PROOF_KEY, CANDIDATE, TARGET, True))
    for blank in ("", None):
        plan = plan_key_save(
            state(proof=proof), state(proof=proof), blank, proof_key=PROOF_KEY, stored_key=CANDIDATE
        )
        assert plan.action is KeyPlanAction.KEEP


def test_plan_target_or_tls_change_reverifies_stored_key() -> None:
    """SPEC 5.2.8: "Enabling it or changing its target authenticates against the newly persisted target ...
    A same-key target change reuses the ciphertext only after the new target accepts it." 5.2.6: changing any
    of candidate, URL, scheme, port, TLS "forces a fresh check"."""
    proof = str(issue_proof(PROOF_KEY, CANDIDATE, TARGET, True))
    before = state(proof=proof)
    for after in (
        state(target=canonicalize_target("https://backend.example:8801"), proof=proof),
        state(target=canonicalize_target("http://backend.example:8800"), proof=proof),
        state(verify=False, proof=proof),
    ):
        plan = plan_key_save(before, after, None, proof_key=PROOF_KEY, stored_key=CANDIDATE)
        assert plan.action is KeyPlanAction.REVERIFY_STORED and plan.network_after_commit
    enabling = plan_key_save(state(enabled=False), state(), None, proof_key=PROOF_KEY, stored_key=CANDIDATE)
    assert enabling.action is KeyPlanAction.REVERIFY_STORED


def test_plan_saving_an_unadopted_row_again_reverifies_its_stored_key() -> None:
    """A row whose stored key is pending or was refused is not used (resolution takes adopted rows only);
    saving it unchanged is how an operator retries, so the save re-verifies against the persisted target."""
    unadopted = replace(state(), adopted=False)
    plan = plan_key_save(unadopted, state(), None, proof_key=PROOF_KEY, stored_key=CANDIDATE)
    assert plan.action is KeyPlanAction.REVERIFY_STORED and plan.network_after_commit
    assert not plan.network_before_persist
    adopted = plan_key_save(state(), state(), None, proof_key=PROOF_KEY, stored_key=CANDIDATE)
    assert adopted.action is KeyPlanAction.KEEP


def test_plan_explicit_candidate_with_fresh_proof_skips_the_check() -> None:
    proof = str(issue_proof(PROOF_KEY, CANDIDATE, TARGET, True))
    plan = plan_key_save(state(), state(proof=proof), CANDIDATE, proof_key=PROOF_KEY, stored_key=CANDIDATE)
    assert plan.action is KeyPlanAction.KEEP
    rotated = plan_key_save(state(), state(proof=proof), "r" * 64, proof_key=PROOF_KEY, stored_key=CANDIDATE)
    assert rotated.action is KeyPlanAction.VERIFY_CANDIDATE


def test_plan_disabled_rows_make_no_request() -> None:
    plan = plan_key_save(state(), state(enabled=False), CANDIDATE, proof_key=PROOF_KEY, stored_key=CANDIDATE)
    assert not plan.network_before_persist and not plan.network_after_commit
    with pytest.raises(CandidateError):
        plan_key_save(None, state(), "short", proof_key=PROOF_KEY)


def test_optimistic_snapshot_detects_a_concurrent_save() -> None:
    """SPEC 5.2.8: "Security-sensitive saves use a row lock plus an optimistic snapshot." """
    from netbox_hvsync.rules.adoption import security_snapshot, snapshot_conflicts

    row = {
        "enabled": True,
        "url": "https://b.example:8800",
        "verify_ssl": True,
        "key_fingerprint": "",
        "name": "b",
    }
    snap = security_snapshot(row)
    assert "name" not in snap
    assert snapshot_conflicts(snap, {**row, "name": "renamed"}) == []
    assert snapshot_conflicts(snap, {**row, "url": "https://evil.example:8800", "verify_ssl": False}) == [
        "url",
        "verify_ssl",
    ]


def test_the_failover_check_sends_the_key_only_to_an_initialised_backend() -> None:
    """Issue 39: before the key first goes to a backend's other address (the failover IP, which can change
    in IPAM), the address identifies itself as an initialised backend; the key travels in the last step."""
    from fakes import FakeResponse, FakeTransport
    from netbox_hvsync.rules.adoption import verify_failover_address

    key = "failoverKEY-" + "a" * 30
    good = FakeTransport().on("GET", "/", FakeResponse(200, {"name": "hvsync"}))
    good.on("GET", "/auth/bootstrap-status", FakeResponse(200, {"needs_bootstrap": False}))
    good.on("GET", "/auth/keys", FakeResponse(200, {"keys": []}))
    assert verify_failover_address(good, "http://10.0.0.9:8800", key).ok
    assert [c.headers.get("X-Service-API-Key") for c in good.calls] == [None, None, key]

    fresh = FakeTransport().on("GET", "/", FakeResponse(200, {"name": "hvsync"}))
    fresh.on("GET", "/auth/bootstrap-status", FakeResponse(200, {"needs_bootstrap": True}))
    trap = FakeTransport().on("GET", "/", FakeResponse(200, {}))
    trap.on("GET", "/auth/bootstrap-status", FakeResponse(200, {}))
    for transport in (fresh, trap, FakeTransport()):
        outcome = verify_failover_address(transport, "http://10.0.0.9:8800", key)
        assert not outcome.ok and key not in transport.everything_sent()
