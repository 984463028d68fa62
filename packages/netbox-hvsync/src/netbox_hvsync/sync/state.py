"""The recorded state of one sync-job run, apart from what the run does (`runner`, `preflight`,
`stage_loop`, `selected`).

The sync block in `job.data["sync"]` (redacted), the job log (formatted, swept for the run's secrets),
per-endpoint step timing, and the failure every run raises: `SyncJobFailed`, whose message is the job's
`error`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.exceptions import JobFailed
from core.models import Job
from netbox_hvsync.queue import queue_warnings
from netbox_hvsync.rules.redaction import redact, sweep_text
from netbox_hvsync.wire import SUMMARY_COUNTS

#: At most one progress write per this many seconds while a stage streams (not one DB write per frame).
PROGRESS_SAVE_INTERVAL_S = 1.0
#: The counts a progress entry sums from the stage's `write` step frames.
PROGRESS_COUNTS = SUMMARY_COUNTS


class SyncJobFailed(JobFailed):
    """The job ran and failed; `job.error` and this exception carry the same composed message."""


@dataclass
class StepTimer:
    """Per-endpoint runtime of one stage, measured from the first to the last frame naming the endpoint."""

    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)

    def see(self, endpoint_id: object, now: float) -> None:
        if isinstance(endpoint_id, int) and not isinstance(endpoint_id, bool):
            self.first.setdefault(endpoint_id, now)
            self.last[endpoint_id] = now

    def durations_ms(self) -> dict[int, int]:
        return {eid: round((self.last[eid] - self.first[eid]) * 1000) for eid in self.first}


class JobLog:
    """The job's logger with the message formatted before it is stored: NetBox's job log keeps a record's
    raw `msg`, not the formatted text. Every line is swept for the run's known secrets."""

    def __init__(self, logger: logging.Logger, secrets: list[str]) -> None:
        self._logger = logger
        self._secrets = secrets

    def _text(self, msg: str, args: tuple[Any, ...]) -> str:
        return sweep_text(msg % args if args else msg, self._secrets)

    def info(self, msg: str, *args: Any) -> None:
        self._logger.info(self._text(msg, args))

    def warning(self, msg: str, *args: Any) -> None:
        self._logger.warning(self._text(msg, args))

    def error(self, msg: str, *args: Any) -> None:
        self._logger.error(self._text(msg, args))


class RunState:
    """What one run of a sync job records: the sync block, the known secrets, the job log and the clock.

    The job (`runner`), its preflight and stage loop (`preflight`, `stage_loop`) and selected-objects runs
    (`selected`) write through it; job data is saved before any raise, so a failed job still shows what ran."""

    def __init__(self, job: Job, logger: logging.Logger, block: Mapping[str, Any]) -> None:
        self.job = job
        # the enqueue's queue fallback (netbox_hvsync.queue) stays among the run's warnings
        warnings = queue_warnings(dict(block))
        self.block: dict[str, Any] = {**block, "errors": [], "stages": [], "warnings": list(warnings)}
        self.block.setdefault("runtime", {})
        self.secrets: list[str] = []
        self.logger = JobLog(logger, self.secrets)
        self.started = time.monotonic()
        for warning in warnings:
            self.logger.warning(warning)
        self._progress_saved = 0.0

    # -- persistence -------------------------------------------------------------------------------

    def save(self) -> None:
        """Write the sync block and the log entries so far (progress is visible while the job runs)."""
        data = dict(self.job.data or {})
        data["sync"] = redact(self.block, self.secrets)
        self.job.data = data
        self.job.save(update_fields=["data", "log_entries"])

    # -- live progress of the running stage (the sync-run page polls it) ---------------------------

    def begin_progress(self, stage: str, index: int, total: int) -> None:
        """Start the block's `progress` entry for a stage and save it, so the page names it at once."""
        self.block["progress"] = {
            "stage": stage,
            "index": index,
            "total": total,
            "frames": 0,
            "counts": dict.fromkeys(PROGRESS_COUNTS, 0),
        }
        self._progress_saved = time.monotonic()
        self.save()

    def see_progress(self, step: Mapping[str, Any], now: float) -> None:
        """Count one step frame; `write` frames carry one kind's counts, `done` the stage's totals.
        Saved at most every PROGRESS_SAVE_INTERVAL_S seconds."""
        progress = self.block.get("progress")
        if progress is None:
            return
        progress["frames"] += 1
        counts = step.get("counts")
        if isinstance(counts, Mapping) and step.get("phase") in ("write", "done"):
            replace = step.get("phase") == "done"
            for key in PROGRESS_COUNTS:
                value = counts.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    progress["counts"][key] = value if replace else progress["counts"][key] + value
        if now - self._progress_saved >= PROGRESS_SAVE_INTERVAL_S:
            self._progress_saved = now
            self.save()

    def end_progress(self) -> None:
        """The stage ended: its entry in `stages` holds the final numbers, so progress is dropped."""
        self.block.pop("progress", None)

    def fail(self, message: str) -> SyncJobFailed:
        message = sweep_text(message, self.secrets)
        self.block["errors"].append(message)
        self.block["runtime"]["total_ms"] = self._ms(self.started)
        self.logger.error(message)
        self.job.error = message
        self.save()
        self.job.save(update_fields=["error"])
        return SyncJobFailed(message)

    @staticmethod
    def _ms(since: float) -> int:
        return round((time.monotonic() - since) * 1000)
