"""Mock-mode behaviour beyond the VM lifecycle: clones, backups, jobs, networks, SDN, generic CRUD."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from pve_emulator.testing import EmulatorHandle, running_emulator


@pytest.fixture(scope="module")
def fresh() -> Iterator[EmulatorHandle]:
    """A private demo emulator: these tests change state the session fixture's users rely on."""
    with running_emulator(task_duration=0.01, response_cache=True) as pve:  # changes go through the API
        yield pve


@pytest.fixture
def api(fresh: EmulatorHandle) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"PVEAPIToken={fresh.token_id}={fresh.token_secret}"}
    with httpx.Client(base_url=fresh.api_url, headers=headers, timeout=10) as client:
        yield client


def _data(resp: httpx.Response):
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def test_template_and_clone(api: httpx.Client) -> None:
    # 103's disks are on local-lvm: a clone to another node must copy them to shared storage
    upid = _data(
        api.post(
            "/nodes/pve1/qemu/103/clone",
            data={"newid": 700, "name": "db-clone", "target": "pve3", "storage": "ceph-vm"},
        )
    )
    assert ":qmclone:103:" in upid
    time.sleep(0.05)
    config = _data(api.get("/nodes/pve3/qemu/700/config"))
    source = _data(api.get("/nodes/pve1/qemu/103/config"))
    assert config["name"] == "db-clone" and config["cores"] == source["cores"]
    assert config["scsi0"].startswith("ceph-vm:vm-700-disk-0,") and config["net0"] != source["net0"]
    assert config["scsi1"].startswith("ceph-vm:vm-700-disk-1,")
    assert config["net0"].endswith(source["net0"].split(",", 1)[1])
    assert _data(api.post("/nodes/pve3/qemu/700/template")).startswith("UPID:pve3:")
    config = _data(api.get("/nodes/pve3/qemu/700/config"))
    assert config["template"] == 1 and config["scsi0"].startswith("ceph-vm:base-700-disk-0")
    # Proxmox refuses to start a template inside the start task, not in the call
    upid = _data(api.post("/nodes/pve3/qemu/700/status/start"))
    time.sleep(0.05)
    status = _data(api.get(f"/nodes/pve3/tasks/{upid}/status"))
    assert status["exitstatus"] == "you can't start a vm if it's a template"
    assert api.post("/nodes/pve1/qemu/103/clone", data={"newid": 700}).json()["errors"]["newid"]


def test_vzdump_writes_backups_visible_in_storage(api: httpx.Client) -> None:
    before = _data(api.get("/nodes/pve2/storage/nfs-backup/content", params={"vmid": 101}))
    upid = _data(
        api.post("/nodes/pve2/vzdump", data={"vmid": "101", "storage": "nfs-backup", "mode": "snapshot"})
    )
    time.sleep(0.05)
    status = _data(api.get(f"/nodes/pve2/tasks/{upid}/status"))
    assert status["status"] == "stopped" and status["exitstatus"] == "OK"
    after = _data(api.get("/nodes/pve2/storage/nfs-backup/content", params={"vmid": 101}))
    new = [b for b in after if b not in before]
    assert len(new) == 1 and new[0]["volid"].startswith("nfs-backup:backup/vzdump-qemu-101-")
    assert new[0]["content"] == "backup" and new[0]["format"] == "vma.zst"
    # shared storage: the archive is visible from every node
    other = _data(api.get("/nodes/pve3/storage/nfs-backup/content", params={"vmid": 101}))
    assert new[0]["volid"] in [b["volid"] for b in other]
    volid = new[0]["volid"]
    assert (
        api.put(
            f"/nodes/pve2/storage/nfs-backup/content/{volid}", data={"protected": 1, "notes": "keep"}
        ).status_code
        == 200
    )
    assert api.delete(f"/nodes/pve2/storage/nfs-backup/content/{volid}").status_code == 400
    assert (
        api.put(f"/nodes/pve2/storage/nfs-backup/content/{volid}", data={"protected": 0}).status_code == 200
    )
    assert _data(api.delete(f"/nodes/pve2/storage/nfs-backup/content/{volid}")).startswith("UPID:")
    assert volid not in [b["volid"] for b in _data(api.get("/nodes/pve2/storage/nfs-backup/content"))]


