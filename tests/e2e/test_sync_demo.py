"""Emulator (demo scenario) -> backend -> real NetBox with the plugin, checked field by field.

The tests run in order on one NetBox: initial sync, no-change resync, dry run, Proxmox changes.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Backend, NetBox, changelog_count, pve, start_backend
from pve_emulator.testing import running_emulator

FULL = "/full-update/stream"
CORE_STAGES = {
    "devices",
    "virtual-machines",
    "vm-disks",
    "network-interfaces",
    "vm-interfaces",
    "ip-addresses",
    "sdn",
}
CORE_STAGES |= {"storage", "task-history", "vm-backups", "vm-snapshots", "replications", "backup-routines"}
PLUGIN_ENDPOINT: dict[str, int] = {}


def identity() -> str:
    return f"inv{PLUGIN_ENDPOINT['pk']}"


@pytest.fixture(scope="module")
def demo(netbox: NetBox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Backend]]:
    with running_emulator(scenario="demo") as emu:
        # The plugin's own record of this endpoint (as the plugin would push it): its pk is the identity.
        with netbox.client() as c:
            r = c.post(
                "plugins/hvsync/hv-endpoints/",
                json={
                    "name": "demo cluster",
                    "domain": "pve.demo.example",
                    "port": 8006,
                    "username": "root@pam",
                    "token_name": "hvsync",
                    "token_value": "plugin-side-secret-value",
                    "access_methods": ["token"],
                },
            )
            assert r.status_code == 201, r.text
            PLUGIN_ENDPOINT["pk"] = r.json()["id"]
        backend = start_backend(tmp_path_factory.mktemp("backend"))
        backend.add_inventory(netbox)
        backend.add_hv(emu, f"demo cluster (inv:{PLUGIN_ENDPOINT['pk']})", site_slug="demo-site")
        try:
            yield emu, backend
        finally:
            backend.client.__exit__(None, None, None)


def by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        r["custom_fields"]["hvsync_key"]: r for r in rows if (r.get("custom_fields") or {}).get("hvsync_key")
    }


def size_mb(text: str) -> int:
    value, unit = re.fullmatch(r"(\d+)([MGT])", text).groups()  # type: ignore[union-attr]
    return int(value) * {"M": 1, "G": 1024, "T": 1024 * 1024}[unit]


def expected_ips(guest: Any) -> dict[str, str]:
    """address -> NIC slot, as the guest reports it (agent for running QEMU with agent=1, LXC config)."""
    out: dict[str, str] = {}
    if guest.kind == "qemu":
        if guest.status == "running" and str(guest.config.get("agent", "0")).startswith("1"):
            for iface, ip, prefix in guest.guest_ips:
                if not ip.startswith(("127.", "fe80")) and ip != "::1":
                    out[f"{ip}/{prefix}"] = f"net{iface.removeprefix('eth')}"
    else:
        for slot in sorted(k for k in guest.config if re.fullmatch(r"net\d+", k)):
            match = re.search(r"(?:^|,)ip=([0-9.]+/\d+)", guest.config[slot])
            if match:
                out[match.group(1)] = slot
    return out


def test_initial_full_update_lands_every_core_stage_field_by_field(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = demo
    frames = backend.stream(FULL)
    done = frames[-1]["data"]
    stages = {s["stage"]: s for s in done["stages"]}
    assert [s["stage"] for s in done["stages"]] == [
        "devices",
        "storage",
        "virtual-machines",
        "task-history",
        "vm-disks",
        "vm-backups",
        "vm-snapshots",
        "network-interfaces",
        "vm-interfaces",
        "ip-addresses",
        "sdn",
        "replications",
        "backup-routines",
    ]
    for slug in CORE_STAGES:
        assert stages[slug]["ok"], stages[slug]
        assert stages[slug]["summary"]["failed"] == 0
    assert done["ok"] is True, done["errors"]
    assert done["requests"]["netbox_writes"] > 0
    assert any(f["event"] == "step" and f["data"]["phase"] == "write" for f in frames)

    state = emu.state
    # devices: one cluster, one device per node, in the endpoint's configured site
    [cluster] = [
        c
        for c in netbox.all("virtualization/clusters")
        if c["custom_fields"].get("hvsync_key") == f"{identity()}|cluster"
    ]
    assert cluster["name"] == state.cluster_name
    assert cluster["type"]["slug"] == "proxmox-ve"
    assert cluster["scope"]["slug"] == "demo-site"
    devices = by_key(netbox.all("dcim/devices", tag="hvsync"))
    assert {k for k in devices} == {f"{identity()}|node|{n}" for n in state.nodes}
    for name in state.nodes:
        device = devices[f"{identity()}|node|{name}"]
        assert device["name"] == name
        assert device["cluster"]["id"] == cluster["id"]
        assert device["site"]["slug"] == "demo-site"
        assert device["role"]["slug"] == "hypervisor"
        assert device["device_type"]["slug"] == "proxmox-ve-node"
        assert device["status"]["value"] == "active"
        assert "hvsync" in {t["slug"] for t in device["tags"]}

    # virtual machines, field by field
    vms = by_key(netbox.all("virtualization/virtual-machines", cluster_id=cluster["id"]))
    assert set(vms) == {f"{identity()}|vm|{vmid}" for vmid in state.guests}
    disks = by_key(netbox.all("virtualization/virtual-disks", tag="hvsync"))
    ifaces = by_key(netbox.all("virtualization/interfaces", tag="hvsync"))
    ips = by_key(netbox.all("ipam/ip-addresses", tag="hvsync"))
    vlans = by_key(netbox.all("ipam/vlans", tag="hvsync"))
    ip_by_address = {ip["address"]: ip for ip in ips.values()}
    for vmid, guest in state.guests.items():
        vm = vms[f"{identity()}|vm|{vmid}"]
        cfg = guest.config
        assert vm["name"] == guest.name
        want_status = "offline" if guest.is_template or guest.status == "stopped" else "active"
        assert vm["status"]["value"] == want_status, vmid
        cores = int(cfg.get("cores", 1)) * (int(cfg.get("sockets", 1)) if guest.kind == "qemu" else 1)
        assert float(vm["vcpus"]) == cores
        assert vm["memory"] == int(cfg["memory"])
        assert vm["device"]["name"] == guest.node
        assert vm["site"]["slug"] == "demo-site"
        assert vm["role"]["slug"] == ("pve-qemu" if guest.kind == "qemu" else "pve-lxc")
        assert vm["platform"]["slug"] == f"pve-{cfg['ostype']}"
        tags = {t["slug"] for t in vm["tags"]}
        assert {t for t in str(cfg.get("tags", "")).split(";") if t} | {"hvsync"} <= tags
        assert ("pve-template" in tags) == guest.is_template
        # disks: every non-cdrom disk with its size; VM disk is NetBox's sum of them
        pattern = r"(scsi|virtio|sata|ide)\d+" if guest.kind == "qemu" else r"rootfs|mp\d+"
        want_disks = {
            k: size_mb(re.search(r"size=(\d+[MGT])", v).group(1))  # type: ignore[union-attr]
            for k, v in cfg.items()
            if re.fullmatch(pattern, k) and "media=cdrom" not in v
        }
        got_disks = {
            d["name"]: d["size"]
            for key, d in disks.items()
            if key.startswith(f"{identity()}|vm|{vmid}|disk|")
        }
        assert got_disks == want_disks, vmid
        assert vm["disk"] == sum(want_disks.values())
        # interfaces: MAC, VLAN by (group, vid)
        nics = {k: v for k, v in cfg.items() if re.fullmatch(r"net\d+", k)}
        got_ifaces = {
            key.rsplit("|", 1)[1]: i
            for key, i in ifaces.items()
            if key.startswith(f"{identity()}|vm|{vmid}|nic|")
        }
        assert set(got_ifaces) == set(nics), vmid
        for slot, text in nics.items():
            iface = got_ifaces[slot]
            mac = re.search(r"(?:virtio|hwaddr)=([0-9A-Fa-f:]{17})", text).group(1).upper()  # type: ignore[union-attr]
            assert iface["primary_mac_address"]["mac_address"] == mac
            assert iface["virtual_machine"]["id"] == vm["id"]
            name = re.search(r"name=(\w+)", text)
            assert iface["name"] == (name.group(1) if guest.kind == "lxc" and name else slot)
            tag = re.search(r"tag=(\d+)", text)
            if tag:
                vlan = vlans[f"{identity()}|vlan|{tag.group(1)}"]
                assert iface["mode"]["value"] == "access"
                assert iface["untagged_vlan"]["id"] == vlan["id"]
                assert vlan["vid"] == int(tag.group(1))
                assert vlan["group"]["id"] is not None
            else:
                assert iface["untagged_vlan"] is None
        # IP addresses on the interface that reported them; primary IPv4 is the first NIC's
        want_ips = expected_ips(guest)
        for address, slot in want_ips.items():
            ip = ip_by_address[address]
            assert ip["assigned_object_type"] == "virtualization.vminterface"
            assert ip["assigned_object_id"] == got_ifaces[slot]["id"], (vmid, address)
        v4 = [a for a, s in sorted(want_ips.items(), key=lambda kv: int(kv[1][3:])) if ":" not in a]
        assert (vm["primary_ip4"] or {}).get("address") == (v4[0] if v4 else None), vmid
    assert len(ips) == sum(len(expected_ips(g)) for g in state.guests.values())

    # node interfaces: bridges, bonds, physical, with bridge ports and bond members linked
    node_ifaces = by_key(netbox.all("dcim/interfaces", tag="hvsync"))
    for node, rows in state.networks.items():
        for name, row in rows.items():
            if name == "lo":
                continue
            got = node_ifaces[f"{identity()}|node|{node}|iface|{name}"]
            assert got["device"]["name"] == node
            want_type = {"bridge": "bridge", "bond": "lag", "eth": "other", "vlan": "virtual"}.get(
                row.get("type"), "other"
            )
            assert got["type"]["value"] == want_type, (node, name)
    # SDN: zones -> VLAN groups, tagged vnets -> VLANs, subnets -> prefixes
    prefixes = {p["prefix"]: p for p in netbox.all("ipam/prefixes", tag="hvsync")}
    for vnet, subnets in state.sdn_subnets.items():
        for subnet in subnets.values():
            prefix = prefixes[subnet["cidr"]]
            tag = state.sdn_vnets[vnet].get("tag")
            assert (prefix["vlan"] or {}).get("vid") == (int(tag) if tag else None)
    sdn_vlans = {k: v for k, v in vlans.items() if "|sdnvnet|" in k}
    assert {v["vid"] for v in sdn_vlans.values()} == {
        int(v["tag"]) for v in state.sdn_vnets.values() if v.get("tag")
    }

    # plugin records: cluster, nodes, storage, backups, snapshots, task history, routines, replications
    [hv_cluster] = netbox.all("plugins/hvsync/clusters", endpoint_id=PLUGIN_ENDPOINT["pk"])
    assert (hv_cluster["name"], hv_cluster["cluster"]["id"]) == (state.cluster_name, cluster["id"])
    hv_nodes = {n["name"]: n for n in netbox.all("plugins/hvsync/nodes", cluster_id=hv_cluster["id"])}
    assert set(hv_nodes) == set(state.nodes)
    for name, record in state.nodes.items():
        assert hv_nodes[name]["node_id"] == record.nodeid
        assert hv_nodes[name]["online"] is record.online
        assert hv_nodes[name]["device"]["id"] == devices[f"{identity()}|node|{name}"]["id"]
    storages = {s["name"]: s for s in netbox.all("plugins/hvsync/storage", cluster_id=hv_cluster["id"])}
    assert set(storages) == set(state.storages)
    for name, cfg in state.storages.items():
        got = storages[name]
        assert got["storage_type"] == cfg["type"]
        assert sorted(got["content"]) == sorted(cfg["content"].split(","))
        assert got["shared"] is bool(cfg.get("shared"))
        assert got["nodes"], name
    backups = {b["volid"]: b for b in netbox.all("plugins/hvsync/backups")}
    want_backups = {v.volid: v for v in state.volumes.values() if v.content == "backup"}
    assert set(backups) == set(want_backups)
    for volid, volume in want_backups.items():
        assert backups[volid]["vmid"] == volume.vmid
        assert backups[volid]["storage"]["name"] == volume.storage
        assert backups[volid]["virtual_machine"]["id"] == vms[f"{identity()}|vm|{volume.vmid}"]["id"]
    snaps = {(s["virtual_machine"]["id"], s["name"]): s for s in netbox.all("plugins/hvsync/snapshots")}
    want_snaps = {
        (vms[f"{identity()}|vm|{g.vmid}"]["id"], n): snap
        for g in state.guests.values()
        for n, snap in g.snapshots.items()
    }
    assert set(snaps) == set(want_snaps)
    for pair, snap in want_snaps.items():
        assert snaps[pair]["parent"] == (snap.parent or "")
        assert snaps[pair]["vmstate"] is bool(snap.vmstate)
        assert snaps[pair]["description"] == snap.description.strip()
    tasks = {
        t["upid"]: t for t in netbox.all("plugins/hvsync/task-history", endpoint_id=PLUGIN_ENDPOINT["pk"])
    }
    assert set(tasks) == {t.upid for t in state.tasks.values()}
    for task in state.tasks.values():
        got = tasks[task.upid]
        assert (got["task_type"], got["user"], got["node"]["name"]) == (task.type, task.user, task.node)
        assert got["status"] == task.exitstatus
        if task.id.isdigit():
            assert got["vmid"] == int(task.id)
    routines = {
        r["job_id"]: r
        for r in netbox.all("plugins/hvsync/backup-routines", endpoint_id=PLUGIN_ENDPOINT["pk"])
    }
    assert set(routines) == set(state.backup_jobs)
    nightly, weekly = routines["backup-nightly"], routines["backup-weekly-all"]
    assert nightly["status"]["value"] == "active" and nightly["enabled"] is True
    assert nightly["schedule"] == "21:00" and nightly["storage"]["name"] == "nfs-backup"
    assert nightly["selection"] == [100, 101, 103, 104, 200, 201]
    assert (nightly["keep_last"], nightly["keep_daily"], nightly["keep_weekly"]) == (3, 7, None)
    assert nightly["notes_template"] == "{{guestname}} nightly" and nightly["repeat_missed"] is True
    assert nightly["zstd"] == 2 and nightly["fleecing"] == ""
    assert nightly["raw_config"]["mode"] == "snapshot"
    assert weekly["node"]["name"] == "pve1" and weekly["keep_weekly"] == 4 and weekly["selection"] == []
    replications = {
        r["replication_id"]: r
        for r in netbox.all("plugins/hvsync/replications", endpoint=PLUGIN_ENDPOINT["pk"])
    }
    assert set(replications) == set(state.replication_jobs) == {"103-0", "200-0"}
    failing = replications["200-0"]  # CT 200 to pve3, its runs failed: the definition syncs all the same
    assert (failing["guest"], failing["target"], failing["source"]) == (200, "pve3", "pve1")
    assert failing["virtual_machine"]["id"] == vms[f"{identity()}|vm|200"]["id"]
    replication = replications["103-0"]
    assert replication["virtual_machine"]["id"] == vms[f"{identity()}|vm|103"]["id"]
    assert (replication["guest"], replication["target"], replication["source"]) == (103, "pve2", "pve1")
    assert (replication["schedule"], replication["rate"], replication["jobnum"]) == ("*/15", 50.0, 0)
    assert replication["hv_node"]["name"] == "pve1" and replication["status"]["value"] == "active"


def test_the_initial_sync_wrote_through_the_path_the_backend_is_set_to(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    """`make test` runs this suite on the apply path (the default) and with HVSYNC_NETBOX_APPLY_PATH=false:
    a change set's id is the request id of its changelog rows, and only change sets have an outcome."""
    apply_path = os.environ.get("HVSYNC_NETBOX_APPLY_PATH", "true").lower() not in ("false", "0", "no")
    with netbox.client() as c:
        changes = c.get("core/object-changes/", params={"limit": 50, "ordering": "-time"}).json()["results"]
        request_ids = {row["request_id"] for row in changes if row["changed_object_type"] != "users.token"}
        assert request_ids
        outcomes = [c.get(f"plugins/hvsync/change-sets/{rid}/") for rid in sorted(request_ids)]
    assert {r.status_code for r in outcomes} == ({200} if apply_path else {404})
    if apply_path:
        assert all(r.json()["applied"] is True for r in outcomes)


