"""Gone from Proxmox, end to end (issue 40): emulator -> backend -> real NetBox with the plugin.

A VM deleted in Proxmox is marked gone by the next run (nothing deleted); a node that stops answering
marks nothing of its guests; deleting 40% of the guests trips the mass-vanish guard; the `status` policy
sets and restores the VM's status. The tests run in order on one small cluster (module fixture) and sync
only the stages they need (nodes, VMs, disks), so the module stays well under a minute and a half.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Backend, NetBox, add_plugin_endpoint, start_backend
from pve_emulator.testing import running_emulator

DEVICES = "/dcim/devices/create/stream"
VMS = "/virtualization/virtual-machines/create/stream"
DISKS = "/virtualization/virtual-disks/create/stream"
GUESTS = 25
ENDPOINT: dict[str, int] = {}


@pytest.fixture(scope="module")
def cluster(netbox: NetBox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Backend]]:
    with running_emulator(scenario="large", vms=GUESTS) as emu:
        emu.state.cluster_name = "gone-lifecycle"
        for guest in emu.state.guests.values():  # no addresses: NetBox's are global, other modules own them
            guest.guest_ips = []
        ENDPOINT["pk"] = add_plugin_endpoint(netbox, "gone lifecycle")
        backend = start_backend(tmp_path_factory.mktemp("backend"))
        backend.add_inventory(netbox)
        backend.add_hv(emu, f"gone lifecycle (inv:{ENDPOINT['pk']})", site_slug="gone-site")
        for route in (DEVICES, VMS, DISKS):
            assert backend.complete(route)["ok"] is True
        try:
            yield emu, backend
        finally:
            backend.client.__exit__(None, None, None)
            forget(netbox)


def forget(netbox: NetBox) -> None:
    """Delete what this module synced (the suite's other modules count every managed object), then the
    plugin endpoint with its plugin records and sync-state records."""
    prefix = f"inv{ENDPOINT['pk']}|"
    with netbox.client() as c:
        for path in ("virtualization/virtual-machines", "dcim/devices", "virtualization/clusters"):
            rows = [
                {"id": r["id"]}
                for r in netbox.all(path, tag="hvsync")
                if str((r.get("custom_fields") or {}).get("hvsync_key") or "").startswith(prefix)
            ]
            if rows:
                assert c.request("DELETE", f"{path}/", json=rows).status_code == 204, path
        assert c.delete(f"plugins/hvsync/hv-endpoints/{ENDPOINT['pk']}/").status_code == 204


def states(netbox: NetBox, path: str = "synced-virtual-machines", **params: Any) -> dict[int, dict[str, Any]]:
    rows = netbox.all(f"plugins/hvsync/{path}", endpoint_id=ENDPOINT["pk"], **params)
    return {r["vmid"]: r for r in rows}


def vm_of(netbox: NetBox, vmid: int) -> dict[str, Any]:
    [vm] = netbox.all("virtualization/virtual-machines", cf_hvsync_key=f"inv{ENDPOINT['pk']}|vm|{vmid}")
    return vm


def resync(backend: Backend, *routes: str) -> dict[str, dict[str, Any]]:
    return {route: backend.complete(route) for route in routes or (VMS, DISKS)}


def test_a_vm_deleted_in_proxmox_is_marked_gone_and_nothing_is_deleted(
    cluster: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = cluster
    vmid = sorted(emu.state.guests)[-1]
    vm_id = vm_of(netbox, vmid)["id"]
    disks_before = {d["id"] for d in netbox.all("virtualization/virtual-disks", virtual_machine_id=vm_id)}
    assert disks_before
    guest = emu.state.guests.pop(vmid)
    emu.state.bump()

    done = resync(backend, VMS, DISKS)
    vms, disks = done[VMS], done[DISKS]
    assert vms["ok"] is True and (vms["summary"]["gone"], vms["summary"]["deleted"]) == (1, 0)
    assert disks["summary"]["gone"] == len(disks_before) and disks["summary"]["deleted"] == 0
    assert set(states(netbox, gone="true")) == {vmid}
    assert {r["vmid"] for r in states(netbox, "synced-virtual-disks", gone="true").values()} == {vmid}
    assert vm_of(netbox, vmid)["id"] == vm_id, "the VM is still in NetBox"
    assert {
        d["id"] for d in netbox.all("virtualization/virtual-disks", virtual_machine_id=vm_id)
    } == disks_before
    first = states(netbox)[vmid]["gone_since"]

    # a further run keeps the first time; the VM back in Proxmox clears the mark
    assert resync(backend, VMS)[VMS]["summary"]["gone"] == 0
    assert states(netbox)[vmid]["gone_since"] == first
    emu.state.guests[vmid] = guest
    emu.state.bump()
    back = resync(backend, VMS, DISKS)
    assert back[VMS]["summary"]["returned"] == 1
    assert states(netbox, gone="true") == {}


def test_a_node_that_stops_answering_marks_nothing_of_its_guests(
    cluster: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = cluster
    on_pve2 = {v for v, g in emu.state.guests.items() if g.node == "pve2"}
    assert on_pve2
    emu.state.set_node_online("pve2", False)
    try:
        done = resync(backend, VMS, DISKS)
    finally:
        emu.state.set_node_online("pve2", True)
    assert all(d["summary"]["gone"] == 0 for d in done.values())
    assert states(netbox, gone="true") == {} and states(netbox, "synced-virtual-disks", gone="true") == {}


def test_deleting_forty_percent_of_the_guests_trips_the_guard(
    cluster: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = cluster
    doomed = sorted(emu.state.guests)[:10]  # 10 of 25
    removed = {vmid: emu.state.guests.pop(vmid) for vmid in doomed}
    emu.state.bump()
    try:
        done = resync(backend, VMS)[VMS]
    finally:
        emu.state.guests.update(removed)
        emu.state.bump()
    assert done["ok"] is False and done["summary"]["gone"] == 0
    assert done["error"]["failure_kind"] == "mass_vanish"
    assert f"10 of {GUESTS} virtual machine" in done["error"]["detail"]
    assert states(netbox, gone="true") == {}
    assert resync(backend, VMS)[VMS]["ok"] is True  # the guests are back: nothing to say


def test_the_status_policy_sets_and_restores_the_status(cluster: tuple[Any, Backend], netbox: NetBox) -> None:
    emu, backend = cluster
    with netbox.client() as c:
        r = c.patch(
            f"plugins/hvsync/hv-endpoints/{ENDPOINT['pk']}/",
            json={"gone_policy": "status", "gone_status": "decommissioning"},
        )
        assert r.status_code == 200, r.text
    vmid = sorted(emu.state.guests)[0]
    before = vm_of(netbox, vmid)["status"]["value"]
    guest = emu.state.guests.pop(vmid)
    emu.state.bump()
    resync(backend, VMS)
    assert vm_of(netbox, vmid)["status"]["value"] == "decommissioning"
    assert states(netbox)[vmid]["gone_prior_status"] == before

    emu.state.guests[vmid] = guest
    emu.state.bump()
    resync(backend, VMS)
    assert vm_of(netbox, vmid)["status"]["value"] == before
    assert states(netbox)[vmid]["gone_since"] is None and states(netbox)[vmid]["gone_prior_status"] == ""
