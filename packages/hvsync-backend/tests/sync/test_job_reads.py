"""A sync job's stage streams share their Proxmox answers and NetBox list reads (sync/job_reads.py): the
next stage of one job does not read again what an earlier one read; failures, unfinished reads and lists
the job wrote to are read again; other jobs share nothing."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
import time
from typing import Any

import httpx
import pydantic
import pytest
from fake_netbox import AUTH, FakeNetBox
from hvsync_backend.config import Settings
from hvsync_backend.context import build_context
from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig
from hvsync_backend.inventory.list_cache import ListCache
from hvsync_backend.sync.job_reads import JobReads
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader, ProxmoxReadError
from hvsync_backend.sync.registry import BY_SLUG
from hvsync_backend.sync.run import MANAGED_TAG
from hvsync_backend.sync.support import custom_field_definitions
from hvsync_backend.wire import STAGE_ROUTES
from stage_harness import MemoryNetBox, emulator_source, run_context
from support import HV, INV, fake_proxmox, parse_stream

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
    await base.client.aclose()


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


def test_more_jobs_than_kept_drop_the_least_recently_used_idle_one_never_a_running_one() -> None:
    """A running job's reads are held by its run anyway: dropping them frees nothing and makes its next
    stream read everything again."""
    jobs = JobReads(max_jobs=2)
    source = HvSource(1, "pve (inv:1)", Counting())
    jobs.started("long")
    jobs.readers_for("long", [source])[1] = ProxmoxReader(source)
    for job in ("a", "b"):
        jobs.readers_for(job, [source])[1] = ProxmoxReader(source)
        jobs.finished(job)
    assert 1 in jobs.readers_for("long", [source])  # the oldest, but running: kept
    assert jobs.readers_for("a", [source]) == {}  # the least recently used idle job went instead
    jobs.started("c")
    jobs.started("d")  # more running jobs than kept: kept while they run ...
    jobs.readers_for("c", [source])[1] = ProxmoxReader(source)
    assert 1 in jobs.readers_for("long", [source]) and 1 in jobs.readers_for("c", [source])
    for job in ("long", "c", "d"):
        jobs.finished(job)
    jobs.readers_for("e", [source])
    assert jobs.readers_for("long", [source]) == {}  # ... and back to 2 once idle


def test_a_running_job_keeps_its_reads_and_an_idle_one_loses_them_after_a_minute() -> None:
    """A job's streams follow each other closely; the same id used again later (a cron job with a fixed
    id) must read the world afresh, and a long stream must not lose its job's reads meanwhile."""
    now = [0.0]
    jobs = JobReads(clock=lambda: now[0])
    assert jobs.keep_seconds == 60
    source = HvSource(1, "pve (inv:1)", Counting())
    jobs.started("long")
    jobs.readers_for("long", [source])[1] = ProxmoxReader(source)
    now[0] = 600.0  # a stream that runs ten minutes
    assert jobs.readers_for("other", [source]) == {}  # (any use drops what expired)
    assert 1 in jobs.readers_for("long", [source])  # still running: kept
    jobs.finished("long")
    now[0] = 659.0
    assert 1 in jobs.readers_for("long", [source])  # the job's next stream, within the minute
    jobs.finished("long")
    now[0] = 720.0
    assert jobs.readers_for("long", [source]) == {}  # the same id a minute later: afresh


# -- NetBox list reads ---------------------------------------------------------------------------------

VMS = "virtualization/virtual-machines"
DISKS = "virtualization/virtual-disks"


class ListNetBox:
    """A NetBox list route per path, answering after `gate` opens (set by default); counts GETs."""

    def __init__(self) -> None:
        self.gets: collections.Counter[str] = collections.Counter()
        self.gate = asyncio.Event()
        self.gate.set()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/").strip("/")
        if request.method != "GET":
            return httpx.Response(200, json=[{"id": 1}])
        self.gets[path] += 1
        await self.gate.wait()
        return httpx.Response(200, json={"count": 1, "results": [{"id": 1, "path": path}]})

    def client(self, lists: ListCache | None, **config: Any) -> NetBoxClient:
        nb = NetBoxClient(netbox_config(**config), transport=httpx.MockTransport(self.handle), lists=lists)
        nb.cache_reads = True
        return nb


def netbox_config(**overrides: Any) -> NetBoxConfig:
    return NetBoxConfig(url="http://netbox.test", auth_header=AUTH, **{"apply_path": False, **overrides})


