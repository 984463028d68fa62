"""hvsync's own RQ queue (netbox_hvsync.queue): a sync goes on `netbox_hvsync.sync` when a worker listens
there, else on `default` with a warning in its sync block; the plugin setting `queue` picks the queue;
each occurrence of a recurring sync chooses again.

Workers are real RQ worker registrations in the test Redis (birth registered, never started), removed
after each test."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.django_db

SYNC_QUEUE = "netbox_hvsync.sync"


@pytest.fixture
def worker_on() -> Iterator[Callable[[str], Any]]:
    """Register an RQ worker listening on a queue, as `rqworker <queue>` does at start."""
    from django_rq.queues import get_connection
    from rq import Queue, Worker

    registered: list[Any] = []

    def register(name: str) -> Any:
        connection = get_connection(name)
        worker = Worker(
            [Queue(name, connection=connection)],
            connection=connection,
            name=f"hvsync-test-{uuid.uuid4().hex}",
        )
        worker.register_birth()
        registered.append(worker)
        return worker

    yield register
    for worker in registered:
        stop(worker)


def stop(worker: Any) -> None:
    worker.register_death()
    worker.connection.delete(worker.key)


@pytest.fixture
def queue_setting(settings) -> Callable[[str], None]:
    """Set PLUGINS_CONFIG["netbox_hvsync"]["queue"], keeping the instance's other plugin settings."""

    def set_queue(name: str) -> None:
        config = {key: dict(value) for key, value in settings.PLUGINS_CONFIG.items()}
        config["netbox_hvsync"]["queue"] = name
        settings.PLUGINS_CONFIG = config

    return set_queue


def queued(**kwargs: Any) -> Any:
    from core.models import Job
    from netbox_hvsync.jobs import enqueue_sync

    return Job.objects.get(pk=enqueue_sync(sync_types=["storage"], **kwargs).pk)


def test_the_plugin_declares_its_queue_and_netbox_registers_it():
    from django.conf import settings
    from netbox.plugins import get_plugin_config
    from netbox_hvsync import HvsyncConfig

    assert HvsyncConfig.queues == ["sync"]
    assert SYNC_QUEUE in settings.RQ_QUEUES
    assert get_plugin_config("netbox_hvsync", "queue") == SYNC_QUEUE


def test_a_served_queue_takes_the_sync(worker_on):
    worker_on(SYNC_QUEUE)
    job = queued()
    assert job.queue_name == SYNC_QUEUE
    block = job.data["sync"]
    assert block["queue"] == {"name": SYNC_QUEUE, "requested": SYNC_QUEUE, "warning": None}
    assert block["warnings"] == []


def test_a_worker_of_other_queues_only_does_not_serve_hvsyncs(worker_on):
    worker_on("default")
    job = queued()
    assert job.queue_name == "default"


def test_nobody_serving_falls_back_to_default_with_a_warning_the_run_keeps():
    from core.models import Job
    from netbox_hvsync.jobs import SyncJob

    job = queued()
    assert job.queue_name == "default"
    block = job.data["sync"]
    warning = block["queue"]["warning"]
    assert block["queue"]["name"] == "default" and block["queue"]["requested"] == SYNC_QUEUE
    assert warning.startswith("queue 'netbox_hvsync.sync' has no RQ worker listening; the sync was queued on")
    assert "rqworker netbox_hvsync.sync" in warning and block["warnings"] == [warning]

    SyncJob.handle(job, sync=block)  # fails B1 (no backend); the warning stays in the block and the log
    ran = Job.objects.get(pk=job.pk)
    assert ran.status == "failed" and ran.data["sync"]["warnings"][0] == warning
    assert ("warning", warning) in [(entry["level"], entry["message"]) for entry in ran.log_entries]


def test_a_dead_worker_no_longer_serves(worker_on):
    stop(worker_on(SYNC_QUEUE))
    assert queued().queue_name == "default"


def test_the_setting_chooses_the_queue(worker_on, queue_setting):
    queue_setting("low")
    assert queued().queue_name == "default"  # nobody serves `low` in the test Redis
    worker_on("low")
    job = queued()
    assert job.queue_name == "low" and job.data["sync"]["queue"]["requested"] == "low"


def test_the_setting_default_needs_no_check_and_warns_nothing(queue_setting):
    queue_setting("default")
    job = queued()
    assert job.queue_name == "default" and job.data["sync"]["warnings"] == []
    assert job.data["sync"]["queue"] == {"name": "default", "requested": "default", "warning": None}


def test_an_unknown_queue_in_the_setting_falls_back_by_name(queue_setting):
    queue_setting("no-such-queue")
    job = queued()
    assert job.queue_name == "default"
    assert "'no-such-queue' is not one of NetBox's RQ queues" in job.data["sync"]["queue"]["warning"]


def test_recurring_occurrences_choose_the_queue_again(worker_on):
    from core.models import Job
    from netbox_hvsync.jobs import SYNC_JOB_NAME, SyncJob

    first = queued(interval=60)
    assert first.queue_name == "default"
    worker = worker_on(SYNC_QUEUE)
    SyncJob.handle(first, sync=first.data["sync"])  # fails B1, then schedules the next occurrence
    second = Job.objects.filter(name=SYNC_JOB_NAME, interval=60).exclude(pk=first.pk).get()
    assert second.status == "scheduled" and second.queue_name == SYNC_QUEUE
    assert (
        second.data["sync"]["warnings"] == []
        and second.data["sync"]["run_id"] != first.data["sync"]["run_id"]
    )

    stop(worker)
    SyncJob.handle(second, sync=second.data["sync"])
    third = Job.objects.filter(name=SYNC_JOB_NAME, interval=60).exclude(pk__in=[first.pk, second.pk]).get()
    assert (
        third.queue_name == "default"
        and "has no RQ worker listening" in third.data["sync"]["queue"]["warning"]
    )


@pytest.fixture
def silent_redis() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a hung Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not done.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    done.set()
    thread.join(timeout=5)
    for conn in accepted:
        conn.close()
    server.close()


def test_a_hung_redis_is_asked_with_a_timeout_and_the_sync_falls_back(settings, silent_redis, monkeypatch):
    from netbox_hvsync import queue

    monkeypatch.setattr(queue, "REDIS_TIMEOUT", 0.5)
    queues = dict(settings.RQ_QUEUES)
    queues[SYNC_QUEUE] = {**queues[SYNC_QUEUE], "HOST": "127.0.0.1", "PORT": silent_redis}
    settings.RQ_QUEUES = queues
    started = time.monotonic()
    choice = queue.choose_queue()
    assert time.monotonic() - started < 3  # one connect and one read of 0.5 s each at most, no retries
    assert choice.name == "default"
    assert choice.warning and "could not be checked for RQ workers (TimeoutError)" in choice.warning
