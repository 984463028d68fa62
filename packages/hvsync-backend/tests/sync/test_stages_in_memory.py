"""Every stage's desired state and write plan, run against the real emulator with NetBox in memory.

The e2e suite (tests/e2e) runs the same stages into a real NetBox; these tests pin down, without NetBox,
what each stage asks NetBox to hold (objects, identity keys, links) and that a second run writes nothing.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.inventory.batching import parent_keys
from hvsync_backend.sync.registry import BY_SLUG, STAGES
from hvsync_backend.sync.run import MANAGED_TAG, SyncContext
from stage_harness import MemoryNetBox, emulator_source, run_context

PLUGIN_ENDPOINTS = "plugins/hvsync/hv-endpoints"
#: guest config keys that are disks (a CD-ROM drive is not a disk)
DISK_SLOT = re.compile(r"^(?:(?:scsi|virtio|sata|ide)\d+|rootfs|mp\d+)$")


def proxmox(emu: Any, path: str) -> Any:
    """What the emulator itself answers (the state a stage is derived from)."""
    import httpx

    headers = {"Authorization": f"PVEAPIToken={emu.token_id}={emu.token_secret}"}
    answer = httpx.get(emu.api_url + path, headers=headers, verify=emu.verify, timeout=10)
    answer.raise_for_status()
    return answer.json()["data"]


def new_run(emu: Any, netbox: MemoryNetBox, **options: Any) -> SyncContext:
    return run_context(emulator_source(emu), netbox, **options)


async def run_stages(ctx: SyncContext, slugs: list[str] | None = None) -> dict[str, Any]:
    results = {}
    try:
        for stage in STAGES if slugs is None else [BY_SLUG[s] for s in slugs]:
            counts, _ = await stage.run(ctx)
            results[stage.slug] = counts
    finally:
        ctx.cancel_background()
        for source in ctx.sources:  # its connections (a run going on after this opens its own per read)
            if isinstance(source.client, ProxmoxClient):
                await source.client.aclose()
    return results


def keys(netbox: MemoryNetBox, path: str) -> set[str]:
    return {row["custom_fields"]["hvsync_key"] for row in netbox.rows.get(path, {}).values()}


@pytest.fixture
def netbox() -> MemoryNetBox:
    store = MemoryNetBox()
    # the plugin's record of the endpoint, as the plugin pushes it (`(inv:1)` suffix)
    store.rows[PLUGIN_ENDPOINTS] = {1: {"id": 1, "name": "emu (inv:1)", "backend_id": 1}}
    return store


async def test_a_full_run_writes_what_proxmox_holds_and_a_second_run_writes_nothing(pve_emulator, netbox):
    resources = proxmox(pve_emulator, "/cluster/resources")
    guests = {r["vmid"]: r for r in resources if r["type"] in ("qemu", "lxc")}
    nodes = {r["node"] for r in resources if r["type"] == "node"}

    results = await run_stages(new_run(pve_emulator, netbox))
    assert [s for s, c in results.items() if c.failed] == []

    # devices: one cluster for the endpoint, one device per node, keyed by the plugin endpoint
    assert keys(netbox, "virtualization/clusters") == {"inv1|cluster"}
    assert keys(netbox, "dcim/devices") == {f"inv1|node|{n}" for n in nodes}
    # virtual-machines: every guest (templates too, by default), on its node's device and the cluster
    assert keys(netbox, "virtualization/virtual-machines") == {f"inv1|vm|{vmid}" for vmid in guests}
    device_of = {r["custom_fields"]["hvsync_key"]: r["id"] for r in netbox.rows["dcim/devices"].values()}
    for vm in netbox.rows["virtualization/virtual-machines"].values():
        vmid = int(vm["custom_fields"]["hvsync_key"].split("|")[2])
        assert vm["name"] == guests[vmid]["name"]
        assert vm["device"] == device_of[f"inv1|node|{guests[vmid]['node']}"]
        assert {"slug": MANAGED_TAG} in vm["tags"]
    # vm-disks and vm-interfaces: one per disk and NIC slot of each guest's config
    disk_keys, nic_keys = set(), set()
    for vmid, guest in guests.items():
        config = proxmox(pve_emulator, f"/nodes/{guest['node']}/{guest['type']}/{vmid}/config")
        disk_keys |= {
            f"inv1|vm|{vmid}|disk|{slot}"
            for slot, value in config.items()
            if DISK_SLOT.match(slot) and "media=cdrom" not in str(value)
        }
        nic_keys |= {f"inv1|vm|{vmid}|nic|{slot}" for slot in config if slot.rstrip("0123456789") == "net"}
    assert keys(netbox, "virtualization/virtual-disks") == disk_keys and disk_keys
    assert keys(netbox, "virtualization/interfaces") == nic_keys
    # plugin records: the endpoint's cluster, its nodes and its storage, written under the plugin endpoint
    assert {r["name"] for r in netbox.rows["plugins/hvsync/nodes"].values()} == nodes
    storages = {s["storage"] for s in proxmox(pve_emulator, "/storage")}
    assert {r["name"] for r in netbox.rows["plugins/hvsync/storage"].values()} == storages

    written = len(netbox.writes)
    again = await run_stages(new_run(pve_emulator, netbox))
    assert netbox.writes[written:] == [], "a run with nothing changed in Proxmox must write nothing"
    assert all(c.created == c.updated == c.deleted == 0 for c in again.values())


async def test_a_disabled_template_mode_leaves_templates_out(pve_emulator, netbox):
    resources = proxmox(pve_emulator, "/cluster/resources")
    templates = {r["vmid"] for r in resources if r["type"] in ("qemu", "lxc") and r.get("template")}
    assert templates, "the demo cluster has templates"
    await run_stages(
        new_run(pve_emulator, netbox, sync_mode_vm_template=False), ["devices", "virtual-machines"]
    )
    written = {int(k.split("|")[2]) for k in keys(netbox, "virtualization/virtual-machines")}
    assert written and not written & templates


async def test_a_disabled_mode_with_delete_stale_deletes_nothing_of_the_skipped_guests(pve_emulator, netbox):
    """Out of scope is not vanished (SPEC 4.3): with `sync_mode_vm` off and `delete_stale` on, a run used
    to delete every live managed VM with its disks and interfaces, and to keep writing their backups,
    task history and replications."""
    resources = proxmox(pve_emulator, "/cluster/resources")
    regular = {r["vmid"] for r in resources if r["type"] in ("qemu", "lxc") and not r.get("template")}
    await run_stages(new_run(pve_emulator, netbox))
    dependents = (
        "virtualization/virtual-machines",
        "virtualization/virtual-disks",
        "virtualization/interfaces",
        "plugins/hvsync/backups",
        "plugins/hvsync/task-history",
        "plugins/hvsync/replications",
    )
    before = {path: dict(netbox.rows.get(path, {})) for path in dependents}
    assert all(before[path] for path in dependents[:3]), "the demo cluster has VMs, disks and NICs"
    written = len(netbox.writes)

    ctx = new_run(pve_emulator, netbox, sync_mode_vm=False, delete_stale=True)
    results = await run_stages(ctx)

    assert [s for s, c in results.items() if c.failed] == []
    assert {s: c.deleted for s, c in results.items() if c.deleted} == {}
    assert {path: dict(netbox.rows.get(path, {})) for path in dependents} == before
    assert netbox.writes[written:] == [], "nothing of a skipped guest is written, marked stale or deleted"
    assert ctx.reads.skipped_guests["inv1"] == regular


async def test_selected_and_skipped_guests_get_no_task_history(pve_emulator, netbox):
    """A tasks-only run with a disabled mode reads the guest list (not every config) to know whom to skip."""
    resources = proxmox(pve_emulator, "/cluster/resources")
    regular = {r["vmid"] for r in resources if r["type"] in ("qemu", "lxc") and not r.get("template")}
    await run_stages(new_run(pve_emulator, netbox), ["devices", "storage", "virtual-machines"])
    ctx = new_run(pve_emulator, netbox, sync_mode_vm=False)
    await run_stages(ctx, ["task-history"])
    vmids = {row["vmid"] for row in netbox.rows.get("plugins/hvsync/task-history", {}).values()}
    assert ctx.reads.guests is None and ctx.reads.skipped_guests["inv1"] == regular
    assert not vmids & regular


class GuestGone(Exception):
    """What Proxmox answers for the config of a guest deleted or migrated since the guest list was read."""

    status = 500

    def __str__(self) -> str:
        return "Configuration file 'nodes/pve1/qemu-server/101.conf' does not exist"


async def test_a_guest_vanishing_mid_read_is_left_out_not_the_whole_endpoint(pve_emulator, netbox):
    """One failed config read used to fail every stage of its endpoint; now only that guest is left out,
    reported, and kept (even with delete_stale), and the rest of the endpoint syncs."""
    await run_stages(new_run(pve_emulator, netbox))
    vms = dict(netbox.rows["virtualization/virtual-machines"])
    gone = next(int(r["custom_fields"]["hvsync_key"].split("|")[2]) for r in vms.values())
    source = emulator_source(pve_emulator)
    inner = source.client

    class Flaky:
        async def get(self, path: str, params: dict | None = None) -> object:
            if path.endswith(f"/{gone}/config"):
                raise GuestGone()
            return await inner.get(path, params)

    source.client = Flaky()
    ctx = run_context(source, netbox, delete_stale=True)
    written = len(netbox.writes)
    results = await run_stages(ctx)

    assert not ctx.failed_endpoints and [s for s, c in results.items() if c.failed] == []
    assert netbox.rows["virtualization/virtual-machines"] == vms
    assert netbox.writes[written:] == []
    assert ctx.reads.skipped_guests["inv1"] == {gone}
    [problem] = [p for p in ctx.problems if p.get("object") == f"vm {gone}"]
    assert (
        problem["source"] == "proxmox" and problem["status"] == 500 and "does not exist" in problem["detail"]
    )
    await inner.aclose()


async def test_stages_hand_proxmox_reads_to_each_other_through_the_typed_run_state(pve_emulator, netbox):
    ctx = new_run(pve_emulator, netbox)
    await run_stages(ctx, ["devices", "virtual-machines"])
    clusters, guests = ctx.reads.clusters, ctx.reads.guests
    assert clusters is not None and guests is not None and guests[1]
    await run_stages(ctx, ["vm-disks", "vm-interfaces", "ip-addresses"])
    # later stages used the same reads (no second read of the guests or the cluster)
    assert ctx.reads.clusters is clusters and ctx.reads.guests is guests
    assert ctx.lookups.plugin_endpoints == {1: 1}
    assert ctx.ip.sightings is not None


async def test_dry_run_plans_without_writing(pve_emulator, netbox):
    ctx = new_run(pve_emulator, netbox, dry_run=True)
    results = await run_stages(ctx, ["devices"])
    assert netbox.writes == []
    assert results["devices"].created >= 2 and {p["kind"] for p in ctx.plans} >= {"cluster", "device"}


async def test_a_storage_restricted_to_some_nodes_is_on_those_nodes_only(pve_emulator_factory, netbox):
    """Proxmox lists a storage on every node, `enabled: 0` where its `nodes` option leaves the node out
    (pve-storage's storage_info): the storage record names only the nodes it is configured for."""
    emu = pve_emulator_factory()
    emu.state.storages["local-lvm"]["nodes"] = "pve3"
    listed = {r["storage"]: r for r in proxmox(emu, "/nodes/pve1/storage")}
    assert listed["local-lvm"]["enabled"] == 0 and listed["local-lvm"]["total"] == 0
    await run_stages(new_run(emu, netbox), ["devices", "storage"])
    node_name = {r["id"]: r["name"] for r in netbox.rows["plugins/hvsync/nodes"].values()}
    records = {r["name"]: r for r in netbox.rows["plugins/hvsync/storage"].values()}
    assert [node_name[i] for i in records["local-lvm"]["nodes"]] == ["pve3"]
    on_pve3 = {r["storage"]: r for r in proxmox(emu, "/nodes/pve3/storage")}["local-lvm"]
    assert records["local-lvm"]["total"] == on_pve3["total"] > 0
    assert sorted(node_name[i] for i in records["ceph-vm"]["nodes"]) == ["pve1", "pve2", "pve3"]


class OneWriteAtATime(MemoryNetBox):
    """MemoryNetBox whose writes take a moment, recording any two writes of one path that overlap."""

    def __init__(self) -> None:
        super().__init__()
        self.busy: dict[str, int] = {}
        self.overlapped: set[str] = set()

    async def _hold(self, path: str) -> None:
        self.busy[path] = self.busy.get(path, 0) + 1
        if self.busy[path] > 1:
            self.overlapped.add(path)
        await asyncio.sleep(0.01)
        self.busy[path] -= 1

    async def bulk_create(self, path: str, items: Any) -> list[Any]:
        items = list(items)
        if items:
            await self._hold(path)
        return await super().bulk_create(path, items)

    async def bulk_update(self, path: str, items: Any, parents: Any = None) -> list[Any]:
        items = list(items)
        if items:
            await self._hold(path)
        return await super().bulk_update(path, items, parents)

    async def bulk_delete(self, path: str, ids: Any, parents: Any = None) -> list[Any]:
        ids = list(ids)
        if ids:
            await self._hold(path)
        return await super().bulk_delete(path, ids, parents)


async def test_a_vms_disk_creates_updates_and_deletes_never_run_at_once(pve_emulator):
    """NetBox sums a VM's disks into the VM in each transaction, so a disk added, one resized and one
    removed in the same run must not be written by concurrent requests (the later commit's sum would
    win and NetBox would refuse the VM's next save). The stage writes them one after another and names
    each update's VM, so the client keeps one VM's disks in one batch. A disk gone from Proxmox is not
    deleted by the run, even with delete_stale (sync/gone.py: the plugin's deletion requests do that)."""
    netbox = OneWriteAtATime()
    netbox.rows[PLUGIN_ENDPOINTS] = {1: {"id": 1, "name": "emu (inv:1)", "backend_id": 1}}
    await run_stages(new_run(pve_emulator, netbox))
    path = "virtualization/virtual-disks"
    disks = netbox.rows[path]
    vm_id, owned = next(
        (vm, ids)
        for vm in {d["virtual_machine"] for d in disks.values()}
        if len(ids := [pk for pk, d in disks.items() if d["virtual_machine"] == vm]) >= 2
    )
    resized, removed = owned[0], owned[1]
    disks[resized]["size"] += 1024  # NetBox drifted: the sync puts Proxmox's size back
    gone_key = disks.pop(removed)["custom_fields"]["hvsync_key"]  # the sync creates it again
    stale = {**disks[resized], "id": 9999, "name": "scsi29"}
    stale["custom_fields"] = {
        "hvsync_key": stale["custom_fields"]["hvsync_key"].rsplit("|", 1)[0] + "|scsi29"
    }
    disks[9999] = stale  # no longer in Proxmox: kept (no sidecar here, so nothing to mark either)
    written, netbox.overlapped = len(netbox.writes), set()

    results = await run_stages(
        new_run(pve_emulator, netbox, delete_stale=True), ["devices", "virtual-machines", "vm-disks"]
    )

    disk_writes = [(action, item) for action, p, item in netbox.writes[written:] if p == path]
    assert [a for a, _ in disk_writes] == ["create", "update"], disk_writes
    assert disk_writes[0][1]["custom_fields"]["hvsync_key"] == gone_key
    assert disk_writes[1][1]["id"] == resized and 9999 in netbox.rows[path]
    assert (results["vm-disks"].created, results["vm-disks"].updated, results["vm-disks"].deleted) == (
        1,
        1,
        0,
    )
    assert path not in netbox.overlapped
    named = {action: parents for action, p, parents in netbox.parents if p == path}
    assert parent_keys(path, [{}], named["update"]) == [str(vm_id)]


class ReadLog(MemoryNetBox):
    """The store, noting which reads were started ahead (`prefetch`) and which the stages made."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead: set[tuple[Any, ...]] = set()
        self.made: list[tuple[Any, ...]] = []

    @staticmethod
    def key(path: str, params: dict[str, Any] | None, kw: dict[str, Any]) -> tuple[Any, ...]:
        query = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (params or {}).items()))
        return path, query, tuple(kw.get("fields") or ()), bool(kw.get("flat"))

    def prefetch(self, path: str, params: dict[str, Any] | None = None, **kw: Any) -> None:
        self.ahead.add(self.key(path, params, kw))

    async def list_all(
        self, path: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> list[dict[str, Any]]:
        if not self.writes:
            self.made.append(self.key(path, params, kw))
        return await super().list_all(path, params, **kw)


async def test_a_one_vm_run_starts_its_netbox_reads_before_its_stages_need_them(pve_emulator):
    """A one-VM change waits on NetBox's answers, not on its own stages: every read its stages make is
    also started ahead by the run (`prefetch`: at its start, or for the platforms once Proxmox has listed
    the guests), the plugin's cluster records and the platforms included, which no earlier stage of such a
    run reads. The exception is the selected VM's addresses, known only once Proxmox reports them.
    Lookups by slug are flat reads, which the plugin's rows route answers."""
    from hvsync_backend.sync.runner import start_prefetch
    from hvsync_backend.sync.support import prepare

    netbox_store = ReadLog()
    netbox_store.rows[PLUGIN_ENDPOINTS] = {1: {"id": 1, "name": "emu (inv:1)", "backend_id": 1}}
    await run_stages(new_run(pve_emulator, netbox_store))  # the first sync
    vm = next(iter(netbox_store.rows["virtualization/virtual-machines"].values()))
    vmid = int(vm["custom_fields"]["hvsync_key"].split("|")[2])
    ctx = new_run(pve_emulator, netbox_store, only_vmids=frozenset({vmid}), partial=True)
    one_vm = ["devices", "virtual-machines", "vm-disks", "vm-interfaces", "ip-addresses"]
    ctx.upcoming = [kind for slug in one_vm for kind in BY_SLUG[slug].kinds]
    await prepare(ctx)
    netbox_store.writes.clear()
    start_prefetch(ctx)
    netbox_store.made.clear()
    await run_stages(ctx, one_vm)
    assert netbox_store.writes == []  # nothing changed in Proxmox: every read below is before any write
    made = {read[0] for read in netbox_store.made}
    assert made >= {"virtualization/virtual-machines", "plugins/hvsync/clusters", "dcim/platforms"}
    late = {read[0] for read in netbox_store.made if read not in netbox_store.ahead}
    assert late == {"ipam/ip-addresses", "plugins/hvsync/synced-ip-addresses"}
    assert all(flat for path, _, _, flat in netbox_store.made if path in ("dcim/platforms", "dcim/sites"))


async def test_every_kind_names_the_kinds_whose_ids_it_reads(pve_emulator, netbox, monkeypatch):
    """`start_prefetch` starts the reads of kinds a run links to but does not reconcile only if each kind
    names them (`linked_kinds`). A full run and then a one-VM run record which kind asked `known_ids` for
    which: every ask is named, and only two named links go unseen: the primary-IP release reads the
    addresses' rows themselves (not through `known_ids`), and computes the address kind's wanted state
    first, so the address kind finds its interface ids cached."""
    import contextvars
    import sys

    from hvsync_backend.sync import framework

    running: contextvars.ContextVar[str] = contextvars.ContextVar("running", default="")
    asked: set[tuple[str, str]] = set()
    known_ids, run_kind = framework.known_ids, framework.run_kind

    async def noting_run_kind(kind: Any, ctx: SyncContext, counts: Any) -> Any:
        token = running.set(kind.name)
        try:
            return await run_kind(kind, ctx, counts)
        finally:
            running.reset(token)

    async def noting_known_ids(ctx: SyncContext, kind: Any) -> dict[str, int]:
        asked.add((running.get(), kind.name))
        return await known_ids(ctx, kind)

    monkeypatch.setattr(framework, "run_kind", noting_run_kind)
    for module in list(sys.modules.values()):
        if module.__name__.startswith("hvsync_backend.") and getattr(module, "known_ids", None) is known_ids:
            monkeypatch.setattr(module, "known_ids", noting_known_ids)
    await run_stages(new_run(pve_emulator, netbox))
    vm = next(iter(netbox.rows["virtualization/virtual-machines"].values()))
    vmid = int(vm["custom_fields"]["hvsync_key"].split("|")[2])
    await run_stages(new_run(pve_emulator, netbox, only_vmids=frozenset({vmid}), partial=True))

    kinds = {kind.name: kind for stage in STAGES for kind in stage.kinds}
    named = {(name, linked.name) for name, kind in kinds.items() for linked in kind.linked_kinds()}
    asked_of_others = {(asker, of) for asker, of in asked if asker != of}
    assert all(asker for asker, _ in asked_of_others)  # every ask came from inside a kind's reconciliation
    assert asked_of_others <= named, asked_of_others - named
    assert ("virtual machine", "plugin cluster") in asked_of_others
    assert named - asked_of_others == {("primary ip (release)", "ip address"), ("ip address", "vm interface")}


async def test_a_lone_stage_starts_the_reads_of_the_kinds_it_links_to(pve_emulator):
    """A run of one stage (the plugin's per-stage jobs) reads the ids of what its objects point at; those
    reads start with the run, beside the stage's own, instead of when the stage first asks for them."""
    from hvsync_backend.sync.runner import start_prefetch

    netbox_store = ReadLog()
    netbox_store.rows[PLUGIN_ENDPOINTS] = {1: {"id": 1, "name": "emu (inv:1)", "backend_id": 1}}
    await run_stages(new_run(pve_emulator, netbox_store))  # the first sync
    ctx = new_run(pve_emulator, netbox_store)
    ctx.upcoming = list(BY_SLUG["vm-disks"].kinds)
    netbox_store.writes.clear()
    start_prefetch(ctx)
    netbox_store.made.clear()
    await run_stages(ctx, ["vm-disks"])
    assert netbox_store.writes == []
    ahead = {read[0] for read in netbox_store.ahead}
    assert "virtualization/virtual-machines" in ahead  # the disks' VMs, a kind this run does not reconcile
    assert "plugins/hvsync/synced-virtual-machines" in ahead  # ... and the sidecars their identity comes from
    late = {read for read in netbox_store.made if read not in netbox_store.ahead}
    assert late == set()
