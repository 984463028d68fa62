"""Seed data: ``demo`` (a small realistic 3-node cluster) and ``large`` (N deterministic guests).

Both are pure functions of their arguments, so names and ids are stable across restarts.
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any

from pve_emulator.mock.guests.common import mac_for
from pve_emulator.mock.replication import run_job as run_replication
from pve_emulator.mock.state import (
    Acl,
    ApiToken,
    ClusterState,
    Guest,
    NodeRecord,
    Snapshot,
    User,
    Volume,
    digest,
)

DAY = 86400
EPOCH = 1_767_225_600  # 2026-01-01 00:00:00 UTC: fixed so backup names are stable


def _storages() -> dict[str, dict[str, Any]]:
    return {
        "local": {"type": "dir", "path": "/var/lib/vz", "content": "iso,vztmpl,backup", "shared": 0},
        "local-lvm": {
            "type": "lvmthin",
            "thinpool": "data",
            "vgname": "pve",
            "content": "images,rootdir",
            "shared": 0,
        },
        "ceph-vm": {"type": "rbd", "pool": "vm-pool", "content": "images,rootdir", "shared": 1, "krbd": 0},
        "nfs-backup": {
            "type": "nfs",
            "server": "10.10.0.5",
            "export": "/srv/backup",
            "path": "/mnt/pve/nfs-backup",
            "content": "backup,iso",
            "shared": 1,
            "prune-backups": "keep-last=3,keep-daily=7",
        },
    }


def _node_network(index: int) -> dict[str, dict[str, Any]]:
    host = 10 + index
    return {
        "eno1": {"type": "eth", "exists": 1},
        "eno2": {"type": "eth", "exists": 1},
        "eno3": {"type": "eth", "exists": 1},
        "eno4": {"type": "eth", "exists": 1, "active": 0},
        "bond0": {
            "type": "bond",
            "slaves": "eno2 eno3",
            "bond_mode": "802.3ad",
            "bond_xmit_hash_policy": "layer3+4",
        },
        "vmbr0": {
            "type": "bridge",
            "bridge_ports": "eno1",
            "bridge_stp": "off",
            "bridge_fd": 0,
            "cidr": f"10.10.0.{host}/24",
            "gateway": "10.10.0.1",
        },
        "vmbr1": {"type": "bridge", "bridge_ports": "bond0", "bridge_vlan_aware": 1, "bridge_vids": "2-4094"},
        "vmbr1.50": {"type": "vlan", "vlan-raw-device": "vmbr1", "vlan-id": 50, "cidr": f"10.50.0.{host}/24"},
    }


def _base(
    state: ClusterState, node_count: int, user: str, password: str, token_id: str, token_secret: str
) -> None:
    for i in range(node_count):
        name = f"pve{i + 1}"
        state.nodes[name] = NodeRecord(name=name, nodeid=i + 1, ip=f"10.10.0.{11 + i}")
        net = _node_network(i + 1)
        if i >= 3:
            net["eno4"]["active"] = 1
        state.networks[name] = net
    state.storages = _storages()
    users = {user, "root@pam"}
    for userid in sorted(users):
        state.users[userid] = User(
            userid=userid,
            password=password if userid == user else None,
            firstname="Admin" if userid == user else "",
        )
    if user != "root@pam":
        state.acls.append(Acl("/", user, "user", "Administrator"))
    owner, _, name = token_id.partition("!")
    state.users.setdefault(owner, User(userid=owner))
    state.users[owner].tokens[name] = ApiToken(
        tokenid=name, secret=token_secret, privsep=0, comment="emulator default token"
    )
    state.generic["/access/domains"] = {
        "pam": {"realm": "pam", "type": "pam", "comment": "Linux PAM standard authentication"},
        "pve": {"realm": "pve", "type": "pve", "comment": "Proxmox VE authentication server", "default": 1},
    }
    state.sdn_zones = {
        "vlanzone": {"type": "vlan", "bridge": "vmbr1", "ipam": "pve"},
        "simple1": {"type": "simple", "ipam": "pve"},
    }
    state.sdn_vnets = {
        "vnet100": {"zone": "vlanzone", "tag": 100, "alias": "frontend"},
        "vnet200": {"zone": "vlanzone", "tag": 200, "alias": "backend"},
        "lab": {"zone": "simple1"},
    }
    state.sdn_subnets = {
        "vnet100": {"vlanzone-10.100.0.0-24": {"cidr": "10.100.0.0/24", "gateway": "10.100.0.1"}},
        "vnet200": {"vlanzone-10.200.0.0-24": {"cidr": "10.200.0.0/24", "gateway": "10.200.0.1", "snat": 0}},
        "lab": {"simple1-192.168.77.0-24": {"cidr": "192.168.77.0/24", "gateway": "192.168.77.1", "snat": 1}},
    }


DEMO_VMS = [
    # name, cores, memory MiB, ostype, tags, running
    ("web-01", 2, 4096, "l26", "prod;web", True),
    ("web-02", 2, 4096, "l26", "prod;web", True),
    ("web-03", 2, 4096, "l26", "staging;web", False),
    ("db-01", 8, 32768, "l26", "prod;db", True),
    ("db-02", 8, 32768, "l26", "prod;db", True),
    ("cache-01", 4, 8192, "l26", "prod", True),
    ("mail-01", 2, 4096, "l26", "prod;mail", True),
    ("dc-01", 4, 8192, "win11", "prod;windows", True),
    ("dc-02", 4, 8192, "win11", "prod;windows", True),
    ("fileserver", 4, 16384, "win2022", "prod;windows", True),
    ("monitoring", 2, 8192, "l26", "ops", True),
    ("ci-runner-01", 8, 16384, "l26", "ci", True),
    ("ci-runner-02", 8, 16384, "l26", "ci", False),
    ("k8s-cp-01", 4, 8192, "l26", "k8s", True),
    ("k8s-worker-01", 8, 32768, "l26", "k8s", True),
    ("k8s-worker-02", 8, 32768, "l26", "k8s", True),
    ("vpn-gw", 1, 1024, "l26", "prod;network", True),
    ("backup-proxy", 2, 4096, "l26", "ops", True),
    ("debian-13-template", 2, 2048, "l26", "template", False),
    ("win11-template", 4, 8192, "win11", "template", False),
]
DEMO_CTS = [
    ("dns-01", 1, 512, "debian", "prod;dns", True),
    ("dns-02", 1, 512, "debian", "prod;dns", True),
    ("proxy-01", 2, 1024, "alpine", "prod;web", True),
    ("git", 2, 2048, "debian", "dev", True),
    ("wiki", 1, 1024, "ubuntu", "dev", True),
    ("grafana", 2, 2048, "debian", "ops", True),
    ("syslog", 1, 1024, "debian", "ops", True),
    ("ntp", 1, 256, "alpine", "prod", False),
    ("pihole", 1, 512, "debian", "lab", True),
    ("build-cache", 2, 4096, "ubuntu", "ci", False),
]


def demo(user: str, password: str, token_id: str, token_secret: str) -> ClusterState:
    state = ClusterState(cluster_name="hvsync-demo")
    _base(state, 3, user, password, token_id, token_secret)
    nodes = list(state.nodes)
    state.pools = {
        "production": {"comment": "production workloads", "storage": ["ceph-vm"]},
        "lab": {"comment": "experiments", "storage": []},
    }
    now = time.time()
    for i, (name, cores, memory, ostype, tags, running) in enumerate(DEMO_VMS):
        vmid = 100 + i
        node = nodes[i % 3]
        storage = "ceph-vm" if i % 2 == 0 else "local-lvm"
        tag = (10, 20, 30, None)[i % 4]
        config: dict[str, Any] = {
            "name": name,
            "cores": cores,
            "sockets": 1,
            "memory": str(memory),
            "ostype": ostype,
            "tags": tags,
            "scsihw": "virtio-scsi-single",
            "agent": "1" if i % 5 != 4 else "0",
            "boot": "order=scsi0;net0",
            "scsi0": f"{storage}:vm-{vmid}-disk-0,iothread=1,size={32 if memory < 16384 else 64}G",
            "net0": f"virtio={mac_for(vmid, 0)},bridge=vmbr1{',tag=' + str(tag) if tag else ''},firewall=1",
            "ide2": "none,media=cdrom",
            "cpu": "x86-64-v2-AES",
            "bios": "ovmf" if ostype.startswith("win") else "seabios",
            "smbios1": f"uuid=6f1d0c2e-{vmid:04d}-4a7b-9c1d-{vmid:012d}",
            "onboot": 1 if running else 0,
        }
        if name.startswith(("db", "fileserver")):
            config["scsi1"] = f"local-lvm:vm-{vmid}-disk-1,iothread=1,size=200G"
        if i % 3 == 0:
            config["net1"] = f"virtio={mac_for(vmid, 1)},bridge=vmbr0"
        template = name.endswith("template")
        if template:
            config["template"] = 1
            config["scsi0"] = f"local-lvm:base-{vmid}-disk-0,size=16G"
        guest = Guest(
            vmid=vmid,
            kind="qemu",
            node=node,
            config=config,
            pool="production" if "prod" in tags else "lab" if "ci" in tags else None,
        )
        if running and not template:
            guest.status, guest.started = "running", now - 86400 * (1 + i % 9)
            guest.guest_ips = [
                ("eth0", f"10.{20 + (tag or 0) // 10}.0.{vmid - 90}", 24),
                ("eth0", f"fd00:{tag or 1}::{vmid:x}", 64),
            ]
            if "net1" in config:
                guest.guest_ips.append(("eth1", f"10.10.0.{vmid}", 24))
        state.guests[vmid] = guest
    for i, (name, cores, memory, ostype, tags, running) in enumerate(DEMO_CTS):
        vmid = 200 + i
        node = nodes[i % 3]
        tag = (20, None, 30)[i % 3]
        config = {
            "hostname": name,
            "cores": cores,
            "memory": memory,
            "swap": 512,
            "ostype": ostype,
            "arch": "amd64",
            "tags": tags,
            "unprivileged": 1,
            "features": "nesting=1",
            "rootfs": f"local-lvm:vm-{vmid}-disk-0,size=8G",
            "net0": f"name=eth0,bridge=vmbr1,hwaddr={mac_for(vmid, 0)},ip=10.{20 + (tag or 0) // 10}.1.{i + 10}/24,"
            f"gw=10.{20 + (tag or 0) // 10}.1.1,type=veth" + (f",tag={tag}" if tag else ""),
            "onboot": 1 if running else 0,
        }
        if i % 4 == 0:
            config["mp0"] = f"ceph-vm:vm-{vmid}-disk-1,mp=/srv/data,size=50G"
        guest = Guest(
            vmid=vmid, kind="lxc", node=node, config=config, pool="production" if "prod" in tags else None
        )
        if running:
            guest.status, guest.started = "running", now - 3600 * (5 + i)
        state.guests[vmid] = guest
    _demo_extras(state, nodes, user)
    return state


def _demo_extras(state: ClusterState, nodes: list[str], user: str) -> None:
    # snapshots
    for vmid, names in (
        (100, ["before-upgrade", "after-upgrade"]),
        (103, ["pre-migration"]),
        (200, ["clean-install"]),
    ):
        guest = state.guests[vmid]
        parent = None
        for n, snap in enumerate(names):
            guest.snapshots[snap] = Snapshot(
                name=snap,
                description=f"{snap.replace('-', ' ')}",
                snaptime=EPOCH - DAY * (10 - n),
                parent=parent,
                config=dict(guest.config),
            )
            parent = snap
        guest.parent_snapshot = parent
    # backups: nightly archives of a few guests on NFS (shared) and one local
    for day in range(3):
        stamp = time.strftime("%Y_%m_%d-%H_%M_%S", time.gmtime(EPOCH - DAY * day + 3600))
        for vmid in (100, 101, 103, 104, 200, 201):
            guest = state.guests[vmid]
            ext = "vma.zst" if guest.kind == "qemu" else "tar.zst"
            volid = f"nfs-backup:backup/vzdump-{guest.kind}-{vmid}-{stamp}.{ext}"
            state.volumes[volid] = Volume(
                volid=volid,
                storage="nfs-backup",
                node=None,
                content="backup",
                format=ext,
                size=(2 + vmid % 7) * 1024**3,
                ctime=EPOCH - DAY * day + 3600,
                vmid=vmid,
                notes=f"{guest.name} nightly",
                protected=int(day == 2 and vmid == 103),
                verification={"state": "ok", "upid": "UPID:pve1:00001234:00005678:6955C000:verify::root@pam:"}
                if day == 0
                else None,
            )
    volid = "local:backup/vzdump-qemu-105-2026_01_01-00_00_00.vma.zst"
    state.volumes[volid] = Volume(
        volid=volid,
        storage="local",
        node=state.guests[105].node,
        content="backup",
        format="vma.zst",
        size=3 * 1024**3,
        ctime=EPOCH,
        vmid=105,
        notes="cache-01 manual",
    )
    for node in nodes:
        iso = "local:iso/debian-13.1.0-amd64-netinst.iso"
        state.volumes[f"{iso}@{node}"] = Volume(
            volid=iso,
            storage="local",
            node=node,
            content="iso",
            format="iso",
            size=754 * 1024**2,
            ctime=EPOCH - 30 * DAY,
        )
    tmpl = "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst"
    state.volumes[tmpl] = Volume(
        volid=tmpl,
        storage="local",
        node=nodes[0],
        content="vztmpl",
        format="tzst",
        size=130 * 1024**2,
        ctime=EPOCH - 30 * DAY,
    )
    state.backup_jobs = {
        "backup-nightly": {
            "id": "backup-nightly",
            "type": "vzdump",
            "schedule": "21:00",
            "enabled": 1,
            "storage": "nfs-backup",
            "vmid": "100,101,103,104,200,201",
            "mode": "snapshot",
            "compress": "zstd",
            "prune-backups": "keep-last=3,keep-daily=7",
            "notes-template": "{{guestname}} nightly",
            "comment": "nightly production backups",
            "fleecing": "enabled=0",
            "repeat-missed": 1,
            "bwlimit": 0,
            "zstd": 2,
            "pbs-change-detection-mode": "metadata",
            "mailnotification": "failure",
        },
        "backup-weekly-all": {
            "id": "backup-weekly-all",
            "type": "vzdump",
            "schedule": "sat 02:00",
            "enabled": 1,
            "storage": "nfs-backup",
            "all": 1,
            "node": nodes[0],
            "mode": "stop",
            "compress": "zstd",
            "prune-backups": "keep-weekly=4",
            "comment": "weekly full",
            "repeat-missed": 0,
        },
    }
    state.replication_jobs = {
        "103-0": {
            "id": "103-0",
            "type": "local",
            "target": nodes[1],
            "guest": 103,
            "jobnum": 0,
            "source": nodes[0],
            "schedule": "*/15",
            "rate": 50,
            "comment": "db-01 to standby",
        },
        "200-0": {
            "id": "200-0",
            "type": "local",
            "target": nodes[2],
            "guest": 200,
            "jobnum": 0,
            "source": nodes[0],
            "schedule": "*/30",
        },
    }
    # pvesr history: 103-0 synced at the last two quarter hours; 200-0 failed twice, the target unreachable
    now = time.time()
    quarter = int(now) - int(now) % 900
    run_replication(state, "103-0", quarter - 900)
    run_replication(state, "103-0", quarter)
    run_replication(state, "200-0", now - 360, unreachable_target=True)
    run_replication(state, "200-0", now - 60, unreachable_target=True)
    state.users["auditor@pve"] = User(
        userid="auditor@pve",
        password=None,
        firstname="Audit",
        lastname="Only",
        email="auditor@example.com",
        groups=["auditors"],
    )
    state.groups["auditors"] = {"comment": "read-only"}
    state.acls.append(Acl("/", "auditors", "group", "PVEAuditor"))
    # a short task history per node
    kinds = [("vzdump", ""), ("qmstart", "100"), ("vzstart", "200"), ("qmsnapshot", "103"), ("aptupdate", "")]
    for n, node in enumerate(nodes):
        for k, (kind, ident) in enumerate(kinds):
            state.add_task(
                node,
                kind,
                ident,
                "root@pam",
                starttime=EPOCH - DAY + 600 * (n * 5 + k),
                duration=5 + k,
                exitstatus="OK" if k != 4 or n != 2 else "command 'apt-get update' failed: exit code 100",
            )
    _demo_firewall_and_options(state)
    state.revision = 0


def _demo_firewall_and_options(state: ClusterState) -> None:
    """Cluster firewall (options, two groups, rules, aliases, one ipset) and datacenter options."""

    def keyed(key: str, items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {str(i[key]): {**i, "digest": digest(i)} for i in items}

    def rules(*items: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return keyed("pos", [{"pos": pos, "enable": 1, **item} for pos, item in enumerate(items)])

    fw = "/cluster/firewall"
    state.generic[f"{fw}/options"] = {
        ".": {"enable": 1, "policy_in": "DROP", "policy_out": "ACCEPT", "ebtables": 1}
    }
    state.generic[f"{fw}/groups"] = keyed(
        "group",
        [{"group": "web", "comment": "HTTP(S) frontends"}, {"group": "mgmt", "comment": "management"}],
    )
    state.generic[f"{fw}/groups/web"] = rules(
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "443", "comment": "https"},
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "80", "comment": "http"},
    )
    state.generic[f"{fw}/groups/mgmt"] = rules(
        {"type": "in", "action": "ACCEPT", "source": "+mgmt-nets", "proto": "tcp", "dport": "22"},
    )
    state.generic[f"{fw}/rules"] = rules(
        {"type": "group", "action": "mgmt", "comment": "management access"},
        {"type": "in", "action": "ACCEPT", "macro": "Ping"},
        {"type": "in", "action": "ACCEPT", "source": "monitoring", "proto": "tcp", "dport": "9100"},
    )
    state.generic[f"{fw}/aliases"] = keyed(
        "name",
        [
            {"name": "gateway", "cidr": "10.10.0.1", "comment": "vmbr0 gateway"},
            {"name": "monitoring", "cidr": "10.10.0.50", "comment": "prometheus"},
        ],
    )
    state.generic[f"{fw}/ipset"] = keyed("name", [{"name": "mgmt-nets", "comment": "admin networks"}])
    state.generic[f"{fw}/ipset/mgmt-nets"] = keyed(
        "cidr",
        [{"cidr": "10.10.0.0/24", "nomatch": 0}, {"cidr": "192.168.100.0/24", "comment": "vpn"}],
    )
    state.generic["/cluster/options"] = {
        ".": {
            "keyboard": "en-us",
            "console": "html5",
            "email_from": "pve@hvsync-demo.example",
            "mac_prefix": "BC:24:11",
            "migration": "type=secure,network=10.10.0.0/24",
            "ha": "shutdown_policy=conditional",
        }
    }


def large(
    vms: int, user: str, password: str, token_id: str, token_secret: str, nodes: int = 3
) -> ClusterState:
    """N guests (80% QEMU, 20% LXC) spread round-robin over the nodes; 2 NICs, 2 disks, 1 IP each."""
    state = ClusterState(cluster_name=f"hvsync-large-{vms}")
    _base(state, max(1, nodes), user, password, token_id, token_secret)
    names = list(state.nodes)
    base_ip = int(ipaddress.IPv4Address("10.128.0.0"))
    now = time.time()
    for i in range(vms):
        vmid = 1000 + i
        node = names[i % len(names)]
        tag = 100 + i % 8
        ip = str(ipaddress.IPv4Address(base_ip + 10 + i))
        if i % 5 != 4:
            config: dict[str, Any] = {
                "name": f"vm-{i:05d}",
                "cores": 2,
                "sockets": 1,
                "memory": "2048",
                "ostype": "l26",
                "agent": "1",
                "scsihw": "virtio-scsi-single",
                "tags": f"bench;group{i % 10}",
                "boot": "order=scsi0;net0",
                "scsi0": f"local-lvm:vm-{vmid}-disk-0,size=32G",
                "scsi1": f"ceph-vm:vm-{vmid}-disk-1,size=100G",
                "net0": f"virtio={mac_for(vmid, 0)},bridge=vmbr0",
                "net1": f"virtio={mac_for(vmid, 1)},bridge=vmbr1" + (f",tag={tag}" if i % 2 == 0 else ""),
            }
            guest = Guest(
                vmid=vmid,
                kind="qemu",
                node=node,
                config=config,
                status="running",
                started=now,
                guest_ips=[("eth0", ip, 16)],
            )
        else:
            config = {
                "hostname": f"ct-{i:05d}",
                "cores": 1,
                "memory": 1024,
                "swap": 512,
                "ostype": "debian",
                "arch": "amd64",
                "tags": f"bench;group{i % 10}",
                "rootfs": f"local-lvm:vm-{vmid}-disk-0,size=8G",
                "mp0": f"ceph-vm:vm-{vmid}-disk-1,mp=/data,size=20G",
                "net0": f"name=eth0,bridge=vmbr0,hwaddr={mac_for(vmid, 0)},ip={ip}/16,type=veth",
                "net1": f"name=eth1,bridge=vmbr1,hwaddr={mac_for(vmid, 1)},ip=manual,type=veth"
                + (f",tag={tag}" if i % 2 == 0 else ""),
            }
            guest = Guest(vmid=vmid, kind="lxc", node=node, config=config, status="running", started=now)
        state.guests[vmid] = guest
    state.revision = 0
    return state


def build(
    scenario: str,
    *,
    vms: int | None,
    nodes: int | None,
    user: str,
    password: str,
    token_id: str,
    token_secret: str,
) -> ClusterState:
    if scenario == "demo":
        return demo(user, password, token_id, token_secret)
    if scenario == "large":
        return large(vms if vms is not None else 1000, user, password, token_id, token_secret, nodes or 3)
    if scenario == "empty":
        state = ClusterState(cluster_name="hvsync-empty")
        _base(state, nodes or 1, user, password, token_id, token_secret)
        return state
    raise ValueError(f"unknown scenario {scenario!r}; choose demo, large or empty")
