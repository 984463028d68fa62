"""Sync-state sidecars (SPEC 9.5): the engine records every core object's Proxmox identity in the plugin's
`synced-*` models and finds its objects by them, not by the editable `hvsync_key` custom field.

The tests run in order on one NetBox (module fixture): full sync, quiet resync, edited keys and names,
adoption of an object without a sidecar. IPs and SDN subnets are moved to ranges no other e2e module uses
(NetBox enforces globally unique addresses and prefixes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Backend, NetBox, add_plugin_endpoint, changelog_count, start_backend
from pve_emulator.testing import running_emulator

FULL = "/full-update/stream"
SIDECARS = {
    # sidecar path: (link field, core path)
    "synced-virtual-machines": ("virtual_machine", "virtualization/virtual-machines"),
    "synced-devices": ("device", "dcim/devices"),
    "synced-virtual-disks": ("virtual_disk", "virtualization/virtual-disks"),
    "synced-ip-addresses": ("ip_address", "ipam/ip-addresses"),
    "synced-prefixes": ("prefix", "ipam/prefixes"),
}
CORE = [
    "/dcim/devices/create/stream",
    "/virtualization/virtual-machines/create/stream",
    "/virtualization/virtual-disks/create/stream",
    "/virtualization/interfaces/create/stream",
]
ENDPOINT: dict[str, int] = {}


def isolate(state: Any, cluster: str) -> None:
    """Give this emulator its own cluster name, task UPIDs and address ranges (10.x -> 172.x,
    fd00: -> fd07:), so it never collides with the demo emulator of test_sync_demo in one NetBox."""
    state.cluster_name = cluster
    for guest in state.guests.values():
        guest.guest_ips = [
            (nic, re.sub(r"^10\.", "172.", ip).replace("fd00:", "fd07:"), length)
            for nic, ip, length in guest.guest_ips
        ]
        for slot, text in list(guest.config.items()):
            if re.fullmatch(r"net\d+", slot):
                guest.config[slot] = re.sub(r"(ip|gw)=10\.", r"\1=172.", text)
    tasks = {}
    for task in state.tasks.values():  # UPIDs are unique across the plugin's task history
        parts = task.upid.split(":")
        parts[2] = "7" + parts[2][1:]
        task.upid = ":".join(parts)
        tasks[task.upid] = task
    state.tasks = tasks
    for subnets in state.sdn_subnets.values():
        for cfg in subnets.values():
            for field in ("cidr", "gateway"):
                if field in cfg:
                    cfg[field] = re.sub(
                        r"^(10|192)\.", lambda m: "172." if m[1] == "10" else "193.", cfg[field]
                    )


def sidecars(netbox: NetBox, path: str, **params: Any) -> list[dict[str, Any]]:
    return netbox.all(f"plugins/hvsync/{path}", endpoint_id=ENDPOINT["pk"], **params)


def managed(netbox: NetBox, core: str, **params: Any) -> list[dict[str, Any]]:
    """Managed core objects of this module's endpoint (by the key mirror's endpoint part)."""
    prefix = f"inv{ENDPOINT['pk']}|"
    return [
        r
        for r in netbox.all(core, tag="hvsync", **params)
        if str((r.get("custom_fields") or {}).get("hvsync_key") or "").startswith(prefix)
    ]


@pytest.fixture(scope="module")
def demo(netbox: NetBox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Backend]]:
    with running_emulator(scenario="demo") as emu:
        isolate(emu.state, "sidecar-demo")
        ENDPOINT["pk"] = add_plugin_endpoint(netbox, "sidecar demo")
        backend = start_backend(tmp_path_factory.mktemp("backend"))
        backend.add_inventory(netbox)
        backend.add_hv(emu, f"sidecar demo (inv:{ENDPOINT['pk']})", site_slug="sidecar-site")
        try:
            yield emu, backend
        finally:
            backend.client.__exit__(None, None, None)


def test_full_sync_gives_every_managed_object_exactly_one_sidecar(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = demo
    done = backend.complete(FULL)
    assert done["ok"] is True, done["errors"]
    ident = f"inv{ENDPOINT['pk']}"

    # counts on all: each managed object has one sidecar, each sidecar names a managed object
    for path, (link, core) in SIDECARS.items():
        rows = sidecars(netbox, path)
        objects = managed(netbox, core)
        assert objects, path
        assert sorted(r[link]["id"] for r in rows) == sorted(o["id"] for o in objects), path
        assert all(r["last_run_id"] and r["last_seen"] for r in rows), path
    ifaces = sidecars(netbox, "synced-interfaces")
    vm_ifaces = managed(netbox, "virtualization/interfaces")
    node_ifaces = managed(netbox, "dcim/interfaces")
    assert sorted(r["vm_interface"]["id"] for r in ifaces if r["vm_interface"]) == sorted(
        i["id"] for i in vm_ifaces
    )
    assert sorted(r["interface"]["id"] for r in ifaces if r["interface"]) == sorted(
        i["id"] for i in node_ifaces
    )
    vlans = sidecars(netbox, "synced-vlans")
    assert sorted(r["vlan"]["id"] for r in vlans) == sorted(v["id"] for v in managed(netbox, "ipam/vlans"))

    # field by field on a few
    state = emu.state
    vms = {r["custom_fields"]["hvsync_key"]: r for r in managed(netbox, "virtualization/virtual-machines")}
    assert len(vms) == len(state.guests)
    [hv_cluster] = netbox.all("plugins/hvsync/clusters", endpoint_id=ENDPOINT["pk"])
    by_vmid = {r["vmid"]: r for r in sidecars(netbox, "synced-virtual-machines")}
    assert set(by_vmid) == set(state.guests)
    for vmid in (100, 200, next(v for v, g in state.guests.items() if g.is_template)):
        guest, row = state.guests[vmid], by_vmid[vmid]
        assert row["virtual_machine"]["id"] == vms[f"{ident}|vm|{vmid}"]["id"]
        assert row["endpoint"]["id"] == ENDPOINT["pk"]
        assert row["vm_type"]["value"] == guest.kind
        assert row["node_name"] == guest.node
        assert row["is_template"] is guest.is_template
        assert row["cluster"]["id"] == hv_cluster["id"]
    devices = {d["name"]: d for d in managed(netbox, "dcim/devices")}
    nodes = {r["node_name"]: r for r in sidecars(netbox, "synced-devices")}
    assert set(nodes) == set(state.nodes)
    assert all(nodes[n]["device"]["id"] == devices[n]["id"] for n in state.nodes)
    [nic] = [r for r in ifaces if r["vmid"] == 100 and r["key"] == "net0"]
    assert nic["vm_interface"]["id"] == next(
        i["id"] for i in vm_ifaces if i["custom_fields"]["hvsync_key"] == f"{ident}|vm|100|nic|net0"
    )
    [bridge] = [r for r in ifaces if r["node_name"] == "pve1" and r["key"] == "vmbr0"]
    assert bridge["interface"]["name"] == "vmbr0" and bridge["vmid"] is None
    [disk] = [r for r in sidecars(netbox, "synced-virtual-disks", vmid=100)]
    assert (disk["key"], disk["virtual_disk"]["name"]) == ("scsi0", "scsi0")
    [ip] = sidecars(netbox, "synced-ip-addresses", address="172.10.0.100/24")
    assert (ip["vmid"], ip["interface_key"]) == (100, "net1")
    assert ip["ip_address"]["address"] == "172.10.0.100/24"
    guest_vlan = {r["vnet"]: r for r in vlans}
    assert guest_vlan["vid:20"]["zone"] == "" and guest_vlan["vid:20"]["vlan"]["vid"] == 20
    assert guest_vlan["vnet100"]["zone"] == "vlanzone" and guest_vlan["vnet100"]["vlan"]["vid"] == 100
    prefixes = {r["subnet"]: r for r in sidecars(netbox, "synced-prefixes")}
    assert prefixes["vlanzone-172.100.0.0-24"]["vnet"] == "vnet100"
    assert prefixes["vlanzone-172.100.0.0-24"]["prefix"]["prefix"] == "172.100.0.0/24"


def test_second_run_writes_nothing(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    _, backend = demo
    before = changelog_count(netbox)
    done = backend.complete(FULL)
    assert done["ok"] is True, done["errors"]
    assert done["requests"]["netbox_writes"] == 0
    assert changelog_count(netbox) == before


def test_cleared_key_and_renamed_vm_keep_the_same_object(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    _, backend = demo
    ident = f"inv{ENDPOINT['pk']}"
    [vm] = [v for v in managed(netbox, "virtualization/virtual-machines") if v["name"] == "web-01"]
    [nic] = managed(netbox, "virtualization/interfaces", virtual_machine_id=vm["id"], name="net0")
    with netbox.client() as c:
        c.patch(
            f"virtualization/virtual-machines/{vm['id']}/",
            json={"name": "not-web-01", "custom_fields": {"hvsync_key": None}},
        ).raise_for_status()
        c.patch(
            f"virtualization/interfaces/{nic['id']}/", json={"custom_fields": {"hvsync_key": "garbage"}}
        ).raise_for_status()
    vm_count = len(netbox.all("virtualization/virtual-machines"))

    done = backend.complete(FULL)
    assert done["ok"] is True, done["errors"]
    stages = {s["stage"]: s["summary"] for s in done["stages"]}
    assert (stages["virtual-machines"]["created"], stages["virtual-machines"]["updated"]) == (0, 1)
    assert (stages["vm-interfaces"]["created"], stages["vm-interfaces"]["updated"]) == (0, 1)
    [again] = netbox.all("virtualization/virtual-machines", id=vm["id"])
    assert again["name"] == "web-01"  # the NetBox rename is put back
    assert again["custom_fields"]["hvsync_key"] == f"{ident}|vm|100"  # the mirror is written back
    [nic_again] = netbox.all("virtualization/interfaces", id=nic["id"])
    assert nic_again["custom_fields"]["hvsync_key"] == f"{ident}|vm|100|nic|net0"
    assert len(netbox.all("virtualization/virtual-machines")) == vm_count  # no duplicate
    assert [r["virtual_machine"]["id"] for r in sidecars(netbox, "synced-virtual-machines", vmid=100)] == [
        vm["id"]
    ]
    assert backend.complete(FULL)["requests"]["netbox_writes"] == 0

    # a selected-VM sync reads VMs by key prefix: the sidecar still finds the one whose key was cleared
    with netbox.client() as c:
        c.patch(
            f"virtualization/virtual-machines/{vm['id']}/", json={"custom_fields": {"hvsync_key": None}}
        ).raise_for_status()
    r = backend.client.post("/sync/individual/vm", params={"vmid": 100}, headers=backend.headers)
    assert r.status_code == 200, r.text
    assert {s["stage"]: s["summary"] for s in r.json()["stages"]}["virtual-machines"]["created"] == 0
    [again] = netbox.all("virtualization/virtual-machines", id=vm["id"])
    assert again["custom_fields"]["hvsync_key"] == f"{ident}|vm|100"
    assert len(netbox.all("virtualization/virtual-machines")) == vm_count


def test_object_without_sidecar_is_adopted(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    """An object written by an older release (tag and key, no sidecar) is adopted, never duplicated."""
    _, backend = demo
    [row] = sidecars(netbox, "synced-virtual-machines", vmid=101)
    [disk] = sidecars(netbox, "synced-virtual-disks", vmid=101)
    with netbox.client() as c:
        c.delete(f"plugins/hvsync/synced-virtual-machines/{row['id']}/").raise_for_status()
        c.delete(f"plugins/hvsync/synced-virtual-disks/{disk['id']}/").raise_for_status()
    vm_count = len(netbox.all("virtualization/virtual-machines"))
    done = backend.complete(FULL)
    assert done["ok"] is True, done["errors"]
    assert done["summary"]["created"] == done["summary"]["updated"] == 0
    assert done["requests"]["netbox_writes"] == 2  # the two sidecars, nothing else
    [adopted] = sidecars(netbox, "synced-virtual-machines", vmid=101)
    assert adopted["virtual_machine"]["id"] == row["virtual_machine"]["id"]
    [disk_again] = sidecars(netbox, "synced-virtual-disks", vmid=101)
    assert disk_again["virtual_disk"]["id"] == disk["virtual_disk"]["id"]
    assert len(netbox.all("virtualization/virtual-machines")) == vm_count


def test_migrated_vm_updates_its_sidecar_once(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    """A VM moved to another node: its device changes and its sidecar's node_name, one write each."""
    emu, backend = demo
    guest = emu.state.guests[102]
    target = next(n for n in sorted(emu.state.nodes) if n != guest.node)
    [before] = sidecars(netbox, "synced-virtual-machines", vmid=102)
    guest.node = target
    done = backend.complete("/virtualization/virtual-machines/create/stream")
    assert done["ok"] is True, done["errors"]
    assert (done["summary"]["updated"], done["summary"]["created"]) == (1, 0)
    assert done["requests"]["netbox_writes"] == 2  # the VM's device, the sidecar's node_name
    [after] = sidecars(netbox, "synced-virtual-machines", vmid=102)
    assert (after["id"], after["node_name"]) == (before["id"], target)
    assert after["last_run_id"] != before["last_run_id"]
    [vm] = netbox.all("virtualization/virtual-machines", id=after["virtual_machine"]["id"])
    assert vm["device"]["name"] == target
    assert (
        backend.complete("/virtualization/virtual-machines/create/stream")["requests"]["netbox_writes"] == 0
    )


