"""At most one writing sync run per (Proxmox endpoint, stage) at a time, across backend processes.

Two runs writing the same objects at once collide in NetBox (unique-constraint failures reported as
stage failures, duplicates in between). A run takes every (endpoint, stage) pair it will write as rows of
`run_leases` in one transaction, all or none; the table's primary key is the lock, so it holds across
workers and hosts sharing the database. The run renews its rows while it runs and deletes them when it
ends; a process that dies leaves rows that expire after LEASE_SECONDS. A run asking for a pair another
run holds is refused with the holder named. Dry runs write nothing and take no lease.
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

    def acquire(self, run_id: str, pairs: Iterable[tuple[int, str]]) -> None:
        """Take every pair or none; raises LeaseHeld naming a current holder."""
        wanted = sorted(set(pairs))
        if not wanted:
            return
        now = time.time()
        try:
            with session_scope(self.session_factory) as session:
                session.execute(
                    delete(RunLease).where(
                        tuple_(RunLease.endpoint_id, RunLease.stage).in_(wanted), RunLease.expires_at < now
                    )
                )
                session.add_all(
                    RunLease(endpoint_id=e, stage=s, run_id=run_id, expires_at=now + LEASE_SECONDS)
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

    def release(self, run_id: str) -> None:
        with session_scope(self.session_factory) as session:
            session.execute(delete(RunLease).where(RunLease.run_id == run_id))


@asynccontextmanager
async def holding(
    leases: Leases, run_id: str, pairs: Iterable[tuple[int, str]]
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Hold the pairs for the block (raises LeaseHeld before it starts), renewing them as it runs.

    Yields `release`: a run calls it before it sends its final frame, so a client that starts the next run
    the moment it reads `complete` never finds this run's leases still held."""
    wanted = list(pairs)
    await anyio.to_thread.run_sync(lambda: leases.acquire(run_id, wanted))

    async def renew() -> None:
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            await anyio.to_thread.run_sync(lambda: leases.renew(run_id))

    renewer = asyncio.create_task(renew())
    released = False

    async def release() -> None:
        nonlocal released
        if not released:
            released = True
            renewer.cancel()
            await anyio.to_thread.run_sync(lambda: leases.release(run_id))

    try:
        yield release
    finally:
        await release()
