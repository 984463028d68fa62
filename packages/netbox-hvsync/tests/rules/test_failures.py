"""SPEC 6.2, 6.3 and 7.3: failure classification, attempt records, retries, status propagation and the
composed primary cause."""

import pytest
from fakes import FakeResponse
from netbox_hvsync.rules.failures import (
    APPLICATION,
    TRANSPORT,
    AttemptLog,
    AttemptRecord,
    CandidateFailure,
    classify_answer,
    classify_payload,
    compose_primary_cause,
    missing_backend_url_failure,
    primary_attempt,
    propagate_status,
    readiness_advisory,
    select_candidate_failure,
    should_retry,
    stamp,
    stamp_all,
)
from netbox_hvsync.rules.transport import read_answer


def answer(status: int, body: object = None, raw: str | None = None):
    return read_answer(FakeResponse(status, body, raw_text=raw))


def test_json_bodies_of_any_shape_are_application() -> None:
    """SPEC 6.2: "application when the backend authored the answer (... any JSON error body including a
    5xx, a JSON body of any shape)"."""
    assert classify_answer(answer(500, {"detail": "boom"})) == APPLICATION
    assert classify_answer(answer(502, ["odd", "shape"])) == APPLICATION
    assert classify_answer(answer(400, {"unexpected": 1})) == APPLICATION
    assert classify_answer(answer(503, 42)) == APPLICATION


def test_gateway_pages_redirects_and_bootstrapping_are_transport() -> None:
    """SPEC 6.2: "transport when no backend-authored body arrived (... refused redirect, ... non-JSON
    gateway page, backend still bootstrapping)"."""
    assert classify_answer(answer(502, raw="<html>Bad Gateway</html>")) == TRANSPORT
    assert classify_answer(answer(504, raw="")) == TRANSPORT
    assert classify_answer(answer(302, raw="")) == TRANSPORT
    bootstrapping = {"detail": "No API key is configured; register one with POST /auth/register-key"}
    assert classify_answer(answer(503, bootstrapping)) == TRANSPORT


def test_missing_backend_url_is_application() -> None:
    """SPEC 6.2: "An unparseable complete frame and a missing backend URL are application failures." """
    payload = missing_backend_url_failure()
    assert payload["failure_kind"] == APPLICATION and classify_payload(payload) == APPLICATION


def test_stamp_outranks_phrases_and_statuses() -> None:
    """SPEC 7.3: "The stamped failure_kind outranks phrases in detail text; only unstamped payloads fall
    back to cause text and then to statuses 502, 503, 504." """
    stamped = {"error": "connection refused while reading", "status": 503, "failure_kind": APPLICATION}
    assert classify_payload(stamped) == APPLICATION
    assert classify_payload({"error": "connection refused while reading"}) == TRANSPORT
    assert classify_payload({"error": "stream ended without complete"}) == TRANSPORT
    assert classify_payload({"error": "NetBox rejected the VM", "status": 504}) == TRANSPORT
    assert classify_payload({"error": "NetBox rejected the VM", "status": 500}) == APPLICATION
    assert stamp({"error": "x"}, TRANSPORT) == {"error": "x", "failure_kind": TRANSPORT}
    assert [
        p["failure_kind"]
        for p in stamp_all([{"error": "timed out"}, {"error": "bad", "failure_kind": APPLICATION}])
    ] == [TRANSPORT, APPLICATION]
    with pytest.raises(ValueError):
        stamp({}, "other")


@pytest.mark.parametrize(
    ("backend", "plugin", "retried", "recheck"),
    [
        (400, 400, False, False),
        (401, 401, False, True),
        (502, 502, True, False),
        (503, 503, True, False),
        (500, 500, True, False),
        (404, 404, False, False),
        (None, 503, False, False),
    ],
)
def test_status_propagation_table(backend, plugin, retried, recheck) -> None:
    """SPEC 7.3: "the plugin returns the backend's actual HTTP status (a 503 only when none is known).
    Retries happen only for statuses of 500 and above." Table: 400->400 no; 401->401 no, stored key
    re-checked read-only; 502->502 yes; 503->503 yes."""
    decision = propagate_status(backend)
    assert (decision.status, decision.retry, decision.recheck_key) == (plugin, retried, recheck)


