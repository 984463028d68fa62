"""The RQ timeout of every sync job (netbox_hvsync.jobs, rule in netbox_hvsync.rules.job_timeout), read
back from Redis as the worker will read it: a queued, a scheduled and a recurring occurrence each carry
the plugin's own timeout, never NetBox's RQ_DEFAULT_TIMEOUT (300 s on a stock NetBox, which killed a
long sync half-written).

The enqueue's on-commit callbacks run for real (`django_capture_on_commit_callbacks(execute=True)`), so
the RQ jobs exist in the test Redis; each test deletes the ones it made."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def rq_job() -> Iterator[Callable[[Any], Any]]:
    """The RQ job of a core Job row, read from its queue in Redis; deleted from Redis after the test, so
    no worker started later on these Redis databases picks it up."""
    import django_rq

    fetched: list[Any] = []

    def fetch(job: Any) -> Any:
        found = django_rq.get_queue(job.queue_name).fetch_job(str(job.job_id))
        assert found is not None, f"no RQ job {job.job_id} on {job.queue_name}"
        fetched.append(found)
        return found

    yield fetch
    for found in fetched:
        found.delete()


def endpoints(count: int, enabled: bool = True) -> list[Any]:
    from netbox_hvsync.models import HvEndpoint

    return [
        HvEndpoint.objects.create(
            name=f"pve-timeout-{enabled}-{i}",
            domain=f"pve{i}.timeout.example.net",
            username="root@pam",
            access_methods=["password"],
            enabled=enabled,
        )
        for i in range(count)
    ]


def plugin_setting(settings: Any, **values: Any) -> None:
    config = {key: dict(value) for key, value in settings.PLUGINS_CONFIG.items()}
    config["netbox_hvsync"].update(values)
    settings.PLUGINS_CONFIG = config


def test_the_test_netbox_runs_on_the_stock_rq_timeout():
    """The bug hid behind RQ_DEFAULT_TIMEOUT = 7200 in the test configuration; it is NetBox's default now."""
    from django.conf import settings

    assert settings.RQ_DEFAULT_TIMEOUT == 300


def test_a_queued_sync_carries_the_plugin_timeout(rq_job, django_capture_on_commit_callbacks):
    from netbox_hvsync.jobs import enqueue_sync

    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue_sync(sync_types=["storage"])
    found = rq_job(job)
    assert found.timeout == 7200 and found.get_status() == "queued"
    assert job.data["sync"]["job_timeout"] == 7200


def test_the_timeout_grows_with_the_endpoints_in_scope(rq_job, django_capture_on_commit_callbacks):
    """1800 s of push ceiling plus 1800 s per endpoint, never below 7200: 5 enabled endpoints (2 disabled
    ones do not count) get 10800 s; a job naming 4 of them gets 9000 s."""
    from netbox_hvsync.jobs import enqueue_sync

    made = endpoints(5)
    endpoints(2, enabled=False)
    with django_capture_on_commit_callbacks(execute=True):
        every = enqueue_sync()
        named = enqueue_sync(hv_endpoint_ids=[e.pk for e in made[:4]])
    assert rq_job(every).timeout == 10800 and every.data["sync"]["job_timeout"] == 10800
    assert rq_job(named).timeout == 9000 and named.data["sync"]["job_timeout"] == 9000


def test_a_scheduled_sync_carries_the_plugin_timeout(rq_job, django_capture_on_commit_callbacks):
    from django.utils import timezone
    from netbox_hvsync.jobs import enqueue_sync

    endpoints(6)
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue_sync(schedule_at=timezone.now() + timedelta(hours=1))
    found = rq_job(job)
    assert job.status == "scheduled" and found.get_status() == "scheduled"
    assert found.timeout == 1800 + 6 * 1800 == job.data["sync"]["job_timeout"]


def test_each_recurring_occurrence_computes_its_timeout_again(rq_job, django_capture_on_commit_callbacks):
    """NetBox's JobRunner.handle re-enqueues a recurring job in its `finally` with the kwargs the worker
    passed it, which no longer hold a timeout (RQ consumed it): the occurrence NetBox schedules carries
    the plugin's timeout all the same, computed over the endpoints enabled by then."""
    from core.models import Job
    from netbox_hvsync.jobs import SYNC_JOB_NAME, SyncJob, enqueue_sync

    with django_capture_on_commit_callbacks(execute=True):
        first = enqueue_sync(interval=60)
    assert rq_job(first).timeout == 7200

    endpoints(5)  # enabled after the first occurrence was queued
    with django_capture_on_commit_callbacks(execute=True):
        SyncJob.handle(first, sync=first.data["sync"])  # fails fast (no backend), then reschedules
    assert Job.objects.get(pk=first.pk).status == "failed"
    second = Job.objects.filter(name=SYNC_JOB_NAME, interval=60).exclude(pk=first.pk).get()
    found = rq_job(second)
    assert second.status == "scheduled" and found.get_status() == "scheduled"
    assert found.timeout == 10800 == second.data["sync"]["job_timeout"]


def test_the_setting_replaces_the_rule_for_every_kind_of_occurrence(
    settings, rq_job, django_capture_on_commit_callbacks
):
    from django.utils import timezone
    from netbox_hvsync.jobs import enqueue_sync

    plugin_setting(settings, job_timeout=900)
    endpoints(8)
    with django_capture_on_commit_callbacks(execute=True):
        queued = enqueue_sync()
        scheduled = enqueue_sync(schedule_at=timezone.now() + timedelta(hours=1), interval=120)
    assert rq_job(queued).timeout == 900 and rq_job(scheduled).timeout == 900
    assert queued.data["sync"]["job_timeout"] == scheduled.data["sync"]["job_timeout"] == 900