def test_deleted_vm_is_marked_gone_not_deleted(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    """delete_stale no longer deletes (issue 40): the VM's sidecar is marked gone and asks the plugin for
    a deletion request, which a second person approves (or the endpoint's unattended mode applies)."""
    emu, backend = demo
    del emu.state.guests[104]
    done = backend.complete("/virtualization/virtual-machines/create/stream", delete_stale="true")
    assert done["ok"] is True, done
    summary = done["summary"]
    assert (summary["deleted"], summary["gone"], summary["deletion_requests"]) == (0, 1, 1), done
    [state] = sidecars(netbox, "synced-virtual-machines", vmid=104)
    assert state["gone_since"] and state["gone_request"] is True
    assert managed(netbox, "virtualization/virtual-machines", id=state["virtual_machine"]["id"])


def test_two_endpoints_with_overlapping_vmids_keep_separate_sidecars(
    backend_factory: Any, netbox: NetBox
) -> None:
    backend = backend_factory()
    backend.add_inventory(netbox)
    with running_emulator(scenario="large", vms=3) as one, running_emulator(scenario="large", vms=4) as two:
        one.state.cluster_name, two.state.cluster_name = "sidecar-one", "sidecar-two"
        pk_one = add_plugin_endpoint(netbox, "sidecar one")
        pk_two = add_plugin_endpoint(netbox, "sidecar two")
        backend.add_hv(one, f"sidecar one (inv:{pk_one})", site_slug="sidecar-one")
        backend.add_hv(two, f"sidecar two (inv:{pk_two})", site_slug="sidecar-two")
        for route in CORE:
            assert backend.complete(route)["ok"] is True
        shared = sorted(set(one.state.guests) & set(two.state.guests))
        assert shared
        rows = {
            pk: {r["vmid"]: r for r in netbox.all("plugins/hvsync/synced-virtual-machines", endpoint_id=pk)}
            for pk in (pk_one, pk_two)
        }
        assert set(rows[pk_one]) == set(one.state.guests)
        assert set(rows[pk_two]) == set(two.state.guests)
        for vmid in shared:
            a, b = rows[pk_one][vmid], rows[pk_two][vmid]
            assert a["virtual_machine"]["id"] != b["virtual_machine"]["id"]
            [vm_a] = netbox.all("virtualization/virtual-machines", id=a["virtual_machine"]["id"])
            assert vm_a["custom_fields"]["hvsync_key"] == f"inv{pk_one}|vm|{vmid}"
            disks = {
                pk: netbox.all("plugins/hvsync/synced-virtual-disks", endpoint_id=pk, vmid=vmid)
                for pk in (pk_one, pk_two)
            }
            assert (
                {d["key"] for d in disks[pk_one]} == {d["key"] for d in disks[pk_two]} == {"scsi0", "scsi1"}
            )
            assert not {d["virtual_disk"]["id"] for d in disks[pk_one]} & {
                d["virtual_disk"]["id"] for d in disks[pk_two]
            }
        assert sum(backend.complete(route)["requests"]["netbox_writes"] for route in CORE) == 0


def test_endpoint_unknown_to_the_plugin_is_reported_and_synced_by_key(
    backend_factory: Any, netbox: NetBox
) -> None:
    backend = backend_factory()
    backend.add_inventory(netbox)
    with running_emulator(scenario="large", vms=2) as emu:
        emu.state.cluster_name = "sidecar-orphan"
        backend.add_hv(emu, "no plugin record (inv:987654)", site_slug="sidecar-orphan")
        assert backend.complete(CORE[0])["summary"]["failed"] == 0
        frames = backend.stream(CORE[1])
        done = frames[-1]["data"]
        assert done["summary"]["created"] == 2 and done["summary"]["failed"] == 0
        problems = [f["data"]["problem"] for f in frames if f["event"] == "step" and f["data"].get("problem")]
        assert any("no record in the hvsync plugin" in p["detail"] for p in problems), problems
        assert backend.complete(CORE[1])["requests"]["netbox_writes"] == 0
