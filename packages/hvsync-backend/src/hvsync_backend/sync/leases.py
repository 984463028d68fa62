"""At most one writing sync run per (Proxmox endpoint, stage) at a time, across backend processes.

Two runs writing the same objects at once collide in NetBox (unique-constraint failures reported as
stage failures, duplicates in between). A run takes every (endpoint, stage) pair it will write as rows of
`run_leases` in one transaction, all or none; the table's primary key is the lock, so it holds across
workers and hosts sharing the database. The run renews its rows while it runs and deletes them when it
ends; a process that dies leaves rows that expire after LEASE_SECONDS. A run asking for a pair another
run holds is refused with the holder named. Dry runs write nothing and take no lease.

A run started for a caller's job (`job=` on the stream) can be cancelled by that job id from any worker
(`request_cancel`): the flag is set on its rows, the run's watcher sees it within CANCEL_POLL_SECONDS and
stops the run, which ends with a `complete` saying it was cancelled.

A job reclaims its own leases (issue 39): when the plugin's stream broke and it runs the stage again (on
another address of this backend), the earlier run of the same job still holds the pairs. A run whose every
conflicting holder is an earlier run of the same non-empty job asks those runs to stop, waits up to
RECLAIM_WAIT_SECONDS for their leases to go, and takes the pairs; another job's lease is never reclaimed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager

import anyio
from sqlalchemy import delete, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hvsync_backend.db.models import RunLease
from hvsync_backend.db.session import session_scope

#: How long a lease outlives its last renewal (a crashed process's pairs are free after this).
LEASE_SECONDS = 120.0
#: How often a live run renews its leases.
RENEW_SECONDS = 30.0
#: How often a live run looks for a cancel request.
CANCEL_POLL_SECONDS = 2.0
#: How long a run waits for an earlier run of its own job to stop and release the pairs it wants.
RECLAIM_WAIT_SECONDS = 3 * CANCEL_POLL_SECONDS + 4.0


class RunCancelled(Exception):
    """The run's job asked to stop it (`request_cancel`)."""


class LeaseHeld(Exception):
    """Another run holds one of the pairs; the message names it (no secrets: ids and a run id)."""

    def __init__(self, endpoint_id: int, stage: str, run_id: str) -> None:
        self.endpoint_id, self.stage, self.run_id = endpoint_id, stage, run_id
        super().__init__(
            f"stage {stage} of hv endpoint {endpoint_id} is being synced by run {run_id}; "
            "wait for it to finish (or cancel it) and retry"
        )


