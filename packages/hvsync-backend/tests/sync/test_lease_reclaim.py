"""A job reclaims its own leases (issue 39): the plugin's re-run of a stage after its stream broke (on
another address of the same backend) found the earlier run of the same job still holding the pairs and
was refused with 409. The re-run now asks that run to stop and takes the pairs; another job's lease holds."""

from __future__ import annotations

import asyncio

import pytest
from hvsync_backend.db.models import RunLease
from hvsync_backend.db.session import make_engine, make_session_factory, upgrade_to_head
from hvsync_backend.sync import leases as leases_module
from hvsync_backend.sync.leases import LeaseHeld, Leases, RunCancelled, holding
from sqlalchemy import select


@pytest.fixture
def two_workers(database_url):
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    factory = make_session_factory(engine)
    yield Leases(factory), Leases(make_session_factory(engine)), factory
    engine.dispose()


async def test_a_rerun_of_the_same_job_stops_the_earlier_run_and_takes_its_pairs(two_workers, monkeypatch):
    first, second, factory = two_workers
    monkeypatch.setattr(leases_module, "CANCEL_POLL_SECONDS", 0.05)
    reached: list[str] = []

    async def earlier() -> None:  # the run whose stream the plugin lost: it is still writing
        async with holding(first, "run-a", [(1, "devices"), (1, "vm-disks")], job="job-1"):
            reached.append("writing")
            await asyncio.sleep(30)
            reached.append("finished")

    task = asyncio.create_task(earlier())
    for _ in range(500):
        if reached:
            break
        await asyncio.sleep(0.01)

    async def rerun() -> list[str]:
        async with holding(second, "run-b", [(1, "devices")], job="job-1"):
            with factory() as session:
                return list(session.scalars(select(RunLease.run_id)))

    held = await asyncio.wait_for(rerun(), 10)
    assert held == ["run-b"]  # the earlier run stopped and released both of its pairs
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(task, 5)
    assert reached == ["writing"]


def test_another_jobs_lease_is_never_reclaimed(two_workers) -> None:
    first, second, factory = two_workers
    first.acquire("run-a", [(1, "devices")], job="job-1")
    with pytest.raises(LeaseHeld) as held:
        second.acquire("run-b", [(1, "devices")], job="job-2")
    assert held.value.run_id == "run-a"
    with factory() as session:
        rows = session.scalars(select(RunLease)).all()
    assert [(r.run_id, r.cancel_requested) for r in rows] == [("run-a", False)]  # not asked to stop
    with pytest.raises(LeaseHeld):  # no job: nothing to reclaim by
        second.acquire("run-c", [(1, "devices")])


def test_a_holder_that_does_not_stop_keeps_its_pairs(two_workers, monkeypatch) -> None:
    """A same-job holder that never releases (its process hangs) is not overrun: 409 after the wait."""
    first, second, _ = two_workers
    monkeypatch.setattr(leases_module, "RECLAIM_WAIT_SECONDS", 0.5)
    first.acquire("run-a", [(1, "devices")], job="job-1")  # no watcher: it never sees the request
    with pytest.raises(LeaseHeld):
        second.acquire("run-b", [(1, "devices")], job="job-1")
    assert second.holder([(1, "devices")]) == (1, "devices", "run-a")