async def test_a_jobs_next_run_answers_from_the_netbox_lists_an_earlier_run_read() -> None:
    netbox, jobs = ListNetBox(), JobReads()
    async with netbox.client(jobs.lists_for("job-1", netbox_config())) as nb:
        assert await nb.list_all(VMS) == [{"id": 1, "path": VMS}]
        netbox.gate.clear()
        nb.prefetch(DISKS)  # still unanswered when the run ends: not kept
        await asyncio.sleep(0)
    jobs.finished("job-1")
    netbox.gate.set()
    assert netbox.gets == {VMS: 1, DISKS: 1}

    async with netbox.client(jobs.lists_for("job-1", netbox_config())) as nb:
        rows = await nb.list_all(VMS)
        assert rows == [{"id": 1, "path": VMS}] and nb.stats.cached_reads == 1
        rows[0]["id"] = 99  # callers get copies: the next run still sees what NetBox answered
        assert await nb.list_all(DISKS) == [{"id": 1, "path": DISKS}]
        assert netbox.gets == {VMS: 1, DISKS: 2}
        await nb.bulk_update(VMS, [{"id": 1, "name": "changed"}])  # this job's write makes the VMs stale
    jobs.finished("job-1")

    async with netbox.client(jobs.lists_for("job-1", netbox_config())) as nb:
        await nb.list_all(VMS)
        await nb.list_all(DISKS)
    assert netbox.gets == {VMS: 2, DISKS: 2}  # the VMs read again after the write; the disks kept
    for lists in (
        jobs.lists_for("job-2", netbox_config()),  # another job
        jobs.lists_for("", netbox_config()),  # no job
        jobs.lists_for("job-1", netbox_config(branch_schema_id="br_1234abcd")),  # another branch
    ):
        async with netbox.client(lists) as nb:
            await nb.list_all(VMS)
    assert netbox.gets == {VMS: 5, DISKS: 2}


async def test_a_run_does_not_wait_on_a_read_another_run_of_its_job_started() -> None:
    """Two runs of one job at once (a caller may send them): a run awaits only its own unfinished reads,
    since the other run cancels its own when it ends."""
    netbox, jobs = ListNetBox(), JobReads()
    lists = jobs.lists_for("job-1", netbox_config())
    first = netbox.client(lists)
    netbox.gate.clear()
    first.prefetch(VMS)
    await asyncio.sleep(0)
    second = netbox.client(jobs.lists_for("job-1", netbox_config()))
    assert second.lists is lists
    reading = asyncio.ensure_future(second.list_all(VMS))
    await asyncio.sleep(0)
    await first.aclose()  # cancels the first run's read
    netbox.gate.set()
    assert await reading == [{"id": 1, "path": VMS}]
    await second.aclose()
    assert netbox.gets == {VMS: 2}


#: What the API-level runs would otherwise create, so that nothing is written.
_PRESENT = {
    "plugins/hvsync/hv-endpoints": [{"id": 7, "name": HV["name"], "backend_id": 1}],
    "extras/custom-fields": [{**custom_field_definitions()[0], "id": 1}],
    "extras/tags": [{"id": 1, "name": MANAGED_TAG, "slug": MANAGED_TAG}],
    "dcim/device-roles": [{"id": 1, "name": "role", "slug": "role"}],
    "dcim/sites": [{"id": 1, "name": "site", "slug": "site"}],
}


def test_a_jobs_streams_share_their_netbox_reads_through_the_api(backend: Any, auth: dict[str, str]) -> None:
    """The routes pass a job's list cache on: the vm-disks stream after the job's virtual-machines stream
    reads only the disk lists; another job's reads everything it needs."""
    backend.context.proxmox.transport_factory = lambda target: httpx.MockTransport(fake_proxmox)
    netbox = FakeNetBox(rows=_PRESENT)
    gets: collections.Counter[str] = collections.Counter()
    answer = netbox.handle

    def handle(request: httpx.Request) -> httpx.Response:
        gets[f"{request.method} {request.url.path.removeprefix('/api/').strip('/')}"] += 1
        return answer(request)

    netbox.handle = handle  # type: ignore[method-assign]
    backend.context.netbox_transport = netbox.transport
    c = backend.client
    assert c.post("/inventory/endpoint", headers=auth, json=INV).status_code == 201
    r = c.post("/hv/endpoints", headers=auth, json={**HV, "access_methods": ["token"], "max_retries": 0})
    assert r.status_code == 201, r.text

    def stream(stage: str, job: str) -> collections.Counter[str]:
        gets.clear()
        r = c.get(STAGE_ROUTES[stage], headers=auth, params={"job": job})
        assert parse_stream(r.text)[-1].data["ok"] is True, r.text
        assert not any(not key.startswith("GET ") for key in gets), gets  # no writes: nothing went stale
        return collections.Counter(gets)

    stream("virtual-machines", "job-1")
    later = stream("vm-disks", "job-1")
    other = stream("vm-disks", "job-2")
    shared = {
        f"GET {VMS}",
        "GET plugins/hvsync/synced-virtual-machines",
        "GET extras/tags",
        "GET extras/custom-fields",
    }
    assert shared <= set(other)
    assert not shared & set(later), later
    assert later[f"GET {DISKS}"] == other[f"GET {DISKS}"] == 1  # what only this stage reads, each time


