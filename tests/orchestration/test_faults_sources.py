"""The fault matrix on the sources' side: NetBox going down in the middle of a stage (after it committed
a write whose answer never came), a Proxmox node going offline, a guest vanishing between the guest list
and its config read. Each is classified as SPEC 6.2 says, leaks no planted secret, deletes nothing, and a
rerun afterwards converges with zero duplicates.

NetBox faults are injected by a second fault proxy between the backend and NetBox: the inventory
endpoint's port is pointed at it for the test. Proxmox faults are made in the emulator's model.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import PLUGIN_API, NetBox, Plugin, assert_no_secrets
from fault_proxy import Fault, FaultProxy

VMS_API = "/api/virtualization/virtual-machines/"
#: The apply path's route: VM writes arrive here as change sets naming the VM list (docs/apply-path.md)
CHANGE_SETS = "/api/plugins/hvsync/change-sets/"
VM_CREATES = '"op":"create","path":"virtualization/virtual-machines"'  # as httpx sends JSON


@pytest.fixture
def netbox_side(netbox: NetBox, plugin: Plugin) -> Iterator[FaultProxy]:
    """A fault proxy in front of NetBox for the backend's reads and writes (not the plugin's own)."""
    proxy = FaultProxy(netbox.url).start()
    path = f"{PLUGIN_API}inventory-endpoints/{plugin.inventory_endpoint['id']}/"
    original = netbox.get(path)["port"]
    netbox.patch(path, {"port": int(proxy.url.rsplit(":", 1)[1])})
    try:
        yield proxy
    finally:
        netbox.patch(path, {"port": original})
        proxy.stop()


def managed_vms(netbox: NetBox) -> list[dict[str, Any]]:
    return list(netbox.get("virtualization/virtual-machines/", tag="hvsync", limit=1000)["results"])


def delete_managed_vms(netbox: NetBox) -> None:
    ids = [{"id": vm["id"]} for vm in managed_vms(netbox)]
    if ids:
        with netbox.client() as c:
            r = c.request("DELETE", "virtualization/virtual-machines/", json=ids)
            assert r.status_code == 204, r.text[:500]


def assert_one_vm_per_guest(netbox: NetBox, emulator: Any, left_out: set[int] = frozenset()) -> None:
    vms = managed_vms(netbox)
    by_name = Counter(vm["name"] for vm in vms)
    assert [name for name, n in by_name.items() if n > 1] == [], "duplicate VMs after the rerun"
    wanted = {g.name for g in emulator.state.guests.values() if g.vmid not in left_out}
    assert wanted <= set(by_name), sorted(wanted - set(by_name))


def vm_stage(job: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in job["data"]["sync"]["stages"] if s["stage"] == "virtual-machines")


def test_netbox_down_mid_stage_is_an_application_failure_and_a_rerun_converges(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, netbox_side: FaultProxy, emulator: Any
) -> None:
    assert netbox.run_sync(sync_types=["devices"])["status"]["value"] == "completed"
    delete_managed_vms(netbox)
    # the first VM write reaches NetBox and is committed, its answer is lost, then NetBox is gone (so the
    # backend cannot even read back what landed)
    netbox_side.set(
        CHANGE_SETS, Fault("lost_answer", method="POST", times=1, then_down=True, body_contains=VM_CREATES)
    )
    job = netbox.run_sync(sync_types=["virtual-machines"])
    assert job["status"]["value"] == "failed"
    stage = vm_stage(job)
    # the backend answered (a complete frame with ok false): SPEC 6.2 calls that an application failure
    assert stage["ok"] is False and stage["failure_kind"] == "application", stage
    assert "virtual-machines" in job["error"]
    assert any(h.method == "POST" and VM_CREATES.encode() in h.body for h in netbox_side.hits)
    assert_no_secrets(job, plugin.planted)
    committed = managed_vms(netbox)
    assert committed, "the lost write was committed by NetBox (the case a rerun must not duplicate)"

    netbox_side.clear()
    rerun = netbox.run_sync(sync_types=["virtual-machines"])
    assert rerun["status"]["value"] == "completed", rerun["error"]
    assert_one_vm_per_guest(netbox, emulator)
    assert {vm["id"] for vm in committed} <= {vm["id"] for vm in managed_vms(netbox)}  # adopted, not redone
    again = netbox.run_sync(sync_types=["virtual-machines"])
    assert again["status"]["value"] == "completed"
    assert vm_stage(again)["summary"]["created"] == 0 and vm_stage(again)["summary"]["updated"] == 0


def test_a_change_set_whose_answer_was_lost_is_read_back_not_written_twice(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, netbox_side: FaultProxy, emulator: Any
) -> None:
    assert netbox.run_sync(sync_types=["devices"])["status"]["value"] == "completed"
    delete_managed_vms(netbox)
    netbox_side.set(CHANGE_SETS, Fault("lost_answer", method="POST", times=1, body_contains=VM_CREATES))
    job = netbox.run_sync(sync_types=["virtual-machines"])
    assert job["status"]["value"] == "completed", job["error"]
    lost = next(h for h in netbox_side.hits if h.method == "POST" and VM_CREATES.encode() in h.body)
    set_id = json.loads(lost.body)["id"]
    assert f"{CHANGE_SETS}{set_id}/" in netbox_side.paths("GET")  # read back under the change set's id
    assert vm_stage(job)["summary"]["failed"] == 0
    assert_one_vm_per_guest(netbox, emulator)


def test_on_the_rest_path_a_lost_create_is_read_back_by_its_key_not_written_twice(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, netbox_side: FaultProxy, emulator: Any
) -> None:
    assert netbox.run_sync(sync_types=["devices"])["status"]["value"] == "completed"
    delete_managed_vms(netbox)
    # a NetBox whose plugin offers no apply path (discovery answers 404): the backend writes over REST
    netbox_side.set(CHANGE_SETS, Fault("status", status=404, body={"detail": "Not found."}))
    netbox_side.set(VMS_API, Fault("lost_answer", method="POST", times=1))
    job = netbox.run_sync(sync_types=["virtual-machines"])
    assert job["status"]["value"] == "completed", job["error"]
    assert not any(h.method == "POST" and h.path.startswith(CHANGE_SETS) for h in netbox_side.hits)
    reads = [h.path for h in netbox_side.hits if h.method == "GET" and "cf_hvsync_key=" in h.path]
    assert any(p.startswith(VMS_API) for p in reads)  # the lost list was read back by key
    assert vm_stage(job)["summary"]["failed"] == 0
    assert_one_vm_per_guest(netbox, emulator)


def test_an_offline_proxmox_node_leaves_its_guests_alone(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, emulator: Any
) -> None:
    first = netbox.run_sync(sync_types=["devices", "virtual-machines"])
    assert first["status"]["value"] == "completed", first["error"]
    before = {vm["name"]: vm for vm in managed_vms(netbox)}
    node = "pve2"
    on_node = {g.vmid: g.name for g in emulator.state.guests.values() if g.node == node}
    assert on_node
    emulator.state.set_node_online(node, False)
    try:
        job = netbox.run_sync(sync_types=["devices", "virtual-machines"])
    finally:
        emulator.state.set_node_online(node, True)
    # a node that is down is a fact to record, not a failure: the other nodes sync, nothing is deleted
    assert job["status"]["value"] == "completed", job["error"]
    device = netbox.get("dcim/devices/", tag="hvsync", name=node)["results"]
    assert device and device[0]["status"]["value"] == "offline"
    after = {vm["name"]: vm for vm in managed_vms(netbox)}
    assert set(after) == set(before)
    for name in on_node.values():  # left as they were: their state is unknown while the node is down
        assert after[name]["status"] == before[name]["status"] and after[name]["id"] == before[name]["id"]
    assert_no_secrets(job, plugin.planted)

    rerun = netbox.run_sync(sync_types=["devices", "virtual-machines"])
    assert rerun["status"]["value"] == "completed", rerun["error"]
    assert netbox.get("dcim/devices/", tag="hvsync", name=node)["results"][0]["status"]["value"] == "active"
    assert_one_vm_per_guest(netbox, emulator)


def test_a_guest_vanishing_mid_read_is_left_out_and_reported(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert netbox.run_sync(sync_types=["devices", "virtual-machines"])["status"]["value"] == "completed"
    backend = emulator.app.backend
    victim = min(g.vmid for g in emulator.state.guests.values() if not g.is_template)
    kept = emulator.state.guests[victim]
    real_handle = backend.handle

    def racing(op: Any, params: dict[str, Any], identity: Any) -> Any:
        """The guest is deleted (or migrated) after the guest list was read, before its config is."""
        if op.path.endswith("/{vmid}/config") and str(params.get("vmid")) == str(victim):
            emulator.state.guests.pop(victim, None)
            emulator.state.bump()
        return real_handle(op, params, identity)

    monkeypatch.setattr(backend, "handle", racing)
    try:
        job = netbox.run_sync(sync_types=["virtual-machines"])
    finally:
        monkeypatch.setattr(backend, "handle", real_handle)
        emulator.state.guests[victim] = kept
        emulator.state.bump()
    # one guest's answer concerns that guest alone: the stage completes without it, and says so
    assert job["status"]["value"] == "completed", job["error"]
    text = " ".join(e["message"] for e in job.get("log_entries") or [])
    assert str(victim) in text, text[-2000:]
    assert kept.name in {vm["name"] for vm in managed_vms(netbox)}  # not deleted for being unreadable
    assert_no_secrets(job, plugin.planted)
    rerun = netbox.run_sync(sync_types=["virtual-machines"])
    assert rerun["status"]["value"] == "completed", rerun["error"]
    assert_one_vm_per_guest(netbox, emulator)
