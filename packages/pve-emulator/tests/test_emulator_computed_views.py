"""Views Proxmox derives from other state, each compared with what it derives from.

Backup coverage (not-backed-up, included volumes), cluster resources, storage usage, task lists and
task logs: every test builds state through the API (or the model), computes the expected view in the
test from the definitions it read back, and compares.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.testing import EmulatorHandle, running_emulator

GiB = 1024**3


@pytest.fixture(scope="module")
def pve() -> Iterator[EmulatorHandle]:
    """A private demo emulator (conftest's `api` talks to it): these tests add jobs, disks, tasks, HA."""
    with running_emulator(task_duration=0.01) as handle:
        yield handle


def _body(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    return resp.json()


def _data(resp: httpx.Response) -> Any:
    return _body(resp)["data"]


def _wait(api: httpx.Client, upid: str) -> None:
    node = upid.split(":")[1]
    for _ in range(200):
        if _data(api.get(f"/nodes/{node}/tasks/{upid}/status"))["status"] == "stopped":
            return
        time.sleep(0.01)
    raise AssertionError(f"task {upid} did not end")


# --- backup coverage -----------------------------------------------------------------------------


def _vmids(text: Any) -> list[int]:
    return [int(v) for v in re.split(r"[,;\s]+", str(text or "")) if v]


def expected_job_guests(job: dict[str, Any], guests: list[dict[str, Any]]) -> set[int]:
    """get_included_guests, written out again: pool, else vmid list, else all minus exclude; then the
    node restriction for guests that exist (a listed vmid without a guest stays listed)."""
    where = {g["vmid"]: g["node"] for g in guests}
    if job.get("pool"):
        chosen = [g["vmid"] for g in guests if g.get("pool") == job["pool"]]
    elif job.get("vmid"):
        chosen = _vmids(job["vmid"])
    elif job.get("all"):
        chosen = [v for v in where if v not in _vmids(job.get("exclude"))]
    else:
        chosen = []
    return {v for v in chosen if v not in where or not job.get("node") or where[v] == job["node"]}


def _guests(api: httpx.Client) -> list[dict[str, Any]]:
    return _data(api.get("/cluster/resources", params={"type": "vm"}))


def test_not_backed_up_is_every_guest_no_job_includes(pve: EmulatorHandle, api: httpx.Client) -> None:
    """Disabled jobs still count, templates are guests like others, ``exclude`` only narrows ``all``, and
    a ``node`` restriction narrows every kind of selection."""
    assert api.post("/pools", data={"poolid": "bk-pool"}).status_code == 200
    assert api.put("/pools/bk-pool", data={"vms": "106,207"}).status_code == 200
    jobs = {
        "cov-disabled": {"vmid": "102,105", "enabled": 0},
        "cov-pool-node": {"pool": "bk-pool", "node": "pve2"},
        "cov-all-excl": {"all": 1, "node": "pve3", "exclude": "102,105,206"},
        "cov-vmid-node": {"vmid": "107,108,999", "node": "pve1", "exclude": "107"},
    }
    for job_id, params in jobs.items():
        assert (
            api.post("/cluster/backup", data={"id": job_id, "schedule": "03:00", **params}).status_code == 200
        )
    try:
        guests = _guests(api)
        defined = _data(api.get("/cluster/backup"))
        covered = set().union(*(expected_job_guests(j, guests) for j in defined))
        missing = _data(api.get("/cluster/backup-info/not-backed-up"))
        assert sorted(m["vmid"] for m in missing) == sorted(
            g["vmid"] for g in guests if g["vmid"] not in covered
        )
        by_id = {g["vmid"]: g for g in guests}
        assert all(
            m["type"] == by_id[m["vmid"]]["type"] and m["name"] == by_id[m["vmid"]]["name"] for m in missing
        )
        # 102 and 105 (pve3) are covered by the disabled job alone: the pve3 'all' job excludes them
        assert {102, 105}.isdisjoint(m["vmid"] for m in missing)
        # with no jobs every guest is uncovered; a job naming just the template covers it like any guest
        demo_jobs = dict(pve.state.backup_jobs)
        for job_id in demo_jobs:
            assert api.delete(f"/cluster/backup/{job_id}").status_code == 200
        assert [m["vmid"] for m in _data(api.get("/cluster/backup-info/not-backed-up"))] == sorted(by_id)
        template = next(g["vmid"] for g in guests if g.get("template"))
        only = {"id": "cov-template", "schedule": "03:00", "vmid": str(template)}
        assert api.post("/cluster/backup", data=only).status_code == 200
        missing = _data(api.get("/cluster/backup-info/not-backed-up"))
        assert [m["vmid"] for m in missing] == sorted(set(by_id) - {template})
        assert api.delete("/cluster/backup/cov-template").status_code == 200
        pve.state.backup_jobs.update(demo_jobs)
    finally:
        for job_id in jobs:
            api.delete(f"/cluster/backup/{job_id}")


def test_a_pool_wins_over_a_vmid_list_and_all(api: httpx.Client) -> None:
    assert api.post("/pools", data={"poolid": "bk-only"}).status_code == 200
    assert api.put("/pools/bk-only", data={"vms": "104"}).status_code == 200
    data = {"id": "cov-precedence", "schedule": "03:00", "pool": "bk-only", "vmid": "100,101", "all": 1}
    assert api.post("/cluster/backup", data=data).status_code == 200
    try:
        tree = _data(api.get("/cluster/backup/cov-precedence/included_volumes"))
        assert [g["id"] for g in tree["children"]] == [104]
        vmid_job = {"id": "cov-list", "schedule": "03:00", "vmid": "100,101", "all": 1, "exclude": "100"}
        assert api.post("/cluster/backup", data=vmid_job).status_code == 200
        tree = _data(api.get("/cluster/backup/cov-list/included_volumes"))
        assert [g["id"] for g in tree["children"]] == [100, 101]  # exclude applies to 'all' only
    finally:
        api.delete("/cluster/backup/cov-precedence")
        api.delete("/cluster/backup/cov-list")


def _expected_volumes(kind: str, config: dict[str, Any]) -> list[tuple[str, str, int, str]]:
    """(key, volume, included, reason) as qemu-server / pve-container's get_backup_volumes decide."""
    out = []
    if kind == "qemu":
        order = [f"ide{i}" for i in range(4)] + [f"scsi{i}" for i in range(31)]
        order += (
            [f"virtio{i}" for i in range(16)] + [f"sata{i}" for i in range(6)] + ["efidisk0", "tpmstate0"]
        )
        for key in (k for k in order if k in config):
            parts = str(config[key]).split(",")
            opts = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            if opts.get("media") == "cdrom":
                continue
            included = int(opts.get("backup", "1") not in ("0", "no", "off", "false"))
            reason = "backup=no" if "backup" in opts else "backup=yes"
            if key == "efidisk0" and config.get("bios") != "ovmf":
                included, reason = 0, "efidisk but no OVMF BIOS"
            out.append((key, parts[0], included, reason))
        return out
    for key in ["rootfs"] + [f"mp{i}" for i in range(256)]:
        if key not in config:
            continue
        parts = str(config[key]).split(",")
        opts = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if key == "rootfs":
            out.append((key, parts[0], 1, "rootfs"))
        elif parts[0].startswith("/"):
            out.append((key, parts[0], 0, "not a volume"))
        elif opts.get("backup") == "1":
            out.append((key, parts[0], 1, "enabled"))
        else:
            out.append((key, parts[0], 0, "disabled"))
    return out


def test_included_volumes_follow_each_disks_backup_flag(api: httpx.Client) -> None:
    """backup=0 disks, an EFI disk without OVMF, CD-ROMs, the TPM state, and on a container the root
    file system, mount points with and without backup=1 and a bind mount."""
    vm = {
        "vmid": 830,
        "scsi0": "local-lvm:4",
        "scsi1": "local-lvm:2,backup=0",
        "virtio0": "local-lvm:1",
        "efidisk0": "local-lvm:1,efitype=4m",
        "tpmstate0": "local-lvm:1,version=v2.0",
        "ide2": "none,media=cdrom",
        "name": "vol-vm",
    }
    _wait(api, _data(api.post("/nodes/pve1/qemu", data=vm)))
    ct = {
        "vmid": 831,
        "ostemplate": "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst",
        "hostname": "vol-ct",
        "rootfs": "local-lvm:2",
        "mp0": "local-lvm:1,mp=/srv/a",
        "mp1": "local-lvm:1,mp=/srv/b,backup=1",
        "mp2": "/mnt/host,mp=/srv/c",
    }
    _wait(api, _data(api.post("/nodes/pve1/lxc", data=ct)))
    job = {"id": "cov-volumes", "schedule": "03:00", "vmid": "831,830,998"}
    assert api.post("/cluster/backup", data=job).status_code == 200
    try:
        for bios in ("seabios", "ovmf"):
            assert api.put("/nodes/pve1/qemu/830/config", data={"bios": bios}).status_code == 200
            tree = _data(api.get("/cluster/backup/cov-volumes/included_volumes"))["children"]
            assert [g["id"] for g in tree] == [830, 831, 998]
            assert tree[2] == {"id": 998, "type": "unknown", "leaf": 1}  # listed, but no such guest
            for entry, kind in ((tree[0], "qemu"), (tree[1], "lxc")):
                config = _data(api.get(f"/nodes/pve1/{kind}/{entry['id']}/config"))
                expected = _expected_volumes(kind, config)
                assert entry["type"] == kind and entry["leaf"] == 0
                assert entry["name"] == config.get("name", config.get("hostname"))
                got = [(c["id"], c["name"], c["included"], c["reason"]) for c in entry["children"]]
                assert got == [(f"{entry['id']}:{k}", v, i, r) for k, v, i, r in expected]
            efi = next(c for c in tree[0]["children"] if c["id"] == "830:efidisk0")
            assert efi["included"] == (bios == "ovmf")
        assert "830:ide2" not in {c["id"] for c in tree[0]["children"]}
        assert {c["id"]: c["included"] for c in tree[0]["children"]}["830:scsi1"] == 0
        assert {c["id"]: c["reason"] for c in tree[1]["children"]}["831:mp2"] == "not a volume"
    finally:
        api.delete("/cluster/backup/cov-volumes")


def test_backup_job_next_run_is_the_schedules_next_time(api: httpx.Client) -> None:
    job = {"id": "cov-next", "schedule": "sat 02:30", "vmid": "100"}
    assert api.post("/cluster/backup", data=job).status_code == 200
    try:
        now = dt.datetime.now(dt.UTC)
        view = _data(api.get("/cluster/backup/cov-next"))
        days = (5 - now.weekday()) % 7
        at = (now + dt.timedelta(days=days)).replace(hour=2, minute=30, second=0, microsecond=0)
        if at <= now:
            at += dt.timedelta(days=7)
        assert view["next-run"] == int(at.timestamp())
        assert api.put("/cluster/backup/cov-next", data={"enabled": 0}).status_code == 200
        assert "next-run" not in _data(api.get("/cluster/backup/cov-next"))
    finally:
        api.delete("/cluster/backup/cov-next")


# --- cluster resources ---------------------------------------------------------------------------


def test_cluster_resource_guests_are_the_guests_state(pve: EmulatorHandle, api: httpx.Client) -> None:
    """Per guest: node, status, template, pool, tags, lock and HA state are the model's; pools sum their
    running members; the order is pools, guests, nodes, storages."""
    assert api.post("/cluster/ha/resources", data={"sid": "vm:100", "state": "stopped"}).status_code == 200
    assert api.post("/cluster/ha/resources", data={"sid": "ct:200"}).status_code == 200
    pve.state.guests[101].lock = "backup"
    try:
        resources = _data(api.get("/cluster/resources"))
        kinds = [r["type"] for r in resources]
        order = {"pool": 0, "qemu": 1, "lxc": 1, "node": 2, "storage": 3, "sdn": 4}
        assert [order[k] for k in kinds] == sorted(order[k] for k in kinds)
        guests = [r for r in resources if r["type"] in ("qemu", "lxc")]
        assert [g["vmid"] for g in guests] == sorted((g.vmid for g in pve.state.guests.values()), key=str)
        for entry in guests:
            guest = pve.state.guests[entry["vmid"]]
            assert entry["id"] == f"{guest.kind}/{guest.vmid}" and entry["node"] == guest.node
            assert entry["status"] == guest.status and entry["template"] == int(guest.is_template)
            assert entry.get("pool") == guest.pool and entry.get("tags") == guest.config.get("tags")
            assert entry.get("lock") == guest.lock
            current = _data(api.get(f"/nodes/{guest.node}/{guest.kind}/{guest.vmid}/status/current"))
            assert {k: entry[k] for k in ("maxdisk", "disk", "maxmem", "maxcpu")} == {
                k: current[k] for k in ("maxdisk", "disk", "maxmem", "maxcpu")
            }
        ha = {g["vmid"]: g.get("hastate") for g in guests if g.get("hastate")}
        assert ha == {100: "stopped", 200: "started"}
        assert {g["vmid"]: g["lock"] for g in guests if "lock" in g} == {101: "backup"}
        for pool in (r for r in resources if r["type"] == "pool"):
            assert pool["id"] == f"/pool/{pool['pool']}"
            members = [g for g in guests if g.get("pool") == pool["pool"] and g["uptime"]]
            assert pool.get("mem", 0) == sum(g["mem"] for g in members)
            assert pool.get("maxcpu", 0) == sum(g["maxcpu"] for g in members)
            assert pool.get("uptime", 0) == max((g["uptime"] for g in members), default=0)
    finally:
        pve.state.guests[101].lock = None
        api.delete("/cluster/ha/resources/vm:100")
        api.delete("/cluster/ha/resources/ct:200")


def test_cluster_resource_nodes_and_storages(pve: EmulatorHandle, api: httpx.Client) -> None:
    """A storage appears once per node it is enabled on, with its status view's numbers; an offline node
    keeps its capacities but loses its live numbers."""
    restricted = {"storage": "only-pve2", "type": "dir", "path": "/x", "nodes": "pve2"}
    disabled = {"storage": "switched-off", "type": "dir", "path": "/y", "disable": 1}
    for data in (restricted, disabled):
        assert api.post("/storage", data=data).status_code == 200
    pve.state.set_node_online("pve3", False)
    try:
        resources = _data(api.get("/cluster/resources"))
        storages = [r for r in resources if r["type"] == "storage"]
        where = {(r["storage"], r["node"]) for r in storages}
        assert {n for s, n in where if s == "only-pve2"} == {"pve2"}
        assert not {n for s, n in where if s == "switched-off"}
        for node in ("pve1", "pve2"):
            listed = _data(api.get(f"/nodes/{node}/storage"))
            by_name = {s["storage"]: s for s in listed}
            assert by_name["switched-off"]["enabled"] == 0 and by_name["switched-off"]["active"] == 0
            assert by_name["only-pve2"]["enabled"] == int(node == "pve2")
            enabled = {s["storage"] for s in listed if s["enabled"]}
            assert enabled == {s for s, n in where if n == node}
            for entry in (r for r in storages if r["node"] == node):
                status = _data(api.get(f"/nodes/{node}/storage/{entry['storage']}/status"))
                assert (entry["disk"], entry["maxdisk"]) == (status["used"], status["total"])
                assert entry["content"] == ",".join(sorted(status["content"].split(",")))
        nodes = {r["node"]: r for r in resources if r["type"] == "node"}
        assert (
            nodes["pve3"]["status"] == "offline"
            and "mem" not in nodes["pve3"]
            and "uptime" not in nodes["pve3"]
        )
        assert nodes["pve3"]["maxmem"] == pve.state.nodes["pve3"].maxmem
        assert nodes["pve1"]["status"] == "online" and nodes["pve1"]["uptime"] >= 0 and "mem" in nodes["pve1"]
    finally:
        pve.state.set_node_online("pve3", True)
        api.delete("/storage/only-pve2")
        api.delete("/storage/switched-off")


# --- storage usage -------------------------------------------------------------------------------


def _usage(api: httpx.Client, node: str, storage: str) -> tuple[int, list[dict[str, Any]]]:
    status = _data(api.get(f"/nodes/{node}/storage/{storage}/status"))
    content = _data(api.get(f"/nodes/{node}/storage/{storage}/content"))
    # the derived rule: used is what the content takes (a guest disk its `used`, anything else its size)
    assert status["used"] == sum(c.get("used", c["size"]) for c in content)
    assert status["avail"] == status["total"] - status["used"]
    return status["used"], content


def _sizes(content: list[dict[str, Any]], vmid: int) -> dict[str, int]:
    return {c["volid"]: c["size"] for c in content if c.get("vmid") == vmid}


def test_storage_usage_follows_disk_changes(api: httpx.Client) -> None:
    """Adding, growing, detaching (unused disks stay), deleting disks, a full clone and a backup."""
    upid = _data(api.post("/nodes/pve2/qemu", data={"vmid": 840, "scsi0": "local-lvm:8", "name": "usage"}))
    _wait(api, upid)
    used0, content = _usage(api, "pve2", "local-lvm")
    assert _sizes(content, 840) == {"local-lvm:vm-840-disk-0": 8 * GiB}
    assert api.put("/nodes/pve2/qemu/840/config", data={"scsi1": "local-lvm:6"}).status_code == 200
    used1, content = _usage(api, "pve2", "local-lvm")
    assert _sizes(content, 840)["local-lvm:vm-840-disk-1"] == 6 * GiB and used1 == used0 + 6 * GiB // 3
    _wait(api, _data(api.put("/nodes/pve2/qemu/840/resize", data={"disk": "scsi1", "size": "+3G"})))
    used2, content = _usage(api, "pve2", "local-lvm")
    assert _sizes(content, 840)["local-lvm:vm-840-disk-1"] == 9 * GiB and used2 == used0 + 9 * GiB // 3
    assert api.put("/nodes/pve2/qemu/840/config", data={"delete": "scsi1"}).status_code == 200
    config = _data(api.get("/nodes/pve2/qemu/840/config"))
    assert config["unused0"] == "local-lvm:vm-840-disk-1"
    used3, content = _usage(api, "pve2", "local-lvm")
    assert (
        used3 == used2 and _sizes(content, 840)["local-lvm:vm-840-disk-1"] == 9 * GiB
    )  # still on the storage
    # the other nodes' local-lvm does not hold this guest's disks
    assert not _sizes(_usage(api, "pve1", "local-lvm")[1], 840)
    # a full clone to another storage adds its copies there
    ceph_before, _ = _usage(api, "pve2", "ceph-vm")
    clone = {"newid": 841, "full": 1, "storage": "ceph-vm", "name": "usage-copy"}
    _wait(api, _data(api.post("/nodes/pve2/qemu/840/clone", data=clone)))
    ceph_after, ceph_content = _usage(api, "pve2", "ceph-vm")
    assert _sizes(ceph_content, 841) == {"ceph-vm:vm-841-disk-0": 8 * GiB}
    assert ceph_after == ceph_before + 8 * GiB // 3
    assert _usage(api, "pve3", "ceph-vm")[0] == ceph_after  # shared: every node sees the same usage
    # a backup lands on the backup storage at its size
    nfs_before, _ = _usage(api, "pve2", "nfs-backup")
    _wait(api, _data(api.post("/nodes/pve2/vzdump", data={"vmid": "840", "storage": "nfs-backup"})))
    nfs_after, nfs_content = _usage(api, "pve2", "nfs-backup")
    backups = [c for c in nfs_content if c.get("vmid") == 840 and c["content"] == "backup"]
    assert len(backups) == 1 and nfs_after == nfs_before + backups[0]["size"]
    # removing the unused disk frees its space; destroying the guest frees the rest
    assert api.put("/nodes/pve2/qemu/840/config", data={"delete": "unused0"}).status_code == 200
    assert _usage(api, "pve2", "local-lvm")[0] == used0
    _wait(api, _data(api.delete("/nodes/pve2/qemu/841")))
    assert _usage(api, "pve2", "ceph-vm")[0] == ceph_before


def test_storage_usage_counts_thick_storage_in_full(api: httpx.Client) -> None:
    data = {"storage": "thick", "type": "lvm", "vgname": "vg0", "content": "images,rootdir"}
    assert api.post("/storage", data=data).status_code == 200
    try:
        before, _ = _usage(api, "pve1", "thick")
        _wait(api, _data(api.post("/nodes/pve1/qemu", data={"vmid": 842, "scsi0": "thick:5"})))
        after, content = _usage(api, "pve1", "thick")
        assert after == before + 5 * GiB and _sizes(content, 842) == {"thick:vm-842-disk-0": 5 * GiB}
        resources = _data(api.get("/cluster/resources", params={"type": "storage"}))
        assert next(r["disk"] for r in resources if r["id"] == "storage/pve1/thick") == after
    finally:
        api.delete("/nodes/pve1/qemu/842")
        api.delete("/storage/thick")


# --- tasks ---------------------------------------------------------------------------------------


def _seed_tasks(pve: EmulatorHandle, node: str) -> None:
    """Twelve ended tasks of mixed outcome and owner, two running ones, on a node nothing else uses."""
    state = pve.state
    base = time.time() - 5000
    outcomes = ["OK", "WARNINGS: 2", "command failed", "OK", "unexpected status", "OK"]
    for i in range(12):
        user = "root@pam!hvsync" if i % 4 == 0 else "alice@pve" if i % 3 == 0 else "root@pam"
        state.add_task(
            node,
            "qmstart" if i % 2 else "vzdump",
            str(300 + i % 3),
            user,
            starttime=base + 100 * i,
            duration=1000 - 60 * i,  # later starts end sooner: the index order is by end, not start
            exitstatus=outcomes[i % len(outcomes)],
        )
    for i in range(2):
        state.add_task(node, "qmigrate", "301", "root@pam", starttime=time.time() - 10 + i, duration=3600)


@pytest.fixture(scope="module")
def task_node(pve: EmulatorHandle) -> str:
    node = "pve3"
    for upid in [u for u, t in pve.state.tasks.items() if t.node == node]:
        del pve.state.tasks[upid]
    _seed_tasks(pve, node)
    return node


def _expected_tasks(pve: EmulatorHandle, node: str, source: str = "archive") -> list[str]:
    now = time.time()
    tasks = [t for t in pve.state.tasks.values() if t.node == node]
    running = sorted((t for t in tasks if now < t.starttime + t.duration), key=lambda t: t.starttime)
    ended = sorted(
        (t for t in tasks if now >= t.starttime + t.duration), key=lambda t: t.endtime, reverse=True
    )
    chosen = (running if source != "archive" else []) + (ended if source != "active" else [])
    return [t.upid for t in chosen]


def test_task_list_pages_with_start_limit_and_total(
    pve: EmulatorHandle, api: httpx.Client, task_node: str
) -> None:
    expected = _expected_tasks(pve, task_node)
    body = _body(api.get(f"/nodes/{task_node}/tasks"))
    assert [t["upid"] for t in body["data"]] == expected and body["total"] == len(expected) == 12
    for start, limit in ((0, 5), (5, 5), (10, 5), (3, 1), (12, 4)):
        body = _body(api.get(f"/nodes/{task_node}/tasks", params={"start": start, "limit": limit}))
        assert [t["upid"] for t in body["data"]] == expected[start : start + limit]
        assert body["total"] == 12
    # limit=0: no tasks, only the count
    assert _body(api.get(f"/nodes/{task_node}/tasks", params={"limit": 0})) == {"data": [], "total": 12}


def test_task_list_sources_and_filters(pve: EmulatorHandle, api: httpx.Client, task_node: str) -> None:
    def listed(**params: Any) -> list[dict[str, Any]]:
        body = _body(api.get(f"/nodes/{task_node}/tasks", params={"limit": 500, **params}))
        assert body["total"] == len(body["data"])
        return body["data"]

    active = listed(source="active")
    assert [t["upid"] for t in active] == _expected_tasks(pve, task_node, "active")
    assert {t["status"] for t in active} == {"RUNNING"} and all("endtime" not in t for t in active)
    every = listed(source="all")
    assert [t["upid"] for t in every] == _expected_tasks(pve, task_node, "all")
    ended = [t for t in every if t["status"] != "RUNNING"]
    kinds = {"OK": "ok", "WARNINGS: 2": "warning", "unexpected status": "unknown"}
    for wanted in ("ok", "warning", "error", "unknown", "ok,warning"):
        got = listed(statusfilter=wanted)
        assert [t["upid"] for t in got] == [
            t["upid"] for t in ended if kinds.get(t["status"], "error") in wanted.split(",")
        ]
    # errors=1 drops only the OK ones: running tasks (status unknown) stay in with source=all
    assert [t["upid"] for t in listed(source="all", errors=1)] == [
        t["upid"] for t in every if t["status"] != "OK"
    ]
    assert {t["type"] for t in listed(typefilter="vzdump")} == {"vzdump"}
    assert [t["upid"] for t in listed(vmid=301)] == [t["upid"] for t in ended if t["id"] == "301"]
    # a token's task shows its user and token apart; userfilter matches the user, case-insensitively
    token_tasks = [t for t in ended if t.get("tokenid")]
    assert token_tasks and all(t["user"] == "root@pam" and t["tokenid"] == "hvsync" for t in token_tasks)
    assert [t["upid"] for t in listed(userfilter="ALICE")] == [
        t["upid"] for t in ended if t["user"] == "alice@pve"
    ]
    since = sorted(t["starttime"] for t in ended)[6]
    assert [t["upid"] for t in listed(since=since)] == [t["upid"] for t in ended if t["starttime"] >= since]
    assert [t["upid"] for t in listed(until=since)] == [t["upid"] for t in ended if t["starttime"] <= since]


def test_cluster_tasks_are_each_nodes_recent_list(
    pve: EmulatorHandle, api: httpx.Client, task_node: str
) -> None:
    """Per node (in node order): its running tasks, then the latest-started ended ones up to 25 in all."""
    for i in range(30):
        pve.state.add_task(
            "pve1", "qmstart", "100", "root@pam", starttime=time.time() - 20000 + i, duration=1
        )
    now = time.time()
    expected = []
    for node in pve.state.nodes:
        tasks = [t for t in pve.state.tasks.values() if t.node == node]
        running = sorted((t for t in tasks if now < t.starttime + t.duration), key=lambda t: t.starttime)
        ended = sorted(
            (t for t in tasks if now >= t.starttime + t.duration), key=lambda t: t.starttime, reverse=True
        )
        expected += [t.upid for t in running + ended[: max(0, 25 - len(running))]]
    listed = _data(api.get("/cluster/tasks"))
    assert [t["upid"] for t in listed] == expected
    assert sum(t["node"] == "pve1" for t in listed) == 25
    for entry in listed:
        assert "pstart" not in entry and (("pid" in entry) == ("status" not in entry))


def test_task_log_start_limit_and_total(pve: EmulatorHandle, api: httpx.Client) -> None:
    lines = [f"line {i}" for i in range(1, 121)]
    task = pve.state.add_task("pve2", "vzdump", "100", "root@pam", log=[*lines, "TASK OK"], duration=0)
    url = f"/nodes/pve2/tasks/{task.upid}/log"
    full = [*lines, "TASK OK"]
    body = _body(api.get(url))
    assert body["total"] == 121 and [(e["n"], e["t"]) for e in body["data"]] == list(enumerate(full, 1))[:50]
    body = _body(api.get(url, params={"start": 100, "limit": 10}))
    assert [e["n"] for e in body["data"]] == list(range(101, 111)) and body["total"] == 121
    # limit=0 reads to the end (dump_logfile's read_until_end)
    body = _body(api.get(url, params={"start": 110, "limit": 0}))
    assert [e["t"] for e in body["data"]] == full[110:] and body["total"] == 121
    assert _body(api.get(url, params={"start": 500}))["data"] == []
    empty = pve.state.add_task("pve2", "aptupdate", "", "root@pam", log=[], duration=0)
    assert _body(api.get(f"/nodes/pve2/tasks/{empty.upid}/log")) == {
        "data": [{"n": 1, "t": "no content"}],
        "total": 1,
    }


def test_stopping_a_task_makes_its_log_error_its_status(pve: EmulatorHandle, api: httpx.Client) -> None:
    task = pve.state.add_task("pve2", "qmigrate", "100", "root@pam", duration=3600)
    assert _data(api.get(f"/nodes/pve2/tasks/{task.upid}/status"))["status"] == "running"
    assert api.delete(f"/nodes/pve2/tasks/{task.upid}").status_code == 200
    status = _data(api.get(f"/nodes/pve2/tasks/{task.upid}/status"))
    log = [e["t"] for e in _data(api.get(f"/nodes/pve2/tasks/{task.upid}/log"))]
    assert status["status"] == "stopped" and "endtime" not in status
    assert log[-1] == f"TASK ERROR: {status['exitstatus']}"
    listed = _data(api.get("/nodes/pve2/tasks", params={"statusfilter": "error", "limit": 500}))
    assert task.upid in {t["upid"] for t in listed}
