"""Sync jobs on NetBox's job queue: a core Job row whose `data["sync"]` records what was asked for.

Each enqueue (each occurrence of a recurring job too) picks the RQ queue: hvsync's own when a worker
serves it, else `default` with a warning in the block (netbox_hvsync.queue), and sets the job's RQ
timeout from the endpoints in scope (netbox_hvsync.rules.job_timeout): RQ's default, NetBox's
RQ_DEFAULT_TIMEOUT (300 s unless changed), would kill a longer sync half-written.

`enqueue_sync()` is the single way a sync is queued (REST `sync/schedule/`, UI buttons, repair). The job
body lives in `sync_runner` (preflight, scope, local reconciliation, stage loop).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from core.models import Job
from django.db import IntegrityError, connection, transaction
from netbox.jobs import JobRunner
from netbox.plugins import get_plugin_config

from netbox_hvsync.choices import SYNC_TYPE_ALL, SyncModeChoices
from netbox_hvsync.models import HvEndpoint
from netbox_hvsync.queue import choose_queue
from netbox_hvsync.rules.job_timeout import job_timeout
from netbox_hvsync.sync.runner import run_sync_job

SYNC_JOB_NAME = "hvsync sync"

logger = logging.getLogger("netbox_hvsync.jobs")


def build_sync_block(
    *,
    sync_types: Sequence[str] | None = None,
    hv_endpoint_ids: Sequence[int] | None = None,
    cluster_ids: Sequence[int] | None = None,
    node_ids: Sequence[int] | None = None,
    vm_ids: Sequence[int] | None = None,
    object_ids: Sequence[int] | None = None,
    batch_object_type: str | None = None,
    mode: str = SyncModeChoices.STAGED,
    backend_endpoint_id: int | None = None,
    run_id: str | None = None,
    use_branch: bool = False,
) -> dict[str, Any]:
    """The recorded parameters of a run, in the shape the sync-job filters read."""
    return {
        "sync_types": list(sync_types or [SYNC_TYPE_ALL]),
        "hv_endpoint_ids": [int(i) for i in hv_endpoint_ids or []],
        "cluster_ids": [int(i) for i in cluster_ids or []],
        "node_ids": [int(i) for i in node_ids or []],
        "vm_ids": [int(i) for i in vm_ids or []],
        "object_ids": [int(i) for i in object_ids or []],
        "run_id": run_id or str(uuid.uuid4()),
        "batch_object_type": batch_object_type,
        "mode": mode,
        "backend_endpoint_id": backend_endpoint_id,
        "use_branch": bool(use_branch),
        "errors": [],
        "stages": [],
    }


class SyncJob(JobRunner):
    class Meta:
        name = SYNC_JOB_NAME

    @classmethod
    def enqueue(cls, *args: Any, sync: dict[str, Any] | None = None, **kwargs: Any) -> Job:
        """Queue the job and store its sync block before the transaction commits (the worker starts after).

        A recurring job re-enqueues itself with the same kwargs (NetBox's `handle`, without a job
        timeout: RQ consumed it); each occurrence gets a fresh run_id, chooses its queue again (a worker
        may have started or stopped since) and has its timeout computed again (endpoints may have been
        added or disabled since).
        """
        block = dict(sync or build_sync_block())
        if kwargs.get("interval") and sync is not None:
            block = {**block, "run_id": str(uuid.uuid4()), "errors": [], "stages": []}
        kwargs["job_timeout"] = sync_job_timeout(block)
        block["job_timeout"] = kwargs["job_timeout"]
        if not kwargs.get("queue_name"):
            choice = choose_queue()
            kwargs["queue_name"] = choice.name
            block = {
                **block,
                "queue": choice.record(),
                "warnings": [choice.warning] if choice.warning else [],
            }
        for attempt in (1, 2):
            try:
                with transaction.atomic():
                    job = super().enqueue(*args, sync=block, **kwargs)
                    job.data = {"sync": block}
                    job.save(update_fields=["data"])
                return job
            except IntegrityError:
                # Seen once in CI: the core_job id sequence handed out an id that already existed
                # (cause not found in hvsync, NetBox or netbox-branching). Queueing a sync must not
                # fail with a 500 for that: advance the sequence past the highest id and try once more.
                if attempt == 2:
                    raise
                advance_job_id_sequence()
        raise AssertionError("unreachable")

    def run(self, *args: Any, sync: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Preflight, scope, local reconciliation and the stage loop (netbox_hvsync.sync.runner)."""
        data = self.job.data or {}
        run_sync_job(self.job, self.logger, dict(data.get("sync") or sync or build_sync_block()))


def sync_job_timeout(block: dict[str, Any]) -> int:
    """Seconds RQ may run this sync: the plugin setting `job_timeout`, else the rule over the endpoints
    in scope (those the block names, or every enabled one when it names none, as the runner scopes)."""
    named = {int(i) for i in block.get("hv_endpoint_ids") or []}
    endpoints = len(named) if named else HvEndpoint.objects.filter(enabled=True).count()
    return job_timeout(endpoints, get_plugin_config("netbox_hvsync", "job_timeout"))


def advance_job_id_sequence() -> bool:
    """Move `core_job`'s id sequence past the highest id if it is behind; True when it was moved.

    The failed insert has already used one sequence value, so a single collision needs no move."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('core_job', 'id'), t.m) "
            "FROM (SELECT max(id) AS m FROM core_job) AS t, core_job_id_seq AS s WHERE t.m > s.last_value"
        )
        moved = cursor.fetchone() is not None
    logger.warning(
        "a new job collided with an existing core_job id; %s",
        "advanced the id sequence past the highest id" if moved else "retrying with the next id",
    )
    return moved


def enqueue_sync(
    *,
    user: Any = None,
    sync_types: Sequence[str] | None = None,
    hv_endpoint_ids: Sequence[int] | None = None,
    cluster_ids: Sequence[int] | None = None,
    node_ids: Sequence[int] | None = None,
    vm_ids: Sequence[int] | None = None,
    object_ids: Sequence[int] | None = None,
    batch_object_type: str | None = None,
    mode: str = SyncModeChoices.STAGED,
    backend_endpoint_id: int | None = None,
    schedule_at: datetime | None = None,
    interval: int | None = None,
    use_branch: bool = False,
) -> Job:
    """Queue one sync run (staged or selected objects) and return its core Job row.

    `use_branch`: the stages write into a netbox-branching working branch of the job's own, merged at
    the end (SPEC 3.3; netbox_hvsync.sync.branching)."""
    block = build_sync_block(
        sync_types=sync_types,
        hv_endpoint_ids=hv_endpoint_ids,
        cluster_ids=cluster_ids,
        node_ids=node_ids,
        vm_ids=vm_ids,
        object_ids=object_ids,
        batch_object_type=batch_object_type,
        mode=mode,
        backend_endpoint_id=backend_endpoint_id,
        use_branch=use_branch,
    )
    return SyncJob.enqueue(user=user, schedule_at=schedule_at, interval=interval, sync=block)