def test_second_run_writes_nothing(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    _, backend = demo
    before = changelog_count(netbox)
    done = backend.complete(FULL)
    assert done["requests"]["netbox_writes"] == 0
    assert done["summary"]["created"] == done["summary"]["updated"] == done["summary"]["deleted"] == 0
    assert done["summary"]["unchanged"] > 100
    assert changelog_count(netbox) == before


def test_dry_run_shows_the_plan_and_writes_nothing(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    emu, backend = demo
    pve(emu, "PUT", "nodes/pve2/qemu/101/config", {"memory": "6144"})
    before = changelog_count(netbox)
    done = backend.complete("/virtualization/virtual-machines/create/stream", dry_run="true")
    assert done["ok"] and done["dry_run"] is True
    assert done["requests"]["netbox_writes"] == 0
    [row] = [r for r in done["plan"] if r["action"] == "update"]
    assert row["key"] == f"{identity()}|vm|101"
    assert row["changes"] == {"memory": 6144} and row["before"] == {"memory": 4096}
    assert done["summary"]["updated"] == 1
    assert changelog_count(netbox) == before
    # Templates disabled: filtered at source, no dependent objects planned for them.
    done = backend.complete(
        "/virtualization/virtual-disks/create/stream", dry_run="true", sync_mode_vm_template="disabled"
    )
    assert done["summary"]["total"] == sum(
        1
        for g in emu.state.guests.values()
        if not g.is_template
        for k, v in g.config.items()
        if re.fullmatch(r"(scsi\d+|rootfs|mp\d+)", k) and "media=cdrom" not in v
    )
    pve(emu, "PUT", "nodes/pve2/qemu/101/config", {"memory": "4096"})


def test_proxmox_changes_produce_exactly_the_expected_writes(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = demo
    state = emu.state
    pve(emu, "PUT", "nodes/pve1/qemu/100/config", {"name": "web-01-renamed"})  # VM renamed
    pve(
        emu, "PUT", "nodes/pve1/qemu/103/config", {"net2": "virtio=BC:24:11:00:00:99,bridge=vmbr0,tag=30"}
    )  # NIC added
    pve(
        emu, "PUT", "nodes/pve3/qemu/105/config", {"scsi0": "local-lvm:vm-105-disk-0,iothread=1,size=48G"}
    )  # resized
    pve(emu, "POST", "nodes/pve3/qemu/111/status/stop")
    time.sleep(0.5)
    pve(emu, "DELETE", "nodes/pve3/qemu/111")  # VM deleted
    deadline = time.monotonic() + 10
    while 111 in state.guests and time.monotonic() < deadline:
        time.sleep(0.1)
    assert 111 not in state.guests
    # IP moved: 10.10.0.100 leaves web-01's second NIC and appears on mail-01's second NIC
    state.guests[100].guest_ips = [g for g in state.guests[100].guest_ips if g[1] != "10.10.0.100"]
    state.guests[106].guest_ips = [*state.guests[106].guest_ips, ("eth1", "10.10.0.100", 24)]
    pve(emu, "DELETE", "cluster/backup/backup-weekly-all")  # backup job removed: its routine goes stale
    old_ip = next(ip for ip in netbox.all("ipam/ip-addresses", address="10.10.0.100/24"))
    new_tasks = {t.upid for t in state.tasks.values()} - {
        t["upid"] for t in netbox.all("plugins/hvsync/task-history")
    }
    assert len(new_tasks) >= 2  # the stop and the destroy of VM 111
    vm111 = netbox.all("virtualization/virtual-machines", name="ci-runner-01")[0]

    before = changelog_count(netbox)
    done = backend.complete(FULL, delete_stale="true")
    stages = {s["stage"]: s["summary"] for s in done["stages"]}
    # VM 111 is marked gone, not deleted (issue 40: delete_stale asks the plugin for a deletion request)
    vm_stage = stages["virtual-machines"]
    assert (vm_stage["updated"], vm_stage["deleted"], vm_stage["gone"], vm_stage["deletion_requests"]) == (
        1,
        0,
        1,
        1,
    )
    assert stages["virtual-machines"]["created"] == 0
    assert (stages["vm-disks"]["updated"], stages["vm-disks"]["created"], stages["vm-disks"]["deleted"]) == (
        1,
        0,
        0,
    )
    assert (stages["vm-interfaces"]["created"], stages["vm-interfaces"]["updated"]) == (1, 0)
    assert stages["ip-addresses"]["updated"] == 1 and stages["ip-addresses"]["created"] == 0
    assert all(
        stages[s]["created"] + stages[s]["updated"] + stages[s]["deleted"] == 0
        for s in ("devices", "storage", "network-interfaces", "sdn", "vm-backups", "vm-snapshots")
    )
    assert (stages["task-history"]["created"], stages["task-history"]["updated"]) == (len(new_tasks), 0)
    assert (stages["backup-routines"]["gone"], stages["backup-routines"]["deleted"]) == (1, 0)
    assert stages["vm-disks"]["gone"] >= 1 and stages["vm-interfaces"]["gone"] >= 1
    assert stages["replications"]["updated"] == 0
    # one request per write (rename, resize, NIC, IP move, new tasks in one list, the routine's gone mark),
    # plus the new NIC's sync-state sidecar and the moved IP's sidecar (its vmid and interface changed),
    # plus the gone marks of VM 111's sidecars, one request per kind: the VM, its disk, its NIC, its addresses
    gone = {s: summary["gone"] for s, summary in stages.items() if summary.get("gone")}
    assert done["requests"]["netbox_writes"] == 12, (done["requests"], gone)
    assert gone == {
        "virtual-machines": 1,
        "vm-disks": 1,
        "vm-interfaces": 1,
        "ip-addresses": 2,
        "backup-routines": 1,
    }
    [weekly] = netbox.all("plugins/hvsync/backup-routines", job_id="backup-weekly-all")
    assert weekly["status"]["value"] == "stale"

    renamed = netbox.all("virtualization/virtual-machines", cf_hvsync_key=f"{identity()}|vm|100")
    assert [v["name"] for v in renamed] == ["web-01-renamed"]
    [kept] = netbox.all("virtualization/virtual-machines", id=vm111["id"])
    [state111] = netbox.all("plugins/hvsync/synced-virtual-machines", virtual_machine_id=kept["id"])
    assert state111["gone_since"] and state111["gone_request"] is True
    [disk] = netbox.all("virtualization/virtual-disks", cf_hvsync_key=f"{identity()}|vm|105|disk|scsi0")
    assert disk["size"] == 48 * 1024
    [nic] = netbox.all("virtualization/interfaces", cf_hvsync_key=f"{identity()}|vm|103|nic|net2")
    assert nic["primary_mac_address"]["mac_address"] == "BC:24:11:00:00:99"
    assert nic["untagged_vlan"]["vid"] == 30
    [moved] = netbox.all("ipam/ip-addresses", address="10.10.0.100/24")
    assert moved["id"] == old_ip["id"]  # the same object, reassigned: never a duplicate
    [mail_nic] = netbox.all("virtualization/interfaces", cf_hvsync_key=f"{identity()}|vm|106|nic|net1")
    assert moved["assigned_object_id"] == mail_nic["id"]
    assert changelog_count(netbox) > before
    # and the next run is quiet again
    assert backend.complete(FULL)["requests"]["netbox_writes"] == 0


def test_disks_added_resized_and_removed_in_one_run_keep_the_vms_disk_total(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    """NetBox sums a VM's disks into its `disk` in each transaction, and refuses the VM's next save if that
    total is wrong. A run that creates, updates and deletes disks of one VM writes them one after another
    (docs/apply-path.md), so the total matches and the VM can still be changed."""
    emu, backend = demo
    key = f"{identity()}|vm|105"
    config = "nodes/pve3/qemu/105/config"

    def vm_and_disks() -> tuple[dict[str, Any], dict[str, int]]:
        [vm] = netbox.all("virtualization/virtual-machines", cf_hvsync_key=key)
        disks = netbox.all("virtualization/virtual-disks", virtual_machine_id=vm["id"])
        return vm, {d["name"]: d["size"] for d in disks}

    pve(
        emu,
        "PUT",
        config,
        {"scsi1": "local-lvm:vm-105-disk-1,size=16G", "scsi2": "local-lvm:vm-105-disk-2,size=8G"},
    )
    done = backend.complete(FULL, delete_stale="true")
    assert [s["summary"]["created"] for s in done["stages"] if s["stage"] == "vm-disks"] == [2]
    pve(
        emu,
        "PUT",
        config,
        {"scsi1": "local-lvm:vm-105-disk-1,size=20G", "scsi3": "local-lvm:vm-105-disk-3,size=4G"},
    )
    pve(emu, "PUT", config, {"delete": "scsi2"})
    done = backend.complete(FULL, delete_stale="true")
    [disks_stage] = [s["summary"] for s in done["stages"] if s["stage"] == "vm-disks"]
    # scsi2 is marked gone, not deleted (issue 40)
    assert (disks_stage["created"], disks_stage["updated"], disks_stage["deleted"], disks_stage["gone"]) == (
        1,
        1,
        0,
        1,
    )
    assert disks_stage["failed"] == 0
    vm, disks = vm_and_disks()
    assert disks == {"scsi0": 48 * 1024, "scsi1": 20 * 1024, "scsi2": 8 * 1024, "scsi3": 4 * 1024}
    assert vm["disk"] == sum(disks.values())
    # NetBox still takes the VM's next change (it refuses every save of a VM whose total is wrong)
    pve(emu, "PUT", config, {"memory": "3072"})
    done = backend.complete(FULL)
    [vms_stage] = [s["summary"] for s in done["stages"] if s["stage"] == "virtual-machines"]
    assert (vms_stage["updated"], vms_stage["failed"]) == (1, 0)
    assert vm_and_disks()[0]["memory"] == 3072
