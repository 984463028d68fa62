"""Backup routines carry Proxmox's next start (`next_run`), and a routine whose only change is that its
scheduled run happened (Proxmox moved `next-run`) gets `next_run` written and nothing else: `next-run`
is kept out of `raw_config`, so the routine is not rewritten after every scheduled run."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.registry import BY_SLUG
from hvsync_backend.sync.stages.jobs import utc_stamp
from stage_harness import MemoryNetBox, emulator_source, run_context

PLUGIN_ENDPOINTS = "plugins/hvsync/hv-endpoints"
ROUTINES = "plugins/hvsync/backup-routines"
#: the stages a backup routine links to (plugin nodes and storage), then its own
SLUGS = ("devices", "storage", "backup-routines")
DAY = 86400


class RanMeanwhile:
    """The emulator's answers, with every backup job's `next-run` moved on by `moved` seconds: what
    Proxmox answers after the jobs' scheduled runs happened (the emulator computes `next-run` from the
    wall clock, so a test moves it here instead of waiting for a calendar event)."""

    def __init__(self, inner: ProxmoxClient) -> None:
        self.inner = inner
        self.moved = 0

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        answer = await self.inner.get(path, params)
        if path.strip("/") == "cluster/backup" and self.moved:
            return [
                {**job, "next-run": job["next-run"] + self.moved} if "next-run" in job else job
                for job in answer
            ]
        return answer

    async def aclose(self) -> None:
        await self.inner.aclose()


async def sync(netbox: MemoryNetBox, client: RanMeanwhile, base: HvSource) -> dict[str, Any]:
    ctx = run_context(HvSource(base.backend_id, base.name, client, site_slug=base.site_slug), netbox)
    counts = {}
    try:
        for slug in SLUGS:
            counts[slug], _ = await BY_SLUG[slug].run(ctx)
    finally:
        ctx.cancel_background()
    return counts


@pytest.fixture
def netbox() -> MemoryNetBox:
    store = MemoryNetBox()
    store.rows[PLUGIN_ENDPOINTS] = {1: {"id": 1, "name": "emu (inv:1)", "backend_id": 1}}
    return store


async def test_a_moved_next_run_writes_next_run_only_and_raw_config_keeps_no_next_run(
    pve_emulator_factory, netbox
):
    emu = pve_emulator_factory()
    headers = {"Authorization": f"PVEAPIToken={emu.token_id}={emu.token_secret}"}
    disabled = {"id": "backup-paused", "schedule": "sun 03:00", "vmid": "100", "enabled": 0}
    made = httpx.post(f"{emu.api_url}/cluster/backup", data=disabled, headers=headers, timeout=10)
    assert made.status_code == 200, made.text
    base = emulator_source(emu)
    assert isinstance(base.client, ProxmoxClient)
    client = RanMeanwhile(base.client)
    try:
        jobs = {j["id"]: j for j in await base.client.get("cluster/backup")}
        enabled = {i for i, j in jobs.items() if "next-run" in j}
        assert enabled and set(jobs) - enabled == {
            "backup-paused"
        }  # Proxmox gives a disabled job no next-run

        first = await sync(netbox, client, base)
        assert first["backup-routines"].created == len(jobs)
        routines = {r["job_id"]: r for r in netbox.rows[ROUTINES].values()}
        for job_id, job in jobs.items():
            row = routines[job_id]
            # next_run: Proxmox's epoch as a UTC time; none for a disabled job (Proxmox gives none)
            want = (
                dt.datetime.fromtimestamp(job["next-run"], dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                if job_id in enabled
                else None
            )
            assert row["next_run"] == want
            assert "next-run" not in row["raw_config"]
            assert row["raw_config"] == {k: v for k, v in job.items() if k != "next-run"}

        # the scheduled runs happened: Proxmox's next-run moved a day on, nothing else changed
        written = len(netbox.writes)
        client.moved = DAY
        again = await sync(netbox, client, base)
        writes = netbox.writes[written:]
        assert {(op, path) for op, path, _ in writes} == {("update", ROUTINES)}
        assert sorted(set(item) for _, _, item in writes) == [{"id", "next_run"}] * len(enabled)
        assert again["backup-routines"].updated == len(enabled)
        assert again["backup-routines"].created == again["backup-routines"].deleted == 0
        for row in netbox.rows[ROUTINES].values():
            job = jobs[row["job_id"]]
            if row["job_id"] in enabled:
                moved = dt.datetime.fromtimestamp(job["next-run"] + DAY, dt.UTC)
                assert row["next_run"] == moved.strftime("%Y-%m-%dT%H:%M:%SZ")
            assert "next-run" not in row["raw_config"]

        # the same answers once more: nothing at all is written
        written = len(netbox.writes)
        await sync(netbox, client, base)
        assert netbox.writes[written:] == []
    finally:
        await client.aclose()


async def test_netbox_next_run_in_another_time_zone_is_the_same_time(pve_emulator, netbox):
    """NetBox answers `next_run` in its TIME_ZONE: an equal instant in other text is no change."""
    base = emulator_source(pve_emulator)
    client = RanMeanwhile(base.client)  # type: ignore[arg-type]
    try:
        await sync(netbox, client, base)
        for row in netbox.rows[ROUTINES].values():
            if row["next_run"]:
                at = dt.datetime.fromisoformat(row["next_run"])
                row["next_run"] = at.astimezone(dt.timezone(dt.timedelta(hours=2))).isoformat()
        written = len(netbox.writes)
        await sync(netbox, client, base)
        assert netbox.writes[written:] == []
    finally:
        await client.aclose()


def test_utc_stamp_reads_epochs_and_iso_text_and_refuses_junk() -> None:
    assert utc_stamp(1764900000) == "2025-12-05T02:00:00Z"
    assert utc_stamp("1764900000") == "2025-12-05T02:00:00Z"
    assert utc_stamp("2025-12-05T04:00:00+02:00") == "2025-12-05T02:00:00Z"
    assert utc_stamp("2025-12-05T02:00:00.250000Z") == "2025-12-05T02:00:00Z"
    assert [utc_stamp(v) for v in (None, "", "soon", True, 10**20)] == [None] * 5
