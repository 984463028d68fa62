"""One writing run per (hv endpoint, stage) across processes (issue 12): two jobs running one stage for one
endpoint at once used to collide in NetBox (unique-constraint failures reported as stage failures)."""

from __future__ import annotations

import time

import pytest
from hvsync_backend.db.models import RunLease
from hvsync_backend.db.session import make_engine, make_session_factory, upgrade_to_head
from hvsync_backend.sync import leases as leases_module
from hvsync_backend.sync.leases import LeaseHeld, Leases
from sqlalchemy import select, update
from support import HV, INV, parse_stream


@pytest.fixture
def two_workers(database_url):
    """Two Leases over one database, as two backend processes would have."""
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    factory = make_session_factory(engine)
    yield Leases(factory), Leases(make_session_factory(engine)), factory
    engine.dispose()


def test_a_held_pair_is_refused_naming_its_holder_and_nothing_is_taken(two_workers) -> None:
    first, second, factory = two_workers
    first.acquire("run-a", [(1, "virtual-machines"), (1, "vm-disks")])
    with pytest.raises(LeaseHeld) as held:
        second.acquire("run-b", [(2, "virtual-machines"), (1, "vm-disks")])
    assert (held.value.endpoint_id, held.value.stage, held.value.run_id) == (1, "vm-disks", "run-a")
    assert "run-a" in str(held.value)
    with factory() as session:  # all or none: run-b took nothing, not even the free pair
        assert session.scalars(select(RunLease.run_id)).all() == ["run-a", "run-a"]
    second.acquire("run-c", [(2, "virtual-machines")])  # another endpoint's stage is free
    first.release("run-a")
    second.acquire("run-b", [(1, "vm-disks")])


def test_a_crashed_holders_leases_expire(two_workers) -> None:
    first, second, factory = two_workers
    first.acquire("run-a", [(1, "devices")])
    with factory.begin() as session:  # its process died: no renewal since LEASE_SECONDS
        session.execute(update(RunLease).values(expires_at=time.time() - 1))
    second.acquire("run-b", [(1, "devices")])
    assert second.holder([(1, "devices")]) == (1, "devices", "run-b")


def _configured(backend, auth) -> None:
    c = backend.client
    assert c.post("/inventory/endpoint", headers=auth, json=INV).status_code == 201
    assert c.post("/hv/endpoints", headers=auth, json=HV).status_code == 201


def test_a_second_run_of_a_held_stage_completes_with_409(backend, auth) -> None:
    _configured(backend, auth)
    hv_id = backend.client.get("/hv/endpoints", headers=auth).json()[0]["id"]
    Leases(backend.context.session_factory).acquire("other-worker-run", [(hv_id, "devices")])
    r = backend.client.get("/dcim/devices/create/stream", headers=auth)
    frames = parse_stream(r.text)
    assert frames[-1].event == "complete" and frames[-1].data["ok"] is False
    error = frames[-1].data["error"]
    assert error["status"] == 409 and "other-worker-run" in error["detail"] and error["source"] == "backend"
    r = backend.client.post("/sync/individual/cluster", headers=auth)
    assert r.status_code == 409 and "other-worker-run" in r.json()["detail"]


def test_a_dry_run_takes_no_lease(backend, auth, monkeypatch) -> None:
    _configured(backend, auth)
    taken: list[list] = []
    monkeypatch.setattr(
        leases_module.Leases, "acquire", lambda self, run_id, pairs, job="": taken.append(list(pairs))
    )
    backend.client.get("/dcim/devices/create/stream", headers=auth, params={"dry_run": "true"})
    assert taken == [[]]


def test_a_run_releases_its_leases_when_it_ends(backend, auth) -> None:
    _configured(backend, auth)
    r = backend.client.get("/dcim/devices/create/stream", headers=auth)  # NetBox is not there: it fails
    assert parse_stream(r.text)[-1].event == "complete"
    with backend.context.session_factory() as session:
        assert session.scalars(select(RunLease)).all() == []


async def test_a_cancel_request_from_another_worker_stops_the_run(two_workers, monkeypatch) -> None:
    """Cancelling the NetBox job did not stop its backend run: the stage kept writing."""
    import asyncio

    from hvsync_backend.sync.leases import RunCancelled, holding

    first, second, factory = two_workers
    monkeypatch.setattr(leases_module, "CANCEL_POLL_SECONDS", 0.05)
    reached: list[str] = []

    async def run() -> None:
        async with holding(first, "run-a", [(1, "devices")], job="job-1"):
            reached.append("writing")
            await asyncio.sleep(30)
            reached.append("finished")  # never: the cancel stops it

    task = asyncio.create_task(run())
    for _ in range(500):  # until the run holds its leases and is writing
        if reached:
            break
        await asyncio.sleep(0.01)
    assert second.request_cancel("job-other") == 0
    assert second.request_cancel("job-1") == 1
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(task, 5)
    assert reached == ["writing"]
    with factory() as session:
        assert session.scalars(select(RunLease)).all() == []  # released on the way out


def test_cancel_route_names_the_job_field(backend, auth) -> None:
    c = backend.client
    assert c.post("/sync/cancel", headers=auth, params={"job": "job-1"}).json() == {"cancelled": 0}
    for bad in ("", "a b", "x" * 65, "j\u00e9"):
        r = c.post("/sync/cancel", headers=auth, params={"job": bad})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "job"], bad
    r = c.get("/dcim/devices/create/stream", headers=auth, params={"job": "bad job"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "job"]
