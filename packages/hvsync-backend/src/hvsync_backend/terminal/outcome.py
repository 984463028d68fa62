"""What a run ended with, from its `complete` payload, and the rows of the summary table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hvsync_backend.wire import SUMMARY_COUNTS

COUNT_COLUMNS = SUMMARY_COUNTS


@dataclass
class RunResult:
    """One run's end. `complete` is the backend's payload as sent (None when the run never completed)."""

    name: str
    kind: str
    ok: bool
    complete: dict[str, Any] | None = None
    http_status: int | None = None
    problem: str | None = None
    frames: int = field(default=0)

    @classmethod
    def from_complete(cls, name: str, kind: str, data: dict[str, Any], **extra: Any) -> RunResult:
        return cls(name=name, kind=kind, ok=bool(data.get("ok")), complete=data, **extra)

    @property
    def error_text(self) -> str | None:
        """The primary problem in one line: the backend's `error`/`detail`, or why no `complete` came."""
        if self.ok:
            return None
        if self.problem:
            return self.problem
        data = self.complete or {}
        error = data.get("error")
        if isinstance(error, dict):
            status = f" {error['status']}" if error.get("status") else ""
            return f"{error.get('source', 'backend')}{status}: {error.get('detail', '')}"[:300]
        return str(data.get("detail") or "failed")[:300]

    def rows(self) -> list[dict[str, Any]]:
        """Table rows: one per stage the `complete` lists (the full update), else one for the run."""
        data = self.complete or {}
        stages = data.get("stages") if self.kind == "full-update" else None
        if isinstance(stages, list) and stages:
            return [_row(str(s.get("stage")), bool(s.get("ok")), s) for s in stages if isinstance(s, dict)]
        return [_row(self.name, self.ok, data)]

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "ok": self.ok,
            "http_status": self.http_status,
            "error": self.error_text,
            "rows": self.rows(),
            "complete": self.complete,
        }


def _row(stage: str, ok: bool, data: dict[str, Any]) -> dict[str, Any]:
    raw = data.get("summary")
    summary: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return {
        "stage": stage,
        "status": "ok" if ok else "failed",
        **{name: int(summary.get(name) or 0) for name in COUNT_COLUMNS},
        "duration_ms": float(data.get("duration_ms") or 0.0),
    }
