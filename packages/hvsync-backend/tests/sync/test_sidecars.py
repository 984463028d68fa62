"""Sidecar rows -> identity keys (the inverse of what the stages write), and the key mirror."""

from __future__ import annotations

from typing import Any

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.framework import with_key_mirror
from hvsync_backend.sync.plan import Desired, make_plan


def test_every_spec_rebuilds_the_stage_key_from_its_row() -> None:
    cases = [
        (sidecars.VIRTUAL_MACHINE, {"vmid": 100}, "inv3|vm|100"),
        (sidecars.DEVICE, {"node_name": "pve1"}, "inv3|node|pve1"),
        (sidecars.VM_INTERFACE, {"vmid": 100, "key": "net0"}, "inv3|vm|100|nic|net0"),
        (sidecars.NODE_INTERFACE, {"node_name": "pve1", "key": "vmbr0"}, "inv3|node|pve1|iface|vmbr0"),
        (sidecars.VIRTUAL_DISK, {"vmid": 7, "key": "scsi0"}, "inv3|vm|7|disk|scsi0"),
        (sidecars.IP_ADDRESS, {"address": "10.0.0.5/24"}, "inv3|ip|10.0.0.5"),
        (sidecars.GUEST_VLAN, {"vnet": "vid:20"}, "inv3|vlan|20"),
        (sidecars.SDN_VLAN, {"vnet": "vnet100"}, "inv3|sdnvnet|vnet100"),
        (sidecars.PREFIX, {"vnet": "v1", "subnet": "zone1-10.1.0.0-24"}, "inv3|sdnsubnet|v1|10.1.0.0/24"),
    ]
    for spec, row, key in cases:
        assert spec.key_of("inv3", row) == key, spec.path


def test_shared_models_split_by_their_rows() -> None:
    assert sidecars.SDN_VLAN.key_of("inv3", {"vnet": "vid:20"}) is None
    assert sidecars.GUEST_VLAN.key_of("inv3", {"vnet": "vnet100"}) is None
    assert sidecars.VM_INTERFACE.key_of("inv3", {"node_name": "pve1", "key": "vmbr0"}) is None
    assert sidecars.NODE_INTERFACE.key_of("inv3", {"vmid": 1, "key": "net0"}) is None


def test_subnet_ids_map_back_to_cidrs() -> None:
    assert sidecars.subnet_cidr("zone-10.100.0.0-24") == "10.100.0.0/24"
    assert sidecars.subnet_cidr("z6-fd00:1::-64") == "fd00:1::/64"
    assert sidecars.subnet_cidr("10.1.0.0/16") == "10.1.0.0/16"


def test_a_cleared_key_mirror_is_written_back_and_nothing_else() -> None:
    from hvsync_backend.sync.plan import Current

    want = with_key_mirror(Desired("inv3|vm|100", "web", {"name": "web"}, state={"vmid": 100}))
    assert want.state == {"vmid": 100}
    same = Current("inv3|vm|100", 9, "web", {"name": "web", "custom_fields": {"hvsync_key": "inv3|vm|100"}})
    assert make_plan({want.key: want}, {same.key: same}).unchanged == [same]
    cleared = Current("inv3|vm|100", 9, "web", {"name": "web", "custom_fields": {"hvsync_key": None}})
    [update] = make_plan({want.key: want}, {cleared.key: cleared}).update
    assert update.changes == {"custom_fields": {"hvsync_key": "inv3|vm|100"}}


def _context(only_vmids: frozenset[int] | None, addresses: list[str]) -> Any:
    from hvsync_backend.sync.options import SyncOptions
    from hvsync_backend.sync.parse import Sighting
    from hvsync_backend.sync.run import SyncContext

    ctx = SyncContext(netbox=None, sources=[], options=SyncOptions(only_vmids=only_vmids), emit=None)  # type: ignore[arg-type]
    ctx.ip.sightings = {
        f"inv3|ip|{a.split('/')[0]}": [Sighting(a, "inv3|vm|7", "inv3|vm|7|nic|net0", (7, 0))]
        for a in addresses
    }
    return ctx


def test_a_selected_vm_run_reads_only_the_sidecars_of_the_addresses_it_reports() -> None:
    from hvsync_backend.sync.stages.ip_addresses import IPAddressKind
    from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind

    selected = _context(frozenset({7}), ["10.0.0.5/24", "fd00::5/64", "10.0.0.5/24"])
    assert sidecars.read_params(selected, IPAddressKind(), 3) == {
        "endpoint_id": 3,
        "address__isw": ["10.0.0.5/", "fd00::5/"],  # any stored prefix length, one parameter per host
    }
    # VM-scoped kinds keep reading by VMID; a full run reads the endpoint's sidecars whole
    assert sidecars.read_params(selected, VirtualMachineKind(), 3) == {"endpoint_id": 3, "vmid": [7]}
    assert sidecars.read_params(_context(None, ["10.0.0.5/24"]), IPAddressKind(), 3) == {"endpoint_id": 3}
    # a selection reporting more addresses than one request line holds reads them whole
    many = [f"10.1.{i // 250}.{i % 250}/24" for i in range(sidecars.ADDRESS_FILTER_MAX + 1)]
    assert sidecars.read_params(_context(frozenset({7}), many), IPAddressKind(), 3) == {"endpoint_id": 3}
