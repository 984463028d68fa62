"""SPEC 5.2.10: "After a 401 from the backend during a stage, the stored key is re-checked read-only; no
substitute key and no bootstrap is tried. A successful rebind starts a new failure-selection epoch." """

import json
from dataclasses import dataclass

from fakes import FakeResponse
from netbox_hvsync.rules.stage_runner import run_stage_rebinding

DENIED = {"detail": "Invalid API key"}
SUMMARY = {"created": 0, "updated": 0, "unchanged": 1, "deleted": 0, "failed": 0}
OK_STREAM = ["event: complete", "id: 1", "data: " + json.dumps({"ok": True, "summary": SUMMARY}), ""]


def no_sleep(_s: float) -> None:
    return None


def opener(*answers: FakeResponse):
    queue = list(answers)
    calls: list[int] = []

    def open_stream() -> FakeResponse:
        calls.append(1)
        return queue.pop(0)

    return open_stream, calls


@dataclass(frozen=True)
class Recheck:
    ok: bool
    status: int | None = 200
    error: str = ""


def rechecks(*answers: Recheck):
    queue = list(answers)
    calls: list[int] = []

    def recheck() -> Recheck:
        calls.append(1)
        return queue.pop(0)

    return recheck, calls


def test_a_successful_recheck_retries_the_stage_in_a_new_epoch() -> None:
    open_stream, calls = opener(FakeResponse(401, DENIED), FakeResponse(200, lines=OK_STREAM))
    recheck, checks = rechecks(Recheck(True))
    run = run_stage_rebinding("devices", open_stream, recheck=recheck, sleep=no_sleep)
    assert run.ok and run.rebinds == 1 and len(calls) == 2 and len(checks) == 1
    assert run.key_recheck == {"ok": True, "status": 200, "error": ""}


def test_the_retried_epoch_alone_selects_the_primary_cause() -> None:
    gateway = FakeResponse(502, raw_text="<html>bad gateway</html>")
    open_stream, _ = opener(FakeResponse(401, DENIED), gateway, gateway, gateway)
    recheck, _ = rechecks(Recheck(True))
    run = run_stage_rebinding("devices", open_stream, recheck=recheck, sleep=no_sleep)
    assert not run.ok and run.status == 502 and not run.recheck_key
    # the 401 before the rebind (application-level) would otherwise be chosen as the primary cause
    assert run.message.startswith("stage devices failed after 3 attempt(s): HTTP 502 (transport)")
    assert "401" not in run.message
    assert [a.attempt for a in run.attempts] == [2, 3, 4]  # numbered on across epochs
    assert run.failure_payload is not None and run.failure_payload["epoch"] == 2
    assert run.advisory is not None and "3 of 4 attempt(s)" in run.advisory  # over all attempts


def test_a_failed_recheck_stops_with_the_401() -> None:
    open_stream, calls = opener(FakeResponse(401, DENIED))
    recheck, _ = rechecks(Recheck(False, 401, "GET /auth/keys: the backend rejected the key"))
    run = run_stage_rebinding("devices", open_stream, recheck=recheck, sleep=no_sleep)
    assert not run.ok and run.status == 401 and run.rebinds == 0 and len(calls) == 1
    assert run.key_recheck is not None and run.key_recheck["ok"] is False
    assert run.failure_payload is not None and "epoch" not in run.failure_payload


def test_a_second_401_after_the_rebind_is_rechecked_but_not_retried_again() -> None:
    open_stream, calls = opener(FakeResponse(401, DENIED), FakeResponse(401, DENIED))
    recheck, checks = rechecks(Recheck(True), Recheck(True))
    run = run_stage_rebinding("devices", open_stream, recheck=recheck, sleep=no_sleep)
    assert not run.ok and run.status == 401 and run.rebinds == 1
    assert len(calls) == 2 and len(checks) == 2 and len(run.attempts) == 1