def test_backup_and_replication_jobs(api: httpx.Client) -> None:
    assert (
        api.post(
            "/cluster/backup",
            data={
                "id": "job-x",
                "schedule": "03:30",
                "storage": "nfs-backup",
                "vmid": "100,101",
                "mode": "snapshot",
                "prune-backups": "keep-last=2",
            },
        ).status_code
        == 200
    )
    job = _data(api.get("/cluster/backup/job-x"))
    assert (
        job["schedule"] == "03:30" and job["next-run"] > time.time() and job["prune-backups"] == "keep-last=2"
    )
    assert api.put("/cluster/backup/job-x", data={"enabled": 0, "delete": "prune-backups"}).status_code == 200
    job = _data(api.get("/cluster/backup/job-x"))
    assert job["enabled"] == 0 and "prune-backups" not in job and "next-run" not in job
    resp = api.post("/cluster/backup", data={"schedule": "03:30", "storage": "nosuch", "all": 1})
    assert resp.status_code == 400 and "storage" in resp.json()["errors"]
    assert (
        api.post(
            "/cluster/replication",
            data={"id": "103-1", "type": "local", "target": "pve3", "schedule": "*/30"},
        ).status_code
        == 200
    )
    rep = _data(api.get("/cluster/replication/103-1"))
    assert rep["guest"] == 103 and rep["source"] == "pve1" and rep["jobnum"] == 1
    resp = api.post("/cluster/replication", data={"id": "103-2", "type": "local", "target": "pve1"})
    assert resp.status_code == 400 and "target" in resp.json()["errors"]
    resp = api.post("/cluster/replication", data={"id": "100-1", "type": "local", "target": "pve2"})
    assert resp.status_code == 400 and "No replicatable volumes" in resp.json()["errors"]["id"]
    assert api.delete("/cluster/replication/103-1").status_code == 200
    assert api.get("/cluster/replication/103-1").status_code == 404


def test_node_network_and_sdn(api: httpx.Client) -> None:
    assert (
        api.post(
            "/nodes/pve1/network",
            data={"iface": "vmbr9", "type": "bridge", "bridge_ports": "eno4", "cidr": "192.168.9.2/24"},
        ).status_code
        == 200
    )
    iface = _data(api.get("/nodes/pve1/network/vmbr9"))
    assert iface["address"] == "192.168.9.2" and iface["netmask"] == "24" and iface["bridge_ports"] == "eno4"
    bridges = _data(api.get("/nodes/pve1/network", params={"type": "bridge"}))
    assert {b["iface"] for b in bridges} == {"vmbr0", "vmbr1", "vmbr9"}
    resp = api.post("/nodes/pve1/network", data={"iface": "vmbr8", "type": "bridge", "bridge_ports": "eth77"})
    assert resp.status_code == 400 and "bridge_ports" in resp.json()["errors"]
    assert (
        api.post("/cluster/sdn/vnets", data={"vnet": "vnet300", "zone": "vlanzone", "tag": 300}).status_code
        == 200
    )
    assert (
        api.post(
            "/cluster/sdn/vnets/vnet300/subnets",
            data={"subnet": "10.30.0.0/24", "type": "subnet", "gateway": "10.30.0.1"},
        ).status_code
        == 200
    )
    subnets = _data(api.get("/cluster/sdn/vnets/vnet300/subnets"))
    assert [(s["subnet"], s["cidr"], s["gateway"]) for s in subnets] == [
        ("vlanzone-10.30.0.0-24", "10.30.0.0/24", "10.30.0.1")
    ]
    resp = api.post(
        "/cluster/sdn/vnets/vnet300/subnets",
        data={"subnet": "10.31.0.0/24", "type": "subnet", "gateway": "10.99.0.1"},
    )
    assert resp.status_code == 400 and "gateway" in resp.json()["errors"]
    assert api.delete("/cluster/sdn/vnets/vnet300").status_code == 400  # still has a subnet
    assert api.delete("/cluster/sdn/vnets/vnet300/subnets/vlanzone-10.30.0.0-24").status_code == 200
    assert api.delete("/cluster/sdn/vnets/vnet300").status_code == 200