def test_a_stream_longer_than_the_keep_time_passes_its_reads_to_the_jobs_next_stream(
    backend: Any, auth: dict[str, str]
) -> None:
    """The routes mark a job's run as running while its stream lasts: reads that would have expired by
    the clock while a stream waits on Proxmox stay for the job's next stream, and are dropped a minute
    after the job's last stream ended."""
    now = [0.0]
    backend.context.job_reads = JobReads(clock=lambda: now[0])
    reached, gate = threading.Event(), threading.Event()
    proxmox_gets: collections.Counter[str] = collections.Counter()

    async def slow_proxmox(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api2/json")
        proxmox_gets[path] += 1
        if path == "/cluster/resources" and not gate.is_set():  # the first stream waits here until released
            reached.set()
            while not gate.is_set():
                await asyncio.sleep(0.01)
        return fake_proxmox(request)

    backend.context.proxmox.transport_factory = lambda target: httpx.MockTransport(slow_proxmox)
    backend.context.netbox_transport = FakeNetBox(rows=_PRESENT).transport
    c = backend.client
    assert c.post("/inventory/endpoint", headers=auth, json=INV).status_code == 201
    r = c.post("/hv/endpoints", headers=auth, json={**HV, "access_methods": ["token"], "max_retries": 0})
    assert r.status_code == 201, r.text

    def stream(job: str) -> int:
        """One virtual-machines stream of `job`; the Proxmox reads it sent."""
        before = sum(proxmox_gets.values())
        r = c.get(STAGE_ROUTES["virtual-machines"], headers=auth, params={"job": job})
        assert parse_stream(r.text)[-1].data["ok"] is True, r.text
        return sum(proxmox_gets.values()) - before

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(stream, "long")
        assert reached.wait(30), "the first stream never read Proxmox's resource list"
        now[0] = 600.0  # the stream has waited ten minutes on Proxmox
        assert backend.context.job_reads.readers_for("other", []) == {}  # (any use drops what expired)
        gate.set()
        read_first = first.result(timeout=60)
    assert read_first > 0
    now[0] = 659.0
    assert stream("long") == 0  # the job's next stream, within the minute: the first stream's answers
    now[0] = 720.0
    assert stream("long") == read_first  # a minute after the job's last stream: read afresh


def test_the_operator_sets_how_long_and_for_how_many_jobs_reads_are_kept(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HVSYNC_JOB_READS_KEEP_SECONDS and HVSYNC_JOB_READS_MAX_JOBS reach the process's job reads; 0 s turns
    the sharing between a job's streams off; out-of-range values are refused, naming the setting."""
    default = build_context(Settings(data_dir=tmp_path))
    assert (default.job_reads.keep_seconds, default.job_reads.max_jobs) == (60, 4)
    default.engine.dispose()
    monkeypatch.setenv("HVSYNC_JOB_READS_KEEP_SECONDS", "0")
    monkeypatch.setenv("HVSYNC_JOB_READS_MAX_JOBS", "9")
    context = build_context(Settings(data_dir=tmp_path))
    try:
        jobs = context.job_reads
        assert (jobs.keep_seconds, jobs.max_jobs) == (0, 9)
        source = HvSource(1, "pve (inv:1)", Counting())
        jobs.started("job-1")
        jobs.readers_for("job-1", [source])[1] = ProxmoxReader(source)
        assert 1 in jobs.readers_for("job-1", [source])  # kept while the stream runs ...
        jobs.finished("job-1")
        time.sleep(0.01)
        jobs.started("job-1")
        assert jobs.readers_for("job-1", [source]) == {}  # ... and not for the job's next stream
    finally:
        context.engine.dispose()
    for field, bad in (("job_reads_keep_seconds", -1), ("job_reads_max_jobs", 0)):
        with pytest.raises(pydantic.ValidationError, match=field):
            Settings(data_dir=tmp_path, **{field: bad})
