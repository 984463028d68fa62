"""REST for the synced-data models and the sync-state sidecars: what the backend writes and reads back."""

from __future__ import annotations

import pytest
from support import API

pytestmark = pytest.mark.django_db


def crud(api, resource: str, body: dict, patch: dict, filters: dict[str, object]):
    """Create, read back exactly, patch, filter, delete; returns the created row."""
    url = f"{API}{resource}/"
    created = api.post(url, body, format="json")
    assert created.status_code == 201, (resource, created.content)
    row = api.get(f"{url}{created.json()['id']}/").json()
    for key, value in body.items():
        got = row[key]
        if isinstance(got, dict) and "id" in got:
            got = got["id"]
        elif isinstance(got, dict) and "value" in got:
            got = got["value"]
        elif isinstance(got, list) and got and isinstance(got[0], dict):
            got = [g["id"] for g in got]
        assert got == value, (resource, key, got, value)
    patched = api.patch(f"{url}{row['id']}/", patch, format="json")
    assert patched.status_code == 200, (resource, patched.content)
    for key, value in patch.items():
        assert patched.json()[key] == value, (resource, key)
    for query, value in filters.items():
        listed = api.get(url, {query: value}).json()["results"]
        assert [r["id"] for r in listed] == [row["id"]], (resource, query)
    assert api.delete(f"{url}{row['id']}/").status_code == 204
    assert api.get(f"{url}{row['id']}/").status_code == 404
    return row


def test_clusters_nodes_storage(api, hv, netbox_objects):
    crud(
        api,
        "clusters",
        {"endpoint": hv["other"].pk, "name": "c2", "cluster": netbox_objects["cluster"].pk},
        {"name": "c2-renamed"},
        {"name": "c2-renamed", "q": "c2-ren"},
    )
    crud(
        api,
        "nodes",
        {"cluster": hv["hv_cluster"].pk, "name": "pve3", "node_id": 3, "online": True},
        {"online": False},
        {"node_id": 3, "name": "pve3"},
    )
    storage = crud(
        api,
        "storage",
        {
            "cluster": hv["hv_cluster"].pk,
            "name": "ceph",
            "storage_type": "rbd",
            "content": ["images", "rootdir"],
            "shared": True,
            "total": 10**12,
            "used": 4 * 10**11,
            "avail": 6 * 10**11,
            "nodes": [hv["node1"].pk, hv["node2"].pk],
        },
        {"active": False, "used": None},
        {"storage_type": "rbd", "node_id": hv["node2"].pk},
    )
    assert storage["total"] == 10**12 and storage["content"] == ["images", "rootdir"]


def test_backups_snapshots_task_history(api, hv):
    backup = crud(
        api,
        "backups",
        {
            "storage": hv["pbs"].pk,
            "volid": "pbs:backup/vm/100/2026-11-20T01:00:00Z",
            "vmid": 100,
            "virtual_machine": hv["vm1"].pk,
            "ctime": "2026-11-20T01:00:05Z",
            "size": 123456789,
            "format": "pbs-vm",
            "notes": "web-1 nightly",
            "protected": True,
            "verification_state": "ok",
        },
        {"protected": False, "virtual_machine": None},
        {"vmid": 100, "storage_id": hv["pbs"].pk, "verification_state": "ok"},
    )
    assert backup["verification_state"] == {"value": "ok", "label": "Verified"}
    crud(
        api,
        "snapshots",
        {
            "virtual_machine": hv["vm1"].pk,
            "name": "before-upgrade",
            "parent": "current",
            "snaptime": "2026-11-19T08:30:00Z",
            "vmstate": True,
            "description": "pre 8.3",
        },
        {"description": ""},
        {"virtual_machine_id": hv["vm1"].pk, "q": "before"},
    )
    crud(
        api,
        "task-history",
        {
            "endpoint": hv["endpoint"].pk,
            "node": hv["node1"].pk,
            "upid": "UPID:pve1:0000A1B2:0012C3D4:673E1F00:vzdump:100:root@pam:",
            "task_type": "vzdump",
            "vmid": 100,
            "virtual_machine": hv["vm1"].pk,
            "user": "root@pam",
            "status": "OK",
            "starttime": "2026-11-20T01:00:00Z",
            "endtime": None,
        },
        {"endtime": "2026-11-20T01:07:30Z"},
        {"task_type": "vzdump", "node_id": hv["node1"].pk},
    )


