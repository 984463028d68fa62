"""SSE wire encoding of the frames described in contracts/sse-frames.schema.json, and their decoding.

Decoding splits lines and parses events with `wire.sse` (`split_lines`, `iter_events`): the one SSE reader
of both products, the plugin's stage consumer and this package's terminal runner alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from hvsync_backend.wire import SUMMARY_COUNTS
from hvsync_backend.wire.sse import iter_events


@dataclass(frozen=True)
class Frame:
    """One event: `event` is step, complete or restart; `id` is the per-stream sequence number."""

    event: str
    id: str
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.event, "id": self.id, "data": self.data}


def encode_frame(frame: Frame) -> str:
    """`id:`, `event:` and one-line JSON `data:`, terminated by a blank line."""
    payload = json.dumps(frame.data, separators=(",", ":"), default=str)
    return f"id: {frame.id}\nevent: {frame.event}\ndata: {payload}\n\n"


def encode_comment(text: str = "keep-alive") -> str:
    """A comment line: keeps proxies and clients from timing out while a stage is busy."""
    return f": {text}\n\n"


def decode_frames(lines: Iterable[str | bytes]) -> Iterator[Frame]:
    """The frames of SSE lines (comments skipped); raises ValueError for an event whose data is not JSON."""
    for event in iter_events(lines):
        yield Frame(event.event, event.id or "", json.loads(event.data))


def failed_complete(
    stage: str,
    problem: dict[str, Any],
    *,
    dry_run: bool | None = None,
    summary: dict[str, int] | None = None,
    duration_ms: float = 0,
    errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The `complete` payload of a run that failed as a whole (`problem` is its `error`): it wrote nothing.

    `dry_run` is left out when None; `summary` defaults to zero counts; `errors` to `[problem]`."""
    data: dict[str, Any] = {"stage": stage, "ok": False}
    if dry_run is not None:
        data["dry_run"] = dry_run
    data["summary"] = summary if summary is not None else dict.fromkeys(SUMMARY_COUNTS, 0)
    data["duration_ms"] = duration_ms
    data["errors"] = [problem] if errors is None else errors
    data["error"] = problem
    return data
