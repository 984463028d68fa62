"""What the sync-run page shows of one job, built from the job row and its `data["sync"]` block.

Plain data for the templates, beside the view that renders it (`views.sync_run`): the header times, one
row per endpoint and stage, the timeline segments, preflight, local reconciliation, warnings, errors,
failed objects, the live progress and the change-log link. The block is stored redacted; it is redacted once more here (credential-like
keys, credential-looking text), so nothing the page renders depends on how the block was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from core.choices import JobStatusChoices
from core.models import Job

from netbox_hvsync.rules.redaction import redact
from netbox_hvsync.wire import GONE_COUNTS, SUMMARY_COUNTS

#: a stage's counts as the run page shows them: what it wrote, then what it marked gone from Proxmox,
#: saw come back, and the deletion requests its marks asked for
COUNT_KEYS = (*SUMMARY_COUNTS, *GONE_COUNTS)
ACTIVE_STATUSES = (
    JobStatusChoices.STATUS_PENDING,
    JobStatusChoices.STATUS_SCHEDULED,
    JobStatusChoices.STATUS_RUNNING,
)
#: How far the change-log window reaches past the job's own times: the backend's last writes and the
#: job's `completed` stamp are not one instant.
CHANGELOG_SLACK = timedelta(seconds=5)


@dataclass(frozen=True)
class StageRow:
    endpoint: str
    stage: str
    ok: bool
    status: Any
    failure_kind: str
    counts: tuple[int | None, ...]
    duration_ms: int | None
    error: str


@dataclass(frozen=True)
class Segment:
    stage: str
    ok: bool
    duration_ms: int
    percent: float


@dataclass
class RunReport:
    job: Job
    block: dict[str, Any]
    active: bool
    queue_wait: str
    run_time: str
    rows: list[StageRow] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    failed_objects: list[dict[str, Any]] = field(default_factory=list)
    progress: dict[str, Any] | None = None
    changelog_url: str = ""
    changelog_filters: list[str] = field(default_factory=list)
    cleartext_inventory: list[str] = field(default_factory=list)

    @property
    def count_keys(self) -> tuple[str, ...]:
        return COUNT_KEYS


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _span(start: datetime | None, end: datetime | None) -> str:
    """A duration as operators read it (`2.4 s`, `3 min 05 s`); empty when an end is missing."""
    if start is None or end is None:
        return ""
    seconds = max((end - start).total_seconds(), 0.0)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def stage_rows(block: Mapping[str, Any]) -> list[StageRow]:
    """One row per endpoint and stage entry: an entry names its endpoints (`hv_endpoints`) when the
    stage was split per endpoint, else it covered every endpoint in scope. Counts are the stream's."""
    endpoints = {str(pk): e for pk, e in (block.get("endpoints") or {}).items() if isinstance(e, Mapping)}
    in_scope = [pk for pk, e in endpoints.items() if e.get("backend_id") and not e.get("dropped")]
    runtime = (block.get("runtime") or {}).get("endpoints") or {}
    rows: list[StageRow] = []
    for entry in block.get("stages") or []:
        if not isinstance(entry, Mapping):
            continue
        stage = str(entry.get("stage") or "?")
        summary = _mapping(entry.get("summary"))
        counts = tuple(_int(summary.get(k)) for k in COUNT_KEYS)
        covered = [str(pk) for pk in entry.get("hv_endpoints") or in_scope] or [""]
        for pk in covered:
            spent = ((runtime.get(pk) or {}).get("stages_ms") or {}).get(stage)
            rows.append(
                StageRow(
                    endpoint=str((endpoints.get(pk) or {}).get("name") or pk or "—"),
                    stage=stage,
                    ok=entry.get("ok") is True,
                    status=entry.get("status"),
                    failure_kind=str(entry.get("failure_kind") or ""),
                    counts=counts,
                    duration_ms=_int(spent) if _int(spent) is not None else _int(entry.get("duration_ms")),
                    error=str(entry.get("error") or "") if entry.get("ok") is not True else "",
                )
            )
    return rows