def test_retry_only_500_and_above() -> None:
    """SPEC 8: retry eligibility: statuses of 500 and above."""
    assert [s for s in (None, 200, 400, 401, 404, 429, 499, 500, 502, 503, 504, 599) if should_retry(s)] == [
        500,
        502,
        503,
        504,
        599,
    ]


def rec(n: int, status: int | None, detail: str, kind: str, elapsed: float = 0.1) -> AttemptRecord:
    return AttemptRecord(n, status, detail, kind, elapsed)


def test_attempt_record_fields() -> None:
    """SPEC 6.3: "Each failed stage attempt records attempt number, HTTP status, redacted detail,
    classification and elapsed time." """
    assert rec(2, 502, "bad gateway", TRANSPORT, 1.23456).as_dict() == {
        "attempt": 2,
        "status": 502,
        "detail": "bad gateway",
        "failure_kind": TRANSPORT,
        "elapsed_s": 1.235,
    }


def test_primary_cause_is_first_application_failure() -> None:
    """SPEC 7.3: "After retries, the first application-level failure is the primary cause; if all are
    transport-level, the final attempt is primary." """
    attempts = [
        rec(1, 502, "gateway page", TRANSPORT),
        rec(2, 500, "NetBox said no", APPLICATION),
        rec(3, 503, "later app failure", APPLICATION),
    ]
    assert primary_attempt(attempts).attempt == 2
    transports = [rec(1, None, "refused", TRANSPORT), rec(2, 502, "gateway", TRANSPORT)]
    assert primary_attempt(transports).attempt == 2


def test_composed_message_appends_divergent_lines_once() -> None:
    """SPEC 7.3: "Divergent details of other attempts are appended as one bounded line each; identical
    failures are one line." """
    long = "x" * 1000
    attempts = [
        rec(1, 502, long, TRANSPORT),
        rec(2, 500, "NetBox said no", APPLICATION),
        rec(3, 500, "NetBox said no", APPLICATION),
        rec(4, 502, long, TRANSPORT),
    ]
    message = compose_primary_cause(attempts, what="stage devices")
    lines = message.splitlines()
    assert lines[0] == "stage devices failed after 4 attempt(s): HTTP 500 (application): NetBox said no"
    assert len(lines) == 2
    assert lines[1].startswith("attempt 1: HTTP 502 (transport): xxx") and len(lines[1]) <= 300
    same = [rec(1, 503, "down", APPLICATION), rec(2, 503, "down", APPLICATION)]
    assert compose_primary_cause(same).count("\n") == 0


def test_readiness_advisory_over_all_attempts() -> None:
    """SPEC 6.3: "A backend readiness advisory is evaluated over all attempts." """
    attempts = [rec(1, None, "refused", TRANSPORT), rec(2, 500, "boom", APPLICATION)]
    assert readiness_advisory(attempts) == "backend was unreachable or not ready on 1 of 2 attempt(s)"
    assert readiness_advisory([rec(1, 500, "boom", APPLICATION)]) is None
    boot = AttemptRecord(1, 503, "no key", TRANSPORT, 0.1, bootstrapping=True)
    assert "bootstrapping on 1 of 1" in (readiness_advisory([boot]) or "")


def test_candidate_selection() -> None:
    """SPEC 6.2: "When hostname and IP candidates are both tried, the first backend-authored failure is
    reported; the last transport failure only if no candidate reached the backend." """
    host_t = CandidateFailure("backend.example", TRANSPORT, "dns failure")
    ip_a = CandidateFailure("10.0.0.9", APPLICATION, "HTTP 500", 500)
    ip_t = CandidateFailure("10.0.0.9", TRANSPORT, "refused")
    assert select_candidate_failure([host_t, ip_a]) is ip_a
    assert select_candidate_failure([ip_a, host_t]) is ip_a
    assert select_candidate_failure([host_t, ip_t]) is ip_t


def test_rebind_starts_new_failure_selection_epoch() -> None:
    """SPEC 5.2.10: "A successful rebind starts a new failure-selection epoch." """
    log = AttemptLog()
    log.record(rec(1, 401, "Invalid API key", APPLICATION))
    log.start_epoch()
    log.record(rec(2, 502, "gateway", TRANSPORT))
    assert log.composed_message().startswith("stage failed after 1 attempt(s): HTTP 502 (transport)")
    assert [a.attempt for a in log.all_attempts()] == [1, 2]
