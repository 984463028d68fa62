"""Consumer of a stage's server-sent-event stream (SPEC 6.1, 6.2; contracts/sse-frames.schema.json).

A stage stream emits `step` frames (progress) and ends with `complete` carrying `ok`. The consumer
decides the stage outcome: `complete` with `ok` true succeeds; `ok` false is an application failure;
an unparseable `complete` frame is an application failure; a stream that ends (or breaks) without
`complete` is a transport failure. Unparseable `step` frames are noted and skipped.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .failures import APPLICATION, TRANSPORT
from .redaction import redact, redacted_detail, sweep_text
from .transport import TransportError

_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: str | None


def split_lines(chunks: Iterable[str | bytes]) -> Iterator[str]:
    """Turn arbitrary text/byte chunks into lines (CRLF, LF or CR terminated), as SSE defines them.

    UTF-8 is decoded incrementally, so a character split across chunks survives; a CR at the end of a
    chunk waits for the next one in case it is half of a CRLF.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buffer = ""
    for chunk in chunks:
        buffer += decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        start = 0
        for match in _EOL.finditer(buffer):
            if match.group() == "\r" and match.end() == len(buffer):
                break  # maybe the first half of a CRLF split across chunks
            yield buffer[start : match.start()]
            start = match.end()
        buffer = buffer[start:]
    buffer += decoder.decode(b"", final=True)
    *complete_lines, rest = _EOL.split(buffer)
    yield from complete_lines
    if rest:
        yield rest  # an unterminated last line; it cannot dispatch an event by itself


def iter_events(lines: Iterable[str | bytes]) -> Iterator[SseEvent]:
    """Parse SSE lines (without terminators, as `requests.iter_lines` yields them) into events.

    Comment lines (`: keep-alive`) are ignored; multi-line `data:` is joined with newlines; an event is
    dispatched on a blank line; a trailing event without its blank line is not dispatched (per the
    SSE rules it never completed).
    """
    event, last_id = "", None
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if line == "":
            if data:
                yield SseEvent(event or "message", "\n".join(data), last_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id" and "\x00" not in value:
            last_id = value


@dataclass
class StageOutcome:
    """What a stage stream amounted to; `complete` is the parsed final payload when there was one."""

    ok: bool
    failure_kind: str | None = None
    error: str = ""
    complete: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    last_event_id: str | None = None

    def failure_payload(self, stage: str) -> dict[str, Any] | None:
        """The recorded payload of a failed stage, stamped with its `failure_kind`."""
        if self.ok:
            return None
        payload: dict[str, Any] = {
            "stage": stage,
            "ok": False,
            "error": self.error,
            "failure_kind": self.failure_kind,
        }
        if self.complete is not None:
            payload["errors"] = self.complete.get("errors", [])
            payload["summary"] = self.complete.get("summary")
        return payload


def _complete_error(payload: Mapping[str, Any], secrets: tuple[str, ...]) -> str:
    error = payload.get("error")
    if isinstance(error, Mapping) and error.get("detail"):
        return redacted_detail(error, known_secrets=secrets)
    errors = payload.get("errors")
    if isinstance(errors, list) and errors:
        first = errors[0]
        detail = redacted_detail(first, known_secrets=secrets) if isinstance(first, Mapping) else str(first)
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return detail + more
    return "stage reported ok=false without an error detail"


def consume_stage_stream(
    lines: Iterable[str | bytes],
    *,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    known_secrets: Iterable[str] = (),
) -> StageOutcome:
    """Read one stage stream to its end and decide the outcome (see the module docstring)."""
    secrets = tuple(s for s in known_secrets if s)
    outcome = StageOutcome(ok=False)
    try:
        for event in iter_events(lines):
            outcome.last_event_id = event.id or outcome.last_event_id
            if event.event == "step":
                try:
                    step = json.loads(event.data)
                except ValueError:
                    step = None
                if not isinstance(step, dict):
                    outcome.notes.append(f"unparseable step frame (id {event.id}) skipped")
                    continue
                step = redact(step, secrets)
                outcome.steps.append(step)
                if on_step is not None:
                    on_step(step)
            elif event.event == "complete":
                return _decide_complete(event, outcome, secrets)
            elif event.event == "restart":
                outcome.notes.append(f"backend asked for a restart: {sweep_text(event.data, secrets)[:200]}")
            # other event names are not part of the contract and are ignored
    except TransportError as exc:
        outcome.failure_kind = TRANSPORT
        outcome.error = f"stream interrupted before complete ({exc.kind}): {sweep_text(str(exc), secrets)}"
        return outcome
    outcome.failure_kind = TRANSPORT
    outcome.error = "stream ended without complete"
    return outcome


def _decide_complete(event: SseEvent, outcome: StageOutcome, secrets: tuple[str, ...]) -> StageOutcome:
    try:
        payload = json.loads(event.data)
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or not isinstance(payload.get("ok"), bool):
        outcome.failure_kind = APPLICATION
        outcome.error = "unparseable complete frame"
        return outcome
    payload = redact(payload, secrets)
    outcome.complete = payload
    if payload["ok"]:
        outcome.ok = True
        return outcome
    outcome.failure_kind = APPLICATION
    outcome.error = _complete_error(payload, secrets)
    return outcome
