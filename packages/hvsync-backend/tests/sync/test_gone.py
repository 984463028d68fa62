"""Gone from Proxmox (sync/gone.py): what a run marks, what it never marks, what comes back, the guard.

The real emulator as Proxmox (a fresh one per test: they delete guests), NetBox in memory; every
assertion is on what the store holds or what the run wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hvsync_backend.sync.framework import stage_summary
from hvsync_backend.sync.gone import MASS_VANISH, READ_STAMP_INTERVAL, record_complete_reads
from hvsync_backend.sync.run import SyncContext
from stage_harness import MemoryNetBox, emulator_source, run_context
from test_stages_in_memory import PLUGIN_ENDPOINTS, new_run, run_stages

SYNCED_VMS = "plugins/hvsync/synced-virtual-machines"
SYNCED_DISKS = "plugins/hvsync/synced-virtual-disks"
SYNCED_IFACES = "plugins/hvsync/synced-interfaces"
VMS = "virtualization/virtual-machines"
GUEST_STAGES = ["devices", "storage", "virtual-machines", "vm-disks", "vm-interfaces"]


def store(**endpoint: Any) -> MemoryNetBox:
    netbox = MemoryNetBox()
    netbox.rows[PLUGIN_ENDPOINTS] = {1: {"id": 1, "name": "emu (inv:1)", "backend_id": 1, **endpoint}}
    return netbox


def gone_vmids(netbox: MemoryNetBox, path: str = SYNCED_VMS) -> set[int]:
    return {row["vmid"] for row in netbox.rows.get(path, {}).values() if row.get("gone_since")}


def marks(netbox: MemoryNetBox, since: int) -> list[tuple[str, str, dict[str, Any]]]:
    """The writes after `since` that set or cleared a gone mark."""
    return [w for w in netbox.writes[since:] if "gone_since" in w[2]]


def total(results: dict[str, Any], name: str) -> int:
    return sum(getattr(c, name) for c in results.values())


async def test_a_vm_deleted_in_proxmox_is_marked_gone_once_with_its_parts_and_comes_back(
    pve_emulator_factory,
):
    emu, netbox = pve_emulator_factory(), store()
    await run_stages(new_run(emu, netbox), GUEST_STAGES)
    vmid = 103  # a VM with disks and a NIC in the demo cluster
    vm_rows = dict(netbox.rows[VMS])
    guest = emu.state.guests.pop(vmid)
    emu.state.bump()
    since = len(netbox.writes)

    results = await run_stages(new_run(emu, netbox), GUEST_STAGES)

    assert results["virtual-machines"].gone == 1 and results["virtual-machines"].deleted == 0
    assert results["vm-disks"].gone >= 1 and results["vm-interfaces"].gone >= 1
    assert gone_vmids(netbox) == {vmid}
    assert gone_vmids(netbox, SYNCED_DISKS) == {vmid} and gone_vmids(netbox, SYNCED_IFACES) == {vmid}
    assert netbox.rows[VMS].keys() == vm_rows.keys(), "nothing is deleted"
    assert not [w for w in netbox.writes[since:] if w[0] == "delete"]
    first = next(r["gone_since"] for r in netbox.rows[SYNCED_VMS].values() if r["vmid"] == vmid)

    # a further run keeps the first time and writes nothing at all
    since = len(netbox.writes)
    again = await run_stages(new_run(emu, netbox), GUEST_STAGES)
    assert netbox.writes[since:] == [] and total(again, "gone") == 0
    assert next(r["gone_since"] for r in netbox.rows[SYNCED_VMS].values() if r["vmid"] == vmid) == first

    # back in Proxmox: the marks are cleared, counted as returned
    emu.state.guests[vmid] = guest
    emu.state.bump()
    back = await run_stages(new_run(emu, netbox), GUEST_STAGES)
    assert back["virtual-machines"].returned == 1 and total(back, "gone") == 0
    assert (
        gone_vmids(netbox) == gone_vmids(netbox, SYNCED_DISKS) == gone_vmids(netbox, SYNCED_IFACES) == set()
    )


async def test_a_vanished_backup_routine_is_marked_stale_and_gone(pve_emulator_factory):
    emu, netbox = pve_emulator_factory(), store()
    await run_stages(new_run(emu, netbox), ["devices", "storage", "virtual-machines", "backup-routines"])
    routines = netbox.rows["plugins/hvsync/backup-routines"]
    assert routines, "the demo cluster has backup jobs"
    job_id = next(iter(routines.values()))["job_id"]
    removed = emu.state.backup_jobs.pop(job_id)
    emu.state.bump()
    results = await run_stages(
        new_run(emu, netbox), ["devices", "storage", "virtual-machines", "backup-routines"]
    )
    [row] = [r for r in routines.values() if r["job_id"] == job_id]
    assert results["backup-routines"].gone == 1 and row["status"] == "stale" and row["gone_since"]
    emu.state.backup_jobs[job_id] = removed
    emu.state.bump()
    results = await run_stages(
        new_run(emu, netbox), ["devices", "storage", "virtual-machines", "backup-routines"]
    )
    assert (
        results["backup-routines"].returned == 1 and row["status"] == "active" and row["gone_since"] is None
    )


class Down:
    """A Proxmox endpoint that does not answer at all."""

    async def get(self, path: str, params: dict | None = None) -> object:
        raise ConnectionError("connection refused")


async def test_nothing_is_marked_for_an_endpoint_that_failed_or_a_node_that_did_not_answer(
    pve_emulator_factory,
):
    emu, netbox = pve_emulator_factory(), store()
    await run_stages(new_run(emu, netbox), GUEST_STAGES)
    since = len(netbox.writes)

    source = emulator_source(emu)
    inner, source.client = source.client, Down()
    ctx = run_context(source, netbox)
    await run_stages(ctx, GUEST_STAGES)
    await inner.aclose()
    assert ctx.failed_endpoints == {"inv1"} and marks(netbox, since) == []

    # pve2 stops answering: its guests are listed `unknown`, their configs answer 595
    on_pve2 = {g.vmid for g in emu.state.guests.values() if g.node == "pve2"}
    emu.state.set_node_online("pve2", False)
    ctx = new_run(emu, netbox)
    results = await run_stages(ctx, GUEST_STAGES)
    assert on_pve2 <= ctx.reads.skipped_guests["inv1"]
    assert marks(netbox, since) == [] and total(results, "gone") == 0


async def test_task_rows_of_a_node_that_did_not_answer_outlive_the_retention(pve_emulator_factory):
    """Task retention deletes old rows Proxmox no longer lists; an offline node lists nothing, so its rows
    are kept (they were deleted, then written again when the node came back: found by the fault matrix)."""
    emu, netbox = pve_emulator_factory(), store()
    stages = ["devices", "storage", "task-history"]
    await run_stages(new_run(emu, netbox), stages)
    rows = netbox.rows["plugins/hvsync/task-history"]
    on_pve2 = {r["upid"] for r in rows.values() if r["upid"].startswith("UPID:pve2:")}
    assert on_pve2  # the scenario's history on pve2, older than the retention

    emu.state.set_node_online("pve2", False)
    results = await run_stages(new_run(emu, netbox), stages)
    assert total(results, "deleted") == 0
    assert on_pve2 <= {r["upid"] for r in netbox.rows["plugins/hvsync/task-history"].values()}


async def test_a_node_that_stops_answering_during_the_run_is_left_out_not_the_endpoint(pve_emulator_factory):
    """pve2 answered the run's cluster status, then went away (595 on its own routes): the node-level
    stages leave pve2 out and report it once, the endpoint's other nodes sync, and nothing of pve2 is
    deleted or marked gone (the whole endpoint failed these stages: found by the fault matrix)."""
    emu, netbox = pve_emulator_factory(), store()
    stages = ["devices", "storage", "task-history", "network-interfaces"]
    await run_stages(new_run(emu, netbox), stages)
    tasks = "plugins/hvsync/task-history"
    pve2_tasks = {r["upid"] for r in netbox.rows[tasks].values() if r["upid"].startswith("UPID:pve2:")}
    assert pve2_tasks
    new_on_pve1 = emu.state.add_task("pve1", "qmstart", "100", "root@pam", duration=0).upid
    since = len(netbox.writes)

    ctx = new_run(emu, netbox)
    await run_stages(ctx, ["devices", "storage"])  # the cluster status read: pve2 online
    emu.set_faults(node_offline=["pve2"], connect_delay=0)
    results = await run_stages(ctx, ["task-history", "network-interfaces"])

    assert ctx.failed_endpoints == set()
    left_out = [p for p in ctx.problems if p.get("object") == "node pve2"]
    assert len(left_out) == 1 and left_out[0]["status"] == 595, ctx.problems
    assert total(results, "deleted") == 0 and total(results, "gone") == 0
    upids = {r["upid"] for r in netbox.rows[tasks].values()}
    assert pve2_tasks <= upids and new_on_pve1 in upids  # pve1 synced; pve2's rows kept
    assert not [w for w in netbox.writes[since:] if w[0] == "delete"]
    assert marks(netbox, since) == []


async def test_filtered_guests_and_selected_runs_mark_nothing(pve_emulator_factory):
    emu, netbox = pve_emulator_factory(), store()
    await run_stages(new_run(emu, netbox), GUEST_STAGES)
    since = len(netbox.writes)
    # every regular guest filtered out by its mode: out of scope is not gone
    results = await run_stages(new_run(emu, netbox, sync_mode_vm=False), GUEST_STAGES)
    assert marks(netbox, since) == [] and total(results, "gone") == 0
    # a guest deleted, then a selected-object run of another guest and a partial run: neither judges it
    emu.state.guests.pop(104)
    emu.state.bump()
    await run_stages(new_run(emu, netbox, only_vmids=frozenset({100}), partial=True), GUEST_STAGES)
    await run_stages(new_run(emu, netbox, partial=True), GUEST_STAGES)
    assert marks(netbox, since) == []
    # the next full run does
    await run_stages(new_run(emu, netbox), GUEST_STAGES)
    assert gone_vmids(netbox) == {104}


def guard_problems(ctx: SyncContext) -> list[dict[str, Any]]:
    return [p for p in ctx.problems if p.get("failure_kind") == MASS_VANISH]


@pytest.mark.parametrize(
    ("guests", "deleted", "share", "marked"),
    [
        (25, 10, None, False),  # 40% and 10 objects: the guard holds
        (25, 9, None, True),  # 36% but fewer than 10 objects
        (5, 2, None, True),  # 40% of a small cluster: fewer than 10 objects
        (40, 10, None, True),  # 10 objects but 25%: not more than the share
        (25, 10, 0.5, True),  # the endpoint's own share raised to 50%
    ],
)
async def test_the_mass_vanish_guard(pve_emulator_factory, guests, deleted, share, marked):
    emu = pve_emulator_factory(scenario="large", vms=guests)
    netbox = store(**({} if share is None else {"gone_guard_share": share}))
    await run_stages(new_run(emu, netbox), ["devices", "virtual-machines"])
    vmids = sorted(emu.state.guests)[:deleted]
    for vmid in vmids:
        emu.state.guests.pop(vmid)
    emu.state.bump()
    since = len(netbox.writes)

    ctx = new_run(emu, netbox)
    results = await run_stages(ctx, ["devices", "virtual-machines"])
    summary = stage_summary("virtual-machines", results["virtual-machines"], 0.0, ctx, None)

    if marked:
        assert gone_vmids(netbox) == set(vmids) and results["virtual-machines"].gone == deleted
        assert guard_problems(ctx) == [] and summary["ok"] is True
    else:
        assert gone_vmids(netbox) == set() and marks(netbox, since) == []
        [problem] = guard_problems(ctx)
        assert f"{deleted} of {guests} virtual machine" in problem["detail"] and problem["endpoint_id"] == 1
        assert summary["ok"] is False and summary["error"]["failure_kind"] == MASS_VANISH
        assert ctx.gone_guarded == {"inv1"}


async def test_deletion_requests_are_counted_for_the_request_deletion_policy_and_delete_stale(
    pve_emulator_factory,
):
    emu = pve_emulator_factory(scenario="large", vms=5)
    netbox = store(gone_policy="request-deletion")
    await run_stages(new_run(emu, netbox), ["devices", "virtual-machines"])
    emu.state.guests.pop(sorted(emu.state.guests)[0])
    emu.state.bump()
    results = await run_stages(new_run(emu, netbox), ["devices", "virtual-machines"])
    assert (results["virtual-machines"].gone, results["virtual-machines"].deletion_requests) == (1, 1)

    emu = pve_emulator_factory(scenario="large", vms=5)
    netbox = store()
    await run_stages(new_run(emu, netbox), ["devices", "virtual-machines"])
    emu.state.guests.pop(sorted(emu.state.guests)[0])
    emu.state.bump()
    results = await run_stages(new_run(emu, netbox, delete_stale=True), ["devices", "virtual-machines"])
    vm = results["virtual-machines"]
    assert (vm.gone, vm.deletion_requests, vm.deleted) == (1, 1, 0)
    [sidecar] = [r for r in netbox.rows[SYNCED_VMS].values() if r.get("gone_since")]
    assert sidecar["gone_request"] is True, "the plugin raises the request (and applies it if auto-approved)"


async def test_the_read_stamp_is_written_at_most_once_an_hour_and_only_for_a_whole_read(pve_emulator_factory):
    emu, netbox = pve_emulator_factory(scenario="large", vms=5), store()
    stages = ["devices", "storage", "virtual-machines"]
    clusters = "plugins/hvsync/clusters"

    ctx = new_run(emu, netbox)
    await run_stages(ctx, stages)
    assert await record_complete_reads(ctx) == 1
    [row] = netbox.rows[clusters].values()
    first = row["last_complete_read"]
    ctx = new_run(emu, netbox)
    await run_stages(ctx, stages)
    since = len(netbox.writes)
    assert await record_complete_reads(ctx) == 0 and netbox.writes[since:] == [], (
        "a quiet resync writes nothing"
    )

    row["last_complete_read"] = (datetime.now(UTC) - READ_STAMP_INTERVAL).isoformat()
    for partial in ({"sync_mode_vm": False}, {"only_vmids": frozenset({1000}), "partial": True}):
        ctx = new_run(emu, netbox, **partial)
        await run_stages(ctx, stages)
        assert await record_complete_reads(ctx) == 0, partial
    emu.state.set_node_online("pve2", False)
    ctx = new_run(emu, netbox)
    await run_stages(ctx, stages)
    assert await record_complete_reads(ctx) == 0, "a node did not answer"
    emu.state.set_node_online("pve2", True)
    ctx = new_run(emu, netbox)
    await run_stages(ctx, stages)
    assert await record_complete_reads(ctx) == 1 and row["last_complete_read"] > first


async def test_gone_and_returned_are_counted_in_the_metrics_per_kind(pve_emulator_factory):
    from hvsync_backend.metrics import Metrics

    emu, netbox = pve_emulator_factory(scenario="large", vms=5), store()
    await run_stages(new_run(emu, netbox), ["devices", "virtual-machines"])
    removed = emu.state.guests.pop(sorted(emu.state.guests)[0])
    emu.state.bump()
    metrics = Metrics()
    ctx = new_run(emu, netbox)
    ctx.metrics = metrics
    await run_stages(ctx, ["devices", "virtual-machines"])
    emu.state.guests[removed.vmid] = removed
    emu.state.bump()
    ctx = new_run(emu, netbox)
    ctx.metrics = metrics
    await run_stages(ctx, ["devices", "virtual-machines"])
    text = metrics.render()[0].decode()
    assert 'hvsync_netbox_objects_total{kind="virtual machine",verb="gone"} 1.0' in text
    assert 'hvsync_netbox_objects_total{kind="virtual machine",verb="returned"} 1.0' in text
