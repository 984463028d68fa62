"""Showing runs: a Rich live display on a terminal, plain timestamped lines elsewhere (cron, pipes),
nothing at all for `--json`. Each ends with the summary table."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from hvsync_backend.sse.frames import Frame
from hvsync_backend.terminal.outcome import COUNT_COLUMNS, RunResult
from hvsync_backend.terminal.plan import Run

#: Step phases the plain output prints (reads are frequent and say little in a log).
PLAIN_PHASES = ("start", "diff", "done", "object")


@dataclass
class StageProgress:
    """Objects done of total for one stage, from its step frames' counts (per kind: diff, then write)."""

    started: float = field(default_factory=time.monotonic)
    total: int = 0
    done: int = 0
    message: str = ""

    def update(self, data: dict[str, Any]) -> None:
        raw = data.get("counts")
        counts: dict[str, Any] = raw if isinstance(raw, dict) else {}
        phase = data.get("phase")
        self.message = str(data.get("message") or "")[:120]
        if phase == "diff":
            self.total += int(counts.get("total") or 0)
            self.done += int(counts.get("unchanged") or 0)
        elif phase == "write":
            self.done += sum(int(counts.get(n) or 0) for n in ("created", "updated", "deleted", "failed"))
        elif phase == "done":
            self.total = max(self.total, int(counts.get("total") or 0))
            self.done = self.total

    @property
    def elapsed(self) -> float:
        return max(time.monotonic() - self.started, 1e-6)

    @property
    def rate(self) -> float:
        return self.done / self.elapsed


class Reporter(Protocol):
    def begin(self, run: Run) -> None: ...
    def frame(self, run: Run, frame: Frame) -> None: ...
    def finish(self, result: RunResult) -> None: ...
    def summary(self, results: list[RunResult]) -> None: ...


class Silent:
    """`--json`: the command prints one document at the end and nothing else."""

    def begin(self, run: Run) -> None:
        return None

    def frame(self, run: Run, frame: Frame) -> None:
        return None

    def finish(self, result: RunResult) -> None:
        return None

    def summary(self, results: list[RunResult]) -> None:
        return None


def _stage_of(run: Run, frame: Frame) -> str:
    return str(frame.data.get("stage") or run.name) if run.stream else run.name


def table_rows(results: list[RunResult]) -> list[dict[str, Any]]:
    return [row for result in results for row in result.rows()]


HEADERS = ("stage", "status", *COUNT_COLUMNS, "duration")


def _cells(row: dict[str, Any]) -> list[str]:
    return [
        str(row["stage"]),
        str(row["status"]),
        *(str(row[n]) for n in COUNT_COLUMNS),
        f"{row['duration_ms'] / 1000:.1f}s",
    ]


class Plain:
    """Non-TTY output: one line per notable frame, then an aligned plain-text table; no redraws."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.stages: dict[str, StageProgress] = {}

    def _line(self, text: str) -> None:
        self.out.write(f"{datetime.now().strftime('%H:%M:%S')} {text}\n")
        self.out.flush()

    def begin(self, run: Run) -> None:
        self._line(f"{run.name}: started")

    def frame(self, run: Run, frame: Frame) -> None:
        if frame.event == "restart":
            self.stages.clear()
            self._line(f"{run.name}: the backend restarted the run ({frame.data.get('reason')})")
            return
        if frame.event != "step":
            return
        stage = _stage_of(run, frame)
        if frame.data.get("phase") == "start":
            self.stages[stage] = StageProgress()
        progress = self.stages.setdefault(stage, StageProgress())
        progress.update(frame.data)
        if frame.data.get("phase") in PLAIN_PHASES:
            extra = ""
            if frame.data.get("phase") == "done":
                extra = f" ({progress.done} objects, {progress.rate:.1f}/s, {progress.elapsed:.1f}s)"
            self._line(f"{stage}: {frame.data.get('message', '')}{extra}")

    def finish(self, result: RunResult) -> None:
        state = "ok" if result.ok else f"FAILED: {result.error_text}"
        self._line(f"{result.name}: {state}")

    def summary(self, results: list[RunResult]) -> None:
        rows = [list(HEADERS), *(_cells(row) for row in table_rows(results))]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
        for r in rows:
            self.out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
        self.out.flush()


class Live:
    """TTY output: a Rich progress line per stage (done/total, objects/s, elapsed, latest message)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description:<20}", style="bold", markup=False),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>9}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[message]}", style="dim", markup=False),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, tuple[TaskID, StageProgress]] = {}
        self.progress.start()

    def _task(self, stage: str, fresh: bool = False) -> tuple[TaskID, StageProgress]:
        if stage in self.tasks and not fresh:
            return self.tasks[stage]
        if stage in self.tasks:
            self.progress.reset(self.tasks[stage][0], total=None)
            entry = (self.tasks[stage][0], StageProgress())
        else:
            entry = (self.progress.add_task(stage, total=None, rate="", message=""), StageProgress())
        self.tasks[stage] = entry
        return entry

    def begin(self, run: Run) -> None:
        if not run.stream:
            self._task(run.name, fresh=True)

    def frame(self, run: Run, frame: Frame) -> None:
        if frame.event == "restart":
            for task, _ in self.tasks.values():
                self.progress.update(task, message="restarted by the backend")
            return
        if frame.event != "step":
            return
        stage = _stage_of(run, frame)
        task, progress = self._task(stage, fresh=frame.data.get("phase") == "start")
        progress.update(frame.data)
        self.progress.update(
            task,
            total=progress.total or None,
            completed=progress.done,
            rate=f"{progress.rate:.1f}/s",
            message=progress.message,
        )

    def finish(self, result: RunResult) -> None:
        if result.name in self.tasks:
            task, progress = self.tasks[result.name]
            self.progress.update(task, total=progress.total or 1, completed=progress.total or 1)
        if not result.ok:
            self.console.print(Text(f"{result.name}: failed: {result.error_text}", style="red"))

    def summary(self, results: list[RunResult]) -> None:
        self.progress.stop()
        table = Table(title="hvsync sync summary")
        for header in HEADERS:
            table.add_column(header, justify="right" if header in (*COUNT_COLUMNS, "duration") else "left")
        for row in table_rows(results):
            cells = _cells(row)
            style = None if row["status"] == "ok" else "red"
            table.add_row(*cells, style=style)
        self.console.print(table)
