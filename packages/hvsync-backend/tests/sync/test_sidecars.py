"""Sidecar rows -> identity keys (the inverse of what the stages write), and the key mirror."""

from __future__ import annotations

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.framework import with_key_mirror
from hvsync_backend.sync.reconcile import Desired, make_plan


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
    from hvsync_backend.sync.reconcile import Current

    want = with_key_mirror(Desired("inv3|vm|100", "web", {"name": "web"}, state={"vmid": 100}))
    assert want.state == {"vmid": 100}
    same = Current("inv3|vm|100", 9, "web", {"name": "web", "custom_fields": {"hvsync_key": "inv3|vm|100"}})
    assert make_plan({want.key: want}, {same.key: same}).unchanged == [same]
    cleared = Current("inv3|vm|100", 9, "web", {"name": "web", "custom_fields": {"hvsync_key": None}})
    [update] = make_plan({want.key: want}, {cleared.key: cleared}).update
    assert update.changes == {"custom_fields": {"hvsync_key": "inv3|vm|100"}}