def test_generic_crud_for_unmodelled_collections(api: httpx.Client) -> None:
    assert (
        api.post(
            "/cluster/ha/resources", data={"sid": "vm:100", "state": "started", "comment": "web"}
        ).status_code
        == 200
    )
    listed = _data(api.get("/cluster/ha/resources"))
    assert [r["sid"] for r in listed] == ["vm:100"] and listed[0]["comment"] == "web"
    assert api.put("/cluster/ha/resources/vm:100", data={"comment": "web tier"}).status_code == 200
    assert _data(api.get("/cluster/ha/resources/vm:100"))["comment"] == "web tier"
    assert api.post("/cluster/ha/resources", data={"sid": "vm:100"}).status_code == 400
    assert api.delete("/cluster/ha/resources/vm:100").status_code == 200
    assert api.get("/cluster/ha/resources/vm:100").status_code == 404
    # settings objects keep what PUT stored
    assert api.put("/cluster/options", data={"keyboard": "de", "description": "lab"}).status_code == 200
    options = _data(api.get("/cluster/options"))
    assert options["keyboard"] == "de" and options["description"] == "lab"


def test_state_changes_show_in_cached_lists(api: httpx.Client) -> None:
    first = _data(api.get("/nodes/pve2/qemu"))
    assert api.put("/nodes/pve2/qemu/101/config", data={"name": "renamed-101"}).status_code == 200
    second = _data(api.get("/nodes/pve2/qemu"))
    assert [v["name"] for v in second if v["vmid"] == 101] == ["renamed-101"]
    assert len(first) == len(second)


def test_groups_realms_and_cluster_nodes(api: httpx.Client) -> None:
    assert [g["groupid"] for g in _data(api.get("/access/groups"))] == ["auditors"]
    assert _data(api.get("/access/groups/auditors"))["members"] == ["auditor@pve"]
    assert api.post("/access/groups", data={"groupid": "ops", "comment": "operators"}).status_code == 200
    assert api.put("/access/users/auditor@pve", data={"groups": "ops", "append": 1}).status_code == 200
    groups = {g["groupid"]: g for g in _data(api.get("/access/groups"))}
    assert groups["ops"]["users"] == "auditor@pve" and groups["ops"]["comment"] == "operators"
    assert api.delete("/access/groups/ops").status_code == 200
    assert _data(api.get("/access/users/auditor@pve"))["groups"] == ["auditors"]
    assert {d["realm"] for d in _data(api.get("/access/domains"))} == {"pam", "pve"}
    assert [n["node"] for n in _data(api.get("/cluster/config/nodes"))] == ["pve1", "pve2", "pve3"]


def test_an_offline_node_answers_595_and_its_guests_show_unknown(
    fresh: EmulatorHandle, api: httpx.Client
) -> None:
    """As on a real cluster: calls the node answers itself fail with 595 while it is down (pveproxy cannot
    forward them); cluster-wide views still list it (offline) and its guests (status unknown)."""
    guests = [g for g in _data(api.get("/cluster/resources", params={"type": "vm"})) if g["node"] == "pve2"]
    assert guests and all(g["status"] != "unknown" for g in guests)
    fresh.state.set_node_online("pve2", False)
    try:
        down = api.get(f"/nodes/pve2/{guests[0]['type']}/{guests[0]['vmid']}/config")
        assert down.status_code == 595 and "offline" in down.reason_phrase + down.text
        assert api.get("/nodes/pve2/network").status_code == 595
        assert api.get("/nodes/pve1/network").status_code == 200  # the other nodes answer
        nodes = {n["node"]: n["status"] for n in _data(api.get("/nodes"))}
        assert nodes["pve2"] == "offline" and nodes["pve1"] == "online"
        listed = [
            g for g in _data(api.get("/cluster/resources", params={"type": "vm"})) if g["node"] == "pve2"
        ]
        assert [g["vmid"] for g in listed] == [g["vmid"] for g in guests]
        assert {g["status"] for g in listed} == {"unknown"}
    finally:
        fresh.state.set_node_online("pve2", True)
    assert api.get("/nodes/pve2/network").status_code == 200
