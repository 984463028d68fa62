"""Proxmox reads a sync job's later streams will need, started in an earlier stream.

One full-update run starts every stage's Proxmox reads at its start, so they overlap NetBox's reads. The
plugin's sync job runs one stream per stage instead, and names on each the stages the job runs after it
(`then=`). The stream then starts, beside its own work, the per-guest reads those stages' kinds need
(`Kind.read_ahead`: guest-agent addresses, snapshot lists) into the job's readers (sync/job_reads.py),
which keep them running between streams; the later stream awaits or finds them. They use slots of their
own (`ProxmoxReader.get(ahead=True)`), so the running stream's reads never queue behind them; their
failures are not reported here (the stage that needs the data reads it again and reports them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hvsync_backend.sync.framework import Stage
from hvsync_backend.sync.guests import wanted
from hvsync_backend.sync.proxmox import Guest, ProxmoxReader, ProxmoxReadError
from hvsync_backend.sync.run import SyncContext

Start = Callable[[Awaitable[Any]], None]


def read_ahead(ctx: SyncContext, later: Sequence[Stage], start: Start) -> None:
    """Start through `start` (the job's keeper of such work) the reads of the kinds of `later` this run
    does not reconcile itself."""
    running = {type(kind) for kind in ctx.upcoming}
    for kind in {type(kind): kind for stage in later for kind in stage.kinds}.values():
        if type(kind) not in running:
            work = kind.read_ahead(ctx)
            if work is not None:
                start(work)


async def per_guest(ctx: SyncContext, read: Callable[[ProxmoxReader, Guest], Awaitable[Any]]) -> None:
    """`read` for every guest in the run's scope on every endpoint, once Proxmox has listed them."""

    async def endpoint(reader: ProxmoxReader) -> None:
        try:
            found = await reader.guests(lambda guest: wanted(guest, ctx), with_config=False)
        except ProxmoxReadError:
            return
        await asyncio.gather(*(read(reader, guest) for guest in found), return_exceptions=True)

    await asyncio.gather(
        *(endpoint(ctx.reader(s)) for s in ctx.sources if s.identity not in ctx.failed_endpoints)
    )