def test_sidecars_record_proxmox_identity(api, hv, netbox_objects):
    from dcim.models import Interface
    from ipam.models import VLAN, IPAddress, Prefix
    from virtualization.models import VirtualDisk, VMInterface

    vm = netbox_objects["vm1"]
    crud(
        api,
        "synced-virtual-machines",
        {
            "endpoint": hv["endpoint"].pk,
            "virtual_machine": vm.pk,
            "cluster": hv["hv_cluster"].pk,
            "node_name": "pve1",
            "vmid": 100,
            "vm_type": "qemu",
            "is_template": False,
            "last_seen": "2026-11-22T10:00:00Z",
            "last_run_id": "r-1",
        },
        {"node_name": "pve2"},
        {"vmid": 100, "virtual_machine_id": vm.pk, "vm_type": "qemu"},
    )
    crud(
        api,
        "synced-devices",
        {
            "endpoint": hv["endpoint"].pk,
            "device": netbox_objects["device"].pk,
            "node": hv["node1"].pk,
            "node_name": "pve1",
        },
        {"last_run_id": "r-2"},
        {"node_name": "pve1"},
    )
    nic = VMInterface.objects.create(virtual_machine=vm, name="net0")
    crud(
        api,
        "synced-interfaces",
        {"endpoint": hv["endpoint"].pk, "vm_interface": nic.pk, "vmid": 100, "key": "net0"},
        {"last_run_id": "r-3"},
        {"key": "net0", "vmid": 100},
    )
    port = Interface.objects.create(device=netbox_objects["device"], name="vmbr0", type="bridge")
    crud(
        api,
        "synced-interfaces",
        {"endpoint": hv["endpoint"].pk, "interface": port.pk, "node_name": "pve1", "key": "vmbr0"},
        {"last_run_id": "r-4"},
        {"key": "vmbr0", "node_name": "pve1"},
    )
    disk = VirtualDisk.objects.create(virtual_machine=vm, name="scsi0", size=32)
    crud(
        api,
        "synced-virtual-disks",
        {"endpoint": hv["endpoint"].pk, "virtual_disk": disk.pk, "vmid": 100, "key": "scsi0"},
        {"last_run_id": "r-5"},
        {"key": "scsi0"},
    )
    address = IPAddress.objects.create(address="192.0.2.10/24")
    crud(
        api,
        "synced-ip-addresses",
        {
            "endpoint": hv["endpoint"].pk,
            "ip_address": address.pk,
            "vmid": 100,
            "interface_key": "net0",
            "address": "192.0.2.10/24",
        },
        {"last_run_id": "r-6"},
        {"address": "192.0.2.10/24"},
    )
    vlan = VLAN.objects.create(vid=42, name="vnet42")
    crud(
        api,
        "synced-vlans",
        {"endpoint": hv["endpoint"].pk, "vlan": vlan.pk, "zone": "zone1", "vnet": "vnet42"},
        {"zone": "zone2"},
        {"vnet": "vnet42"},
    )
    prefix = Prefix.objects.create(prefix="198.51.100.0/24")
    crud(
        api,
        "synced-prefixes",
        {
            "endpoint": hv["endpoint"].pk,
            "prefix": prefix.pk,
            "vnet": "vnet42",
            "subnet": "zone1-198.51.100.0-24",
        },
        {"last_run_id": "r-7"},
        {"subnet": "zone1-198.51.100.0-24"},
    )


def test_sidecar_identity_is_unique_per_endpoint(api, hv, netbox_objects):
    url = f"{API}synced-virtual-machines/"
    first = {"endpoint": hv["endpoint"].pk, "virtual_machine": netbox_objects["vm1"].pk, "vmid": 100}
    assert api.post(url, first, format="json").status_code == 201
    clash = api.post(url, {**first, "virtual_machine": netbox_objects["vm2"].pk}, format="json")
    assert clash.status_code == 400, clash.content
    other_endpoint = api.post(
        url, {**first, "endpoint": hv["other"].pk, "virtual_machine": netbox_objects["vm2"].pk}, format="json"
    )
    assert other_endpoint.status_code == 201  # the same VMID on another cluster is another VM


def test_sidecar_interface_needs_exactly_one_target(api, hv, netbox_objects):
    from virtualization.models import VMInterface

    nic = VMInterface.objects.create(virtual_machine=netbox_objects["vm1"], name="net1")
    none = api.post(
        f"{API}synced-interfaces/", {"endpoint": hv["endpoint"].pk, "key": "net1", "vmid": 100}, format="json"
    )
    assert none.status_code == 400 and "vm_interface" in none.json()
    no_vmid = api.post(
        f"{API}synced-interfaces/",
        {"endpoint": hv["endpoint"].pk, "key": "net1", "vm_interface": nic.pk},
        format="json",
    )
    assert no_vmid.status_code == 400 and "vmid" in no_vmid.json()


def test_address_sidecars_are_read_by_host_whatever_their_prefix_length(api, hv):
    """What a selected-VM sync asks (`address__isw=<host>/` per reported address): each host's sidecar,
    stored with any prefix length, and no other host's (10.0.0.5/ does not match 10.0.0.50)."""
    from ipam.models import IPAddress
    from netbox_hvsync.models import SyncedIPAddress

    for address in ("10.0.0.5/24", "10.0.0.6/16", "10.0.0.50/24", "fd00::5/64"):
        SyncedIPAddress.objects.create(
            endpoint=hv["endpoint"], ip_address=IPAddress.objects.create(address=address), address=address
        )
    listed = api.get(
        f"{API}synced-ip-addresses/",
        {"endpoint_id": hv["endpoint"].pk, "address__isw": ["10.0.0.5/", "10.0.0.6/", "fd00::5/"]},
    )
    assert listed.status_code == 200, listed.content
    assert sorted(r["address"] for r in listed.json()["results"]) == [
        "10.0.0.5/24",
        "10.0.0.6/16",
        "fd00::5/64",
    ]
