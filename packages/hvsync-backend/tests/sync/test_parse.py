"""Proxmox config strings -> NICs and disks."""

from __future__ import annotations

from hvsync_backend.sync.parse import disks, nics, size_mb, split_props


def test_split_props_keeps_leading_volume() -> None:
    assert split_props("local-lvm:vm-100-disk-0,size=32G,ssd=1") == {
        "_": "local-lvm:vm-100-disk-0",
        "size": "32G",
        "ssd": "1",
    }


def test_qemu_nics_parse_model_mac_vlan_trunks_and_link_state() -> None:
    config = {
        "net1": "e1000=bc:24:11:00:00:02,bridge=vmbr1,trunks=10;20,link_down=1",
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=30,firewall=1,mtu=9000",
        "name": "web",
    }
    first, second = nics("qemu", config)
    assert (first.slot, first.name, first.mac, first.model, first.tag, first.mtu, first.enabled) == (
        "net0",
        "net0",
        "BC:24:11:00:00:01",
        "virtio",
        30,
        9000,
        True,
    )
    assert (second.mac, second.trunks, second.enabled, second.tag) == (
        "BC:24:11:00:00:02",
        (10, 20),
        False,
        None,
    )


def test_lxc_nics_use_interface_name_and_static_ips() -> None:
    [nic] = nics(
        "lxc", {"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,ip=10.0.0.5/24,gw=10.0.0.1,ip6=dhcp"}
    )
    assert (nic.name, nic.mac, nic.static_ips) == ("eth0", "BC:24:11:AA:BB:CC", ("10.0.0.5/24",))


def test_disks_skip_cdroms_and_convert_sizes_to_mb() -> None:
    config = {
        "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "virtio1": "ceph:vm-100-disk-1,size=512M",
        "ide2": "local:iso/debian.iso,media=cdrom,size=600M",
        "scsihw": "virtio-scsi-pci",
    }
    assert [(d.slot, d.size_mb, d.volume) for d in disks("qemu", config)] == [
        ("scsi0", 32768, "local-lvm:vm-100-disk-0"),
        ("virtio1", 512, "ceph:vm-100-disk-1"),
    ]
    assert [
        (d.slot, d.size_mb)
        for d in disks(
            "lxc",
            {"rootfs": "local-lvm:subvol-200-disk-0,size=8G", "mp0": "local:200/x.raw,mp=/data,size=1T"},
        )
    ] == [
        ("mp0", 1024 * 1024),
        ("rootfs", 8192),
    ]
    assert size_mb("1.5G") == 1536
    assert size_mb("garbage") == 0
