"""What the stage streams of one sync job share: Proxmox answers and NetBox list reads.

The plugin runs a sync job as its stages' streams, one after the other, each naming the job (`job=`).
Each stream is a run of its own, and each run used to read everything it needed again: a job read every
guest's config once per stage that reads guests' configs (six times for a full sync), and the VM list and
its sidecars once per stage that links to VMs. A job's Proxmox readers (per hv endpoint) and its NetBox
list cache (per NetBox and branch) are kept for a while after a run ends, and the job's next run starts
from them. A job then sees Proxmox as it was at the job's first read of each path, and NetBox as first
read plus what the job wrote, as one full-update run always did.

Only answers are kept: a read that failed, was cancelled or was still in flight when its run ended is
read again. A run without a job id shares nothing; a changed endpoint (a new Proxmox client) or another
NetBox, token or branch starts afresh. A job's streams follow each other within a second or two, so its
reads are kept only a minute after its last stream ended (never while one runs): a caller that gives
every run the same id (a cron job with a fixed `--job`) starts each run afresh, unless it runs again
within that minute.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from hvsync_backend.inventory.client import NetBoxConfig
from hvsync_backend.inventory.list_cache import ListCache
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader

#: A job's reads are dropped this long after its last run ended (its stages follow each other closely;
#: a later run reusing the id must not see the world as an earlier job read it).
KEEP_SECONDS = 60.0
#: At most this many jobs' reads are kept (the least recently used idle job goes first; a running job's
#: reads are held by its run anyway, so dropping them would free nothing and cost its next stream).
MAX_JOBS = 4


@dataclass
class _Job:
    used: float
    #: runs of the job now in progress (the job's reads are not dropped while one runs)
    running: int = 0
    readers: dict[int, ProxmoxReader] = field(default_factory=dict)
    #: the NetBox (URL, token, branch) the job's list cache was read from, and the cache
    netbox: NetBoxConfig | None = None
    lists: ListCache = field(default_factory=ListCache)


class JobReads:
    """The reads of recent jobs, by job id: Proxmox readers by hv endpoint and one NetBox list cache."""

    def __init__(
        self,
        keep_seconds: float = KEEP_SECONDS,
        max_jobs: int = MAX_JOBS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keep_seconds = keep_seconds
        self.max_jobs = max_jobs
        self._clock = clock
        self._jobs: OrderedDict[str, _Job] = OrderedDict()

    def readers_for(self, job: str, sources: list[HvSource]) -> dict[int, ProxmoxReader]:
        """The readers a run of `job` over `sources` starts with (endpoint id -> reader): the job's kept
        readers, each of this run's endpoints with its answers only, and only while it reads through the
        same client (the same settings). Readers the run adds are kept with them (a job may run a stage
        for some endpoints at a time). Without a job id: a run's own, empty."""
        if not job:
            self._expire()
            return {}
        readers = self._touch(job).readers
        for source in sources:
            reader = readers.get(source.backend_id)
            if reader is None:
                continue
            if reader.source.client is source.client:
                reader.carry_over(source)
            else:
                del readers[source.backend_id]
        return readers

    def lists_for(self, job: str, netbox: NetBoxConfig) -> ListCache | None:
        """The NetBox list cache a run of `job` against `netbox` (its URL, token and branch) starts with:
        the job's earlier runs' reads there, or a new cache the job keeps. Without a job id: None (the
        run's client keeps its own)."""
        if not job:
            self._expire()
            return None
        state = self._touch(job)
        if state.netbox != netbox:  # one NetBox view per job: a run elsewhere starts it afresh
            state.netbox, state.lists = netbox, ListCache()
        return state.lists

    def started(self, job: str) -> None:
        """A run of `job` starts: its reads stay until it has `finished`."""
        if job:
            self._touch(job).running += 1

    def finished(self, job: str) -> None:
        """A run of `job` ended: keep its reads `keep_seconds` from now."""
        if job in self._jobs:
            state = self._jobs[job]
            state.running = max(0, state.running - 1)
            state.used = self._clock()

    def _touch(self, job: str) -> _Job:
        """The kept reads of `job` (new if none), now the most recently used."""
        self._expire()
        state = self._jobs.pop(job, None) or _Job(self._clock())
        state.used = self._clock()
        self._jobs[job] = state
        while len(self._jobs) > self.max_jobs:
            idle = next((name for name, kept in self._jobs.items() if not kept.running and name != job), None)
            if idle is None:
                break  # every other kept job is running
            del self._jobs[idle]
        return state

    def _expire(self) -> None:
        now = self._clock()
        for job in [
            job
            for job, state in self._jobs.items()
            if not state.running and now - state.used > self.keep_seconds
        ]:
            del self._jobs[job]
