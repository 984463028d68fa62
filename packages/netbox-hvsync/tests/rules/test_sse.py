"""SPEC 6.1/6.2: stage streams emit `step` (progress) and `complete` (carries `ok`; false means the stage
failed). "stream ended without complete" is a transport failure; "An unparseable complete frame ... [is an]
application failure". Fixtures are validated against contracts/sse-frames.schema.json."""

import json
from typing import Any

import jsonschema
import pytest
from fakes import REPO_ROOT
from netbox_hvsync.rules.failures import APPLICATION, TRANSPORT
from netbox_hvsync.rules.sse import consume_stage_stream
from netbox_hvsync.rules.transport import TransportError
from netbox_hvsync.wire.sse import iter_events, split_lines

SCHEMA = json.loads((REPO_ROOT / "contracts" / "sse-frames.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
COUNTS = {"total": 3, "created": 1, "updated": 1, "unchanged": 1, "deleted": 0, "failed": 0}
SECRET = "planted-stream-secret-123456789"


def frame(event: str, ident: int, data: Any) -> str:
    """One SSE frame; the fixture is validated against the shared contract first."""
    VALIDATOR.validate({"event": event, "id": str(ident), "data": data})
    return f"id: {ident}\nevent: {event}\ndata: {json.dumps(data)}\n\n"


def step(ident: int, message: str = "reading nodes") -> str:
    return frame("step", ident, {"stage": "devices", "phase": "read_proxmox", "message": message})


def complete(ident: int, ok: bool, **extra: Any) -> str:
    data = {"stage": "devices", "ok": ok, "summary": COUNTS, "duration_ms": 12.5, "errors": [], "error": None}
    data.update(extra)
    return frame("complete", ident, data)


def lines_of(text: str) -> list[str]:
    return list(split_lines([text]))


def test_fixtures_follow_the_contract() -> None:
    with pytest.raises(jsonschema.ValidationError):
        frame("complete", 1, {"stage": "devices", "summary": COUNTS})  # no ok


def test_ok_complete_succeeds_and_steps_are_seen() -> None:
    seen: list[dict] = []
    text = ": keep-alive\n\n" + step(1) + step(2, "writing") + complete(3, True)
    outcome = consume_stage_stream(lines_of(text), on_step=seen.append)
    assert outcome.ok and outcome.failure_kind is None
    assert [s["message"] for s in seen] == ["reading nodes", "writing"]
    assert outcome.complete is not None and outcome.complete["summary"] == COUNTS
    assert outcome.last_event_id == "3"


def test_ok_false_is_an_application_failure_with_the_problem_detail() -> None:
    """SPEC 6.2: "a completed stream reporting ok false" is application."""
    problem = {"source": "netbox", "status": 400, "detail": f"rejected; token={SECRET}"}
    text = step(1) + complete(2, False, errors=[problem, problem], error=problem)
    outcome = consume_stage_stream(lines_of(text))
    assert not outcome.ok and outcome.failure_kind == APPLICATION
    assert outcome.error == "rejected; token=[redacted]"
    assert SECRET not in json.dumps(outcome.complete)
    payload = outcome.failure_payload("devices")
    assert payload is not None and payload["failure_kind"] == APPLICATION and payload["summary"] == COUNTS


def test_ok_false_without_error_uses_errors_list() -> None:
    problem = {"source": "proxmox", "status": 500, "detail": "node pve2 unreachable"}
    outcome = consume_stage_stream(lines_of(complete(1, False, errors=[problem, problem, problem])))
    assert outcome.error == "node pve2 unreachable (+2 more)"


def test_missing_complete_is_transport() -> None:
    """SPEC 6.2: "stream ended without complete" is transport."""
    outcome = consume_stage_stream(lines_of(step(1) + step(2)))
    assert not outcome.ok and outcome.failure_kind == TRANSPORT
    assert outcome.error == "stream ended without complete"
    assert len(outcome.steps) == 2


def test_complete_without_its_blank_line_never_completed() -> None:
    text = step(1) + complete(2, True).rstrip("\n")
    outcome = consume_stage_stream(lines_of(text))
    assert outcome.failure_kind == TRANSPORT


def test_broken_connection_mid_stream_is_transport() -> None:
    def lines():
        yield from lines_of(step(1))
        raise TransportError(f"Read timed out (Authorization: Token {SECRET})", kind="timeout")

    outcome = consume_stage_stream(lines())
    assert outcome.failure_kind == TRANSPORT and "timeout" in outcome.error and SECRET not in outcome.error


@pytest.mark.parametrize("data", ["{not json", '"a string"', '{"stage": "devices"}', '{"ok": "yes"}'])
def test_unparseable_complete_is_application(data: str) -> None:
    """SPEC 6.2: "An unparseable complete frame ... [is an] application failure"."""
    outcome = consume_stage_stream(lines_of(step(1) + f"event: complete\ndata: {data}\n\n"))
    assert not outcome.ok and outcome.failure_kind == APPLICATION
    assert outcome.error == "unparseable complete frame"


def test_unparseable_step_is_noted_and_skipped() -> None:
    text = "id: 1\nevent: step\ndata: {broken\n\n" + step(2) + complete(3, True)
    outcome = consume_stage_stream(lines_of(text))
    assert outcome.ok and len(outcome.steps) == 1
    assert outcome.notes == ["unparseable step frame (id 1) skipped"]


def test_restart_is_noted_and_frames_after_complete_are_ignored() -> None:
    restart = frame("restart", 1, {"reason": "replay_unavailable", "last_event_id": "7"})
    text = restart + complete(2, True) + complete(3, False)
    outcome = consume_stage_stream(lines_of(text))
    assert outcome.ok and outcome.notes and "replay_unavailable" in outcome.notes[0]


def test_chunking_line_endings_and_multiline_data() -> None:
    """SSE lines end in CRLF, LF or CR; chunk boundaries may split lines, CRLF pairs and UTF-8 characters."""
    text = step(1, "ünïcode ✓") + complete(2, True)
    for ending in ("\n", "\r\n", "\r"):
        raw = text.replace("\n", ending).encode()
        chunks = [raw[i : i + 3] for i in range(0, len(raw), 3)]
        outcome = consume_stage_stream(split_lines(chunks))
        assert outcome.ok, ending
        assert outcome.steps[0]["message"] == "ünïcode ✓"
    events = list(iter_events(["data: line one", "data: line two", "", "data:x", ""]))
    assert [(e.event, e.data) for e in events] == [("message", "line one\nline two"), ("message", "x")]


def test_requests_style_byte_lines() -> None:
    lines = [line.encode() for line in lines_of(step(1) + complete(2, True))]
    assert consume_stage_stream(lines).ok
