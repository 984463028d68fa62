"""SPEC 7.3 stage requests: status propagation, "Retries happen only for statuses of 500 and above",
"The job error and the raised error carry the same composed message", and SPEC 6.2 failure_kind stamping."""

import json

from fakes import FakeResponse
from netbox_hvsync.rules.failures import APPLICATION, TRANSPORT
from netbox_hvsync.rules.stage_runner import run_stage
from netbox_hvsync.rules.transport import TransportError

OK_STREAM = [
    "event: complete",
    "id: 1",
    "data: "
    + json.dumps(
        {
            "stage": "devices",
            "ok": True,
            "summary": {"created": 0, "updated": 0, "unchanged": 1, "deleted": 0, "failed": 0},
            "duration_ms": 1,
            "errors": [],
            "error": None,
        }
    ),
    "",
]


def opener(*answers):
    queue = list(answers)
    calls = []

    def open_stream():
        calls.append(1)
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    return open_stream, calls


def no_sleep(_s: float) -> None:
    return None


def test_success_after_a_retried_502() -> None:
    open_stream, calls = opener(
        FakeResponse(502, raw_text="<html>bad gateway</html>"), FakeResponse(200, lines=OK_STREAM)
    )
    run = run_stage("devices", open_stream, sleep=no_sleep)
    assert run.ok and run.status == 200 and len(calls) == 2
    assert run.complete is not None and run.complete["summary"]["unchanged"] == 1


def test_400_is_not_retried_and_propagates() -> None:
    open_stream, calls = opener(FakeResponse(400, {"detail": "bad query sync_mode_vm"}))
    run = run_stage("devices", open_stream, sleep=no_sleep)
    assert not run.ok and run.status == 400 and len(calls) == 1
    assert run.failure_payload is not None and run.failure_payload["failure_kind"] == APPLICATION
    assert (
        run.message
        == "stage devices failed after 1 attempt(s): HTTP 400 (application): bad query sync_mode_vm"
    )
    assert run.failure_payload["error"] == run.message


def test_401_asks_for_a_read_only_recheck() -> None:
    open_stream, calls = opener(FakeResponse(401, {"detail": "Invalid API key"}))
    run = run_stage("devices", open_stream, sleep=no_sleep)
    assert run.status == 401 and run.recheck_key and len(calls) == 1


def test_503_retried_until_exhausted_then_primary_is_first_application() -> None:
    sleeps: list[float] = []
    open_stream, calls = opener(
        FakeResponse(502, raw_text="<html>gateway</html>"),
        FakeResponse(503, {"detail": "NetBox is in maintenance"}),
        FakeResponse(503, {"detail": "NetBox is in maintenance"}),
    )
    run = run_stage("devices", open_stream, sleep=sleeps.append, max_attempts=3)
    assert len(calls) == 3 and sleeps == [1.0, 2.0]
    assert run.status == 503
    assert run.message.splitlines() == [
        "stage devices failed after 3 attempt(s): HTTP 503 (application): NetBox is in maintenance",
        "attempt 1: HTTP 502 (transport): non-JSON body (HTTP 502)",
    ]
    assert [a["attempt"] for a in run.failure_payload["attempts"]] == [1, 2, 3]
    assert run.advisory == "backend was unreachable or not ready on 1 of 3 attempt(s)"


def test_connection_error_has_no_status_so_plugin_reports_503_without_retry() -> None:
    open_stream, calls = opener(TransportError("Connection refused", kind="connection"))
    run = run_stage("devices", open_stream, sleep=no_sleep)
    assert run.status == 503 and len(calls) == 1
    assert run.failure_payload["failure_kind"] == TRANSPORT


def test_stream_without_complete_is_transport_and_not_retried() -> None:
    open_stream, calls = opener(FakeResponse(200, lines=["event: step", 'data: {"stage":"devices"}', ""]))
    run = run_stage("devices", open_stream, sleep=no_sleep)
    assert not run.ok and len(calls) == 1 and run.status == 503
    assert run.failure_payload["failure_kind"] == TRANSPORT
    assert "stream ended without complete" in run.message


def test_secrets_never_reach_the_message() -> None:
    secret = "planted-secret-abcdef0123456789"
    open_stream, _ = opener(
        FakeResponse(500, {"detail": f"upstream said password={secret}", "token": secret})
    )
    run = run_stage("devices", open_stream, sleep=no_sleep, max_attempts=1, known_secrets=[secret])
    assert secret not in json.dumps(run.failure_payload)
