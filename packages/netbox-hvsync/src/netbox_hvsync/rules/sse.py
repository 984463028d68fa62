"""Consumer of a stage's server-sent-event stream (SPEC 6.1, 6.2; contracts/sse-frames.schema.json).

A stage stream emits `step` frames (progress) and ends with `complete` carrying `ok`. The consumer
decides the stage outcome: `complete` with `ok` true succeeds; `ok` false is an application failure;
an unparseable `complete` frame is an application failure; a stream that ends (or breaks) without
`complete` is a transport failure. Unparseable `step` frames are noted and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..wire.sse import SseEvent, iter_events
from .failures import APPLICATION, MASS_VANISH, TRANSPORT
from .redaction import redact, redacted_detail, sweep_text
from .transport import TransportError


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
    error = payload.get("error")
    guarded = isinstance(error, Mapping) and error.get("failure_kind") == MASS_VANISH
    outcome.failure_kind = MASS_VANISH if guarded else APPLICATION
    outcome.error = _complete_error(payload, secrets)
    return outcome
