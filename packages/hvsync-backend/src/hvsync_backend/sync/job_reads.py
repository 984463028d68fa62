"""Proxmox answers shared by the stage streams of one sync job.

The plugin runs a sync job as its stages' streams, one after the other, each naming the job (`job=`).
Each stream is a run of its own, and each run used to read what it needed from Proxmox again: a job read
every guest's config once per stage that reads guests' configs, six times for a full sync. The readers of a
job's runs are kept, per hv endpoint, for a while after the run ends, and the job's next run answers from
them. A job then sees Proxmox as it was at the job's first read of each path, as one run always did.

Only answers are kept: a read that failed, was cancelled or was still in flight when its run ended is
read again. A run without a job id shares nothing; a changed endpoint (a new Proxmox client) starts afresh.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader

#: A job's readers are dropped this long after its last run ended (its stages follow each other closely).
KEEP_SECONDS = 600.0
#: At most this many jobs' readers are kept (the least recently used go first).
MAX_JOBS = 4


class JobReads:
    """The Proxmox readers of recent jobs, by job id and hv endpoint."""

    def __init__(
        self,
        keep_seconds: float = KEEP_SECONDS,
        max_jobs: int = MAX_JOBS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keep_seconds = keep_seconds
        self.max_jobs = max_jobs
        self._clock = clock
        self._jobs: OrderedDict[str, tuple[float, dict[int, ProxmoxReader]]] = OrderedDict()

    def readers_for(self, job: str, sources: list[HvSource]) -> dict[int, ProxmoxReader]:
        """The readers a run of `job` over `sources` starts with (endpoint id -> reader): the job's kept
        readers, each of this run's endpoints with its answers only, and only while it reads through the
        same client (the same settings). Readers the run adds are kept with them (a job may run a stage
        for some endpoints at a time). Without a job id: a run's own, empty."""
        self._expire()
        if not job:
            return {}
        _, readers = self._jobs.pop(job, (0.0, {}))
        for source in sources:
            reader = readers.get(source.backend_id)
            if reader is None:
                continue
            if reader.source.client is source.client:
                reader.carry_over(source)
            else:
                del readers[source.backend_id]
        self._jobs[job] = (self._clock(), readers)
        while len(self._jobs) > self.max_jobs:
            self._jobs.popitem(last=False)
        return readers

    def finished(self, job: str) -> None:
        """A run of `job` ended: keep its readers from now on."""
        if job in self._jobs:
            self._jobs[job] = (self._clock(), self._jobs[job][1])

    def _expire(self) -> None:
        now = self._clock()
        for job in [job for job, (used, _) in self._jobs.items() if now - used > self.keep_seconds]:
            del self._jobs[job]
