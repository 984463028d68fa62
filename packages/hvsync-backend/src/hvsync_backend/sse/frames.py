"""SSE wire encoding of the frames described in contracts/sse-frames.schema.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hvsync_backend.wire import SUMMARY_COUNTS


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


def parse_stream(text: str) -> list[Frame]:
    """Decode an SSE body (used by tests and the CLI); comments are skipped."""
    frames: list[Frame] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            fields[name] = fields[name] + "\n" + value if name in fields else value
        if "data" in fields:
            frames.append(
                Frame(fields.get("event", "message"), fields.get("id", ""), json.loads(fields["data"]))
            )
    return frames


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