class Leases:
    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.session_factory = factory

    def acquire(self, run_id: str, pairs: Iterable[tuple[int, str]], job: str = "") -> None:
        """Take every pair or none; raises LeaseHeld naming a current holder. Pairs held only by earlier runs
        of the same `job` are reclaimed (those runs are asked to stop first)."""
        wanted = sorted(set(pairs))
        if not wanted:
            return
        try:
            self._take(run_id, wanted, job)
        except LeaseHeld:
            if not job or not self._reclaim(run_id, wanted, job):
                raise
            self._take(run_id, wanted, job)

    def _reclaim(self, run_id: str, wanted: list[tuple[int, str]], job: str) -> bool:
        """Ask the earlier runs of `job` holding `wanted` to stop; True once their leases are gone. False
        (at once) when another job holds one of the pairs, or after RECLAIM_WAIT_SECONDS."""
        live = tuple_(RunLease.endpoint_id, RunLease.stage).in_(wanted)
        with session_scope(self.session_factory) as session:
            holders = session.execute(
                select(RunLease.job, RunLease.run_id).where(live, RunLease.expires_at >= time.time())
            ).all()
            if not holders or any(h_job != job or h_run == run_id for h_job, h_run in holders):
                return not holders
            session.execute(update(RunLease).where(live, RunLease.job == job).values(cancel_requested=True))
        deadline = time.monotonic() + RECLAIM_WAIT_SECONDS
        while time.monotonic() < deadline:
            time.sleep(0.2)
            with self.session_factory() as session:
                if not session.execute(
                    select(RunLease.run_id).where(live, RunLease.expires_at >= time.time())
                ).first():
                    return True
        return False

    def _take(self, run_id: str, wanted: list[tuple[int, str]], job: str) -> None:
        now = time.time()
        try:
            with session_scope(self.session_factory) as session:
                session.execute(
                    delete(RunLease).where(
                        tuple_(RunLease.endpoint_id, RunLease.stage).in_(wanted), RunLease.expires_at < now
                    )
                )
                session.add_all(
                    RunLease(endpoint_id=e, stage=s, run_id=run_id, expires_at=now + LEASE_SECONDS, job=job)
                    for e, s in wanted
                )
                session.flush()
        except IntegrityError:
            holder = self.holder(wanted)
            if holder is None:  # released between our insert and this read: the caller may retry
                holder = (wanted[0][0], wanted[0][1], "(just finished)")
            raise LeaseHeld(*holder) from None

    def holder(self, pairs: list[tuple[int, str]]) -> tuple[int, str, str] | None:
        with self.session_factory() as session:
            row = session.execute(
                select(RunLease.endpoint_id, RunLease.stage, RunLease.run_id)
                .where(tuple_(RunLease.endpoint_id, RunLease.stage).in_(pairs))
                .order_by(RunLease.endpoint_id, RunLease.stage)
            ).first()
        return (int(row[0]), str(row[1]), str(row[2])) if row else None

    def renew(self, run_id: str) -> None:
        with session_scope(self.session_factory) as session:
            session.execute(
                update(RunLease)
                .where(RunLease.run_id == run_id)
                .values(expires_at=time.time() + LEASE_SECONDS)
            )

    def request_cancel(self, job: str) -> int:
        """Flag every live run of `job` to stop; how many leases were flagged (0: nothing running)."""
        with session_scope(self.session_factory) as session:
            result = session.execute(
                update(RunLease)
                .where(RunLease.job == job, RunLease.expires_at >= time.time())
                .values(cancel_requested=True)
            )
            return int(getattr(result, "rowcount", 0) or 0)

    def cancel_requested(self, run_id: str) -> bool:
        with self.session_factory() as session:
            return bool(
                session.execute(
                    select(RunLease.endpoint_id).where(RunLease.run_id == run_id, RunLease.cancel_requested)
                ).first()
            )

    def release(self, run_id: str) -> None:
        with session_scope(self.session_factory) as session:
            session.execute(delete(RunLease).where(RunLease.run_id == run_id))


@asynccontextmanager
async def holding(
    leases: Leases, run_id: str, pairs: Iterable[tuple[int, str]], job: str = ""
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Hold the pairs for the block (raises LeaseHeld before it starts), renewing them as it runs; a
    cancel request for `job` stops the block with RunCancelled.

    Yields `release`: a run calls it before it sends its final frame, so a client that starts the next run
    the moment it reads `complete` never finds this run's leases still held."""
    wanted = list(pairs)
    await anyio.to_thread.run_sync(leases.acquire, run_id, wanted, job)
    body = asyncio.current_task()
    cancelled = False

    async def watch() -> None:
        nonlocal cancelled
        last_renewal = time.monotonic()
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS if job else RENEW_SECONDS)
            if time.monotonic() - last_renewal >= RENEW_SECONDS:
                await anyio.to_thread.run_sync(leases.renew, run_id)
                last_renewal = time.monotonic()
            if not job:
                continue
            stop: bool = await anyio.to_thread.run_sync(leases.cancel_requested, run_id)
            if stop:
                cancelled = True
                if body is not None:
                    body.cancel()
                return

    watcher = asyncio.create_task(watch()) if wanted else None
    released = False

    async def release() -> None:
        nonlocal released
        if not released:
            released = True
            if watcher is not None:
                watcher.cancel()
            await anyio.to_thread.run_sync(leases.release, run_id)

    try:
        yield release
    except asyncio.CancelledError:
        if not cancelled or body is None:
            raise
        body.uncancel()  # our own cancel: end the run normally, as cancelled
        raise RunCancelled(f"run {run_id} was cancelled by its job") from None
    finally:
        await release()
