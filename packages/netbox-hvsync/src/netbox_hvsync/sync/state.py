"""The recorded state of one sync-job run, apart from what the run does (`runner`, `selected`).

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
from netbox_hvsync.rules.redaction import redact, sweep_text


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

    Both the stage loop (`runner`) and selected-objects runs (`selected`) write through it; job data is
    saved before any raise, so a failed job still shows what ran."""

    def __init__(self, job: Job, logger: logging.Logger, block: Mapping[str, Any]) -> None:
        self.job = job
        self.block: dict[str, Any] = {**block, "errors": [], "stages": [], "warnings": []}
        self.block.setdefault("runtime", {})
        self.secrets: list[str] = []
        self.logger = JobLog(logger, self.secrets)
        self.started = time.monotonic()

    # -- persistence -------------------------------------------------------------------------------

    def save(self) -> None:
        """Write the sync block and the log entries so far (progress is visible while the job runs)."""
        data = dict(self.job.data or {})
        data["sync"] = redact(self.block, self.secrets)
        self.job.data = data
        self.job.save(update_fields=["data", "log_entries"])

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