def timeline(block: Mapping[str, Any]) -> list[Segment]:
    """The stage entries in run order, each as wide as its share of the summed stage time."""
    entries = [e for e in block.get("stages") or [] if isinstance(e, Mapping)]
    spans = [max(_int(e.get("duration_ms")) or 0, 0) for e in entries]
    total = sum(spans)
    return [
        Segment(
            stage=str(e.get("stage") or "?"),
            ok=e.get("ok") is True,
            duration_ms=ms,
            percent=round(100 * ms / total, 2) if total else round(100 / len(entries), 2),
        )
        for e, ms in zip(entries, spans, strict=True)
    ]


def failed_objects(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Failed objects of the stages (`failed_objects` of each entry) and of a selected-objects run."""
    found: list[dict[str, Any]] = []
    for entry in block.get("stages") or []:
        if isinstance(entry, Mapping):
            for item in entry.get("failed_objects") or []:
                if isinstance(item, Mapping):
                    found.append(
                        {
                            "stage": entry.get("stage"),
                            "object": item.get("object"),
                            "error": item.get("detail"),
                        }
                    )
    for item in block.get("objects") or []:
        if isinstance(item, Mapping) and item.get("ok") is not True:
            found.append({"stage": "selected", "object": item.get("object"), "error": item.get("error")})
    return found


def live_progress(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """The running stage's `progress` entry, its counts as (name, value) pairs in COUNT_KEYS order
    (the stored JSON object does not keep key order)."""
    progress = block.get("progress")
    if not isinstance(progress, Mapping):
        return None
    counts = _mapping(progress.get("counts"))
    return {**progress, "counts": [(key, _int(counts.get(key)) or 0) for key in COUNT_KEYS]}


def changelog_link(job: Job, base_url: str, backend_user: Any = None) -> tuple[str, list[str]]:
    """NetBox's change log filtered to the run's time window, and to the backend's NetBox user when the
    plugin knows it; returns the URL and a description of each filter applied."""
    start = job.started or job.created
    if start is None:
        return "", []
    end = job.completed
    params: dict[str, str] = {"time_after": (start - CHANGELOG_SLACK).isoformat(timespec="seconds")}
    filters = [f"time after {params['time_after']}"]
    if end is not None:
        params["time_before"] = (end + CHANGELOG_SLACK).isoformat(timespec="seconds")
        filters.append(f"time before {params['time_before']}")
    if backend_user is not None:
        params["user_id"] = str(backend_user.pk)
        filters.append(f"user {backend_user.username}")
    return f"{base_url}?{urlencode(params)}", filters


def cleartext_inventory(block: Mapping[str, Any], pending: Sequence[str] = ()) -> list[str]:
    """Inventory endpoints whose NetBox token the backend sends over plain HTTP (C1): those this run
    pushed with scheme "http"; before the preflight ran, `pending` (the enabled endpoints saying http)."""
    pushes = _mapping(_mapping(block.get("preflight")).get("inventory_pushes"))
    if not pushes:
        return list(pending)
    return [str(pk) for pk, push in pushes.items() if _mapping(push).get("scheme") == "http"]


def build_report(
    job: Job, changelog_base: str, backend_user: Any = None, http_inventory: Sequence[str] = ()
) -> RunReport:
    block: dict[str, Any] = redact(dict(_mapping(_mapping(job.data).get("sync"))))
    active = job.status in ACTIVE_STATUSES
    url, filters = changelog_link(job, changelog_base, backend_user)
    progress = live_progress(block) if active else None
    return RunReport(
        job=job,
        block=block,
        active=active,
        queue_wait=_span(job.created, job.started),
        run_time=_span(job.started, job.completed),
        rows=stage_rows(block),
        segments=timeline(block),
        failed_objects=failed_objects(block),
        progress=progress,
        changelog_url=url,
        changelog_filters=filters,
        cleartext_inventory=cleartext_inventory(block, http_inventory),
    )
