"""A sync job's stage streams share their Proxmox answers (sync/job_reads.py): the next stage of one job
does not read again what an earlier one read; failures are read again; other jobs share nothing."""

from __future__ import annotations

import collections
from typing import Any

import pytest
from hvsync_backend.sync.job_reads import JobReads
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader, ProxmoxReadError
from hvsync_backend.sync.registry import BY_SLUG
from stage_harness import MemoryNetBox, emulator_source, run_context

PLUGIN_ENDPOINTS = "plugins/hvsync/hv-endpoints"


class Counting:
    """A Proxmox client that counts the reads it sends, by path."""

    def __init__(self, inner: Any = None, failing: set[str] | None = None) -> None:
        self.inner = inner
        self.failing = set(failing or ())
        self.sent: collections.Counter[str] = collections.Counter()

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        self.sent[path] += 1
        if path in self.failing:
            self.failing.discard(path)  # fails once, then answers
            raise TimeoutError("no answer")
        return await self.inner.get(path, params) if self.inner is not None else {"path": path}


def configs(sent: collections.Counter[str]) -> int:
    return sum(n for path, n in sent.items() if path.endswith("/config"))


async def run_one(jobs: JobReads, job: str, source: HvSource, netbox: MemoryNetBox, slug: str) -> None:
    ctx = run_context(source, netbox)
    ctx.readers = jobs.readers_for(job, [source])
    try:
        await BY_SLUG[slug].run(ctx)
    finally:
        ctx.cancel_background()
        jobs.finished(job)


async def test_a_jobs_next_stage_reads_no_guest_config_an_earlier_stage_read(pve_emulator) -> None:
    base = emulator_source(pve_emulator)
    client = Counting(base.client)
    source = HvSource(base.backend_id, base.name, client, site_slug=base.site_slug)
    netbox = MemoryNetBox()
    netbox.rows[PLUGIN_ENDPOINTS] = {1: {"id": 1, "name": "emu (inv:1)", "backend_id": 1}}
    jobs = JobReads()
    await run_one(jobs, "job-1", source, netbox, "devices")
    await run_one(jobs, "job-1", source, netbox, "virtual-machines")
    read_by_vms = configs(client.sent)
    assert read_by_vms > 0
    client.sent.clear()
    await run_one(jobs, "job-1", source, netbox, "vm-disks")
    assert configs(client.sent) == 0  # the same job: the VM stage's answers
    assert netbox.rows["virtualization/virtual-disks"]  # ... and the disks were written from them
    client.sent.clear()
    await run_one(jobs, "job-2", source, netbox, "vm-disks")
    assert configs(client.sent) == read_by_vms  # another job reads Proxmox itself
    client.sent.clear()
    await run_one(jobs, "", source, netbox, "vm-disks")
    assert configs(client.sent) == read_by_vms  # and so does a run that names no job


async def test_a_failed_read_is_read_again_by_the_jobs_next_run() -> None:
    client = Counting(failing={"nodes"})
    source = HvSource(1, "pve (inv:1)", client)
    jobs = JobReads()
    readers = jobs.readers_for("job-1", [source])
    assert readers == {}
    reader = readers.setdefault(1, ProxmoxReader(source))  # as the run's context adds it
    with pytest.raises(ProxmoxReadError):
        await reader.get("nodes")
    assert await reader.get("cluster/status") == {"path": "cluster/status"}
    jobs.finished("job-1")
    again = jobs.readers_for("job-1", [source])[1]
    assert await again.get("nodes") == {"path": "nodes"}  # the failure was not kept
    assert await again.get("cluster/status") == {"path": "cluster/status"}
    assert client.sent == {"nodes": 2, "cluster/status": 1}


async def test_an_endpoint_with_new_settings_or_an_old_job_starts_afresh() -> None:
    now = [0.0]
    jobs = JobReads(keep_seconds=60, max_jobs=2, clock=lambda: now[0])
    old = HvSource(1, "pve (inv:1)", Counting())
    jobs.readers_for("job-1", [old])[1] = ProxmoxReader(old)
    jobs.finished("job-1")
    assert 1 in jobs.readers_for("job-1", [old])
    other = HvSource(2, "other (inv:2)", Counting())
    assert 1 in jobs.readers_for("job-1", [other])  # a run of the job's other endpoint keeps this one's
    jobs.finished("job-1")
    changed = HvSource(1, "pve (inv:1)", Counting())  # the pool built a new client: new settings
    assert jobs.readers_for("job-1", [changed]) == {}
    jobs.readers_for("job-1", [old])[1] = ProxmoxReader(old)
    jobs.finished("job-1")
    now[0] = 61.0
    assert jobs.readers_for("job-1", [old]) == {}  # kept 60 s after its last run only
    for job in ("a", "b", "c"):
        jobs.readers_for(job, [old])[1] = ProxmoxReader(old)
    assert jobs.readers_for("a", [old]) == {}  # the least recently used of more than 2 jobs went
