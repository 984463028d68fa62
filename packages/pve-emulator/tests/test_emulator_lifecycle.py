"""Guest lifecycle as Proxmox runs it: clones, templates, migration, resize, digests, pending changes, locks.

Every answer is compared with the model it comes from (``pve.state``) and with the other API views that
derive from it (node lists, cluster resources, task logs).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.testing import EmulatorHandle, running_emulator

TASK = 0.4  # long enough to see a task-time lock, short enough to wait for


@pytest.fixture(scope="module")
def pve() -> Iterator[EmulatorHandle]:
    """A private demo emulator (conftest's `api` talks to it): tests clone, convert, move, lock guests."""
    with running_emulator(task_duration=TASK) as handle:
        yield handle


@pytest.fixture
def root(pve: EmulatorHandle) -> Iterator[httpx.Client]:
    """root@pam logged in with a ticket: the only caller `skiplock` is for."""
    with httpx.Client(base_url=pve.api_url, timeout=10) as client:
        data = client.post("/access/ticket", data={"username": "root@pam", "password": pve.password}).json()
        client.headers["CSRFPreventionToken"] = data["data"]["CSRFPreventionToken"]
        yield client


def _data(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def _die(resp: httpx.Response) -> str:
    """A Proxmox `die` inside the API call: HTTP 500 with the text as message."""
    assert resp.status_code == 500, resp.text
    return resp.json()["message"].strip()


def _wait(api: httpx.Client, upid: str) -> dict[str, Any]:
    node = upid.split(":")[1]
    deadline = time.monotonic() + 10
    while True:
        status = _data(api.get(f"/nodes/{node}/tasks/{upid}/status"))
        if status["status"] == "stopped" or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def _log(api: httpx.Client, upid: str) -> list[str]:
    return [line["t"] for line in _data(api.get(f"/nodes/{upid.split(':')[1]}/tasks/{upid}/log"))]


def _opts(value: str) -> dict[str, str]:
    return dict(p.partition("=")[::2] for p in value.split(",") if "=" in p)


def _resource(api: httpx.Client, vmid: int) -> dict[str, Any] | None:
    return next(
        (r for r in _data(api.get("/cluster/resources", params={"type": "vm"})) if r["vmid"] == vmid), None
    )


def _template(pve: EmulatorHandle) -> Any:
    return next(g for g in pve.state.guests.values() if g.kind == "qemu" and g.is_template)


def test_full_clone_new_identity_target_pool_and_lock(pve: EmulatorHandle, api: httpx.Client) -> None:
    source = pve.state.guests[100]  # web-01 on pve1, disk on shared ceph-vm, running
    assert source.status == "running"
    upid = _data(api.post("/nodes/pve1/qemu/100/clone", data={"newid": 900, "target": "pve2", "pool": "lab"}))
    assert upid.startswith("UPID:pve1:") and ":qmclone:100:" in upid
    clone = pve.state.guests[900]
    config = _data(api.get("/nodes/pve2/qemu/900/config"))
    assert config["lock"] == "clone" and clone.lock == "clone"  # the new VM is locked while copying
    assert _resource(api, 900)["node"] == "pve2" and _resource(api, 900)["pool"] == "lab"
    assert _wait(api, upid)["exitstatus"] == "OK"
    config = _data(api.get("/nodes/pve2/qemu/900/config"))
    assert "lock" not in config and clone.lock is None
    assert config["name"] == "Copy-of-VM-web-01" == clone.config["name"]
    assert config["scsi0"] == "ceph-vm:vm-900-disk-0,iothread=1,size=32G"
    assert config["cores"] == source.config["cores"] and config["tags"] == source.config["tags"]
    assert _opts(config["net0"])["virtio"] != _opts(source.config["net0"])["virtio"]
    assert config["net0"].split(",", 1)[1] == source.config["net0"].split(",", 1)[1]
    assert _opts(config["smbios1"])["uuid"] != _opts(source.config["smbios1"])["uuid"]
    assert "vmgenid" not in config  # regenerated only when the source had one
    assert clone.status == "stopped" and clone.pool == "lab"
    assert _log(api, upid) == [
        "creating a clone of VM 100 with ID 900",
        "create full clone of drive scsi0 (ceph-vm:vm-100-disk-0)",
        "TASK OK",
    ]
    assert [g["vmid"] for g in _data(api.get("/nodes/pve2/qemu")) if g["vmid"] == 900] == [900]


def test_clone_checks_storage_template_and_snapshot(pve: EmulatorHandle, api: httpx.Client) -> None:
    # db-01 (103) keeps its disks on local-lvm: another node cannot see them
    assert _die(api.post("/nodes/pve1/qemu/103/clone", data={"newid": 901, "target": "pve3"})) == (
        "can't clone VM to node 'pve3' (VM uses local storage)"
    )
    assert _die(api.post("/nodes/pve1/qemu/103/clone", data={"newid": 901, "full": 0})) == (
        "Linked clone feature is not supported for 'local-lvm:vm-103-disk-0' (scsi0)"
    )
    assert _die(api.post("/nodes/pve1/qemu/103/clone", data={"newid": 901, "snapname": "nope"})) == (
        "snapshot 'nope' does not exist"
    )
    template = _template(pve)
    node = template.node
    assert _die(
        api.post(f"/nodes/{node}/qemu/{template.vmid}/clone", data={"newid": 901, "storage": "ceph-vm"})
    ) == ("parameter 'storage' not allowed for linked clones")
    assert 901 not in pve.state.guests
    # from a template the default is a linked clone whose disk references the base volume
    upid = _data(api.post(f"/nodes/{node}/qemu/{template.vmid}/clone", data={"newid": 901, "name": "linked"}))
    _wait(api, upid)
    config = _data(api.get(f"/nodes/{node}/qemu/901/config"))
    base = template.config["scsi0"].split(",")[0]
    assert config["scsi0"].split(",")[0] == f"{base}/vm-901-disk-0"
    assert config["name"] == "linked" and "template" not in config
    assert f"create linked clone of drive scsi0 ({base})" in _log(api, upid)
    # ... and the template cannot go while the clone uses its base volume
    assert _die(api.delete(f"/nodes/{node}/qemu/{template.vmid}")) == (
        f"base volume '{base}' is still in use by linked cloned"
    )
    _wait(api, _data(api.delete(f"/nodes/{node}/qemu/901")))
    assert 901 not in pve.state.guests and _resource(api, 901) is None
    # full=1 from a template copies instead
    upid = _data(api.post(f"/nodes/{node}/qemu/{template.vmid}/clone", data={"newid": 902, "full": 1}))
    _wait(api, upid)
    assert _data(api.get(f"/nodes/{node}/qemu/902/config"))["scsi0"].startswith(
        f"{base.split(':')[0]}:vm-902-disk-0,"
    )
    assert _data(api.get(f"/nodes/{node}/qemu/902/config"))["name"] == f"Copy-of-VM-{template.name}"


def test_lxc_clone_locks_source_and_keeps_hostname(pve: EmulatorHandle, api: httpx.Client) -> None:
    ct = pve.state.guests[200]
    assert ct.status == "running"
    assert _die(api.post("/nodes/pve1/lxc/200/clone", data={"newid": 950})) == (
        "Full clone of a running container is only possible from a snapshot"
    )
    _wait(api, _data(api.post("/nodes/pve1/lxc/200/snapshot", data={"snapname": "s1"})))
    upid = _data(api.post("/nodes/pve1/lxc/200/clone", data={"newid": 950, "snapname": "s1"}))
    assert ":vzclone:200:" in upid
    assert _data(api.get("/nodes/pve1/lxc/200/config"))["lock"] == "disk"
    assert _data(api.get("/nodes/pve1/lxc/950/config"))["lock"] == "create"
    assert _die(api.put("/nodes/pve1/lxc/200/config", data={"cores": 3})) == "CT is locked (disk)"
    _wait(api, upid)
    source, clone = _data(api.get("/nodes/pve1/lxc/200/config")), _data(api.get("/nodes/pve1/lxc/950/config"))
    assert "lock" not in source and "lock" not in clone
    assert clone["hostname"] == source["hostname"] == ct.config["hostname"]
    assert clone["rootfs"] == "local-lvm:vm-950-disk-0,size=8G"
    assert _opts(clone["net0"])["hwaddr"] != _opts(source["net0"])["hwaddr"]
    assert (
        "parent" not in clone
        and "create full clone of mountpoint rootfs (local-lvm:vm-200-disk-0)" in _log(api, upid)
    )


def test_template_conversion_and_start_refused(pve: EmulatorHandle, api: httpx.Client) -> None:
    assert _die(api.post("/nodes/pve2/qemu/101/template")) == (
        "you can't convert a VM to template if VM is running"
    )
    _wait(api, _data(api.post("/nodes/pve2/qemu/101/status/stop")))
    _wait(api, _data(api.post("/nodes/pve2/qemu/101/snapshot", data={"snapname": "snap1"})))
    assert _die(api.post("/nodes/pve2/qemu/101/template")) == (
        "unable to create template, because VM contains snapshots"
    )
    _wait(api, _data(api.delete("/nodes/pve2/qemu/101/snapshot/snap1")))
    upid = _data(api.post("/nodes/pve2/qemu/101/template"))
    assert ":qmtemplate:101:" in upid
    config = _data(api.get("/nodes/pve2/qemu/101/config"))
    assert config["template"] == 1 and config["scsi0"].startswith("local-lvm:base-101-disk-0,")
    assert _resource(api, 101)["template"] == 1
    assert _die(api.post("/nodes/pve2/qemu/101/template")) == "you can't convert a template to a template"
    assert _die(api.post("/nodes/pve2/qemu/101/snapshot", data={"snapname": "snap2"})) == (
        "you can't take a snapshot if it's a template"
    )
    status = _wait(api, _data(api.post("/nodes/pve2/qemu/101/status/start")))
    assert status["exitstatus"] == "you can't start a vm if it's a template"
    assert pve.state.guests[101].status == "stopped"
    # a container: stopped, converted (the call returns null), refused at start
    ct = next(g for g in pve.state.guests.values() if g.kind == "lxc" and g.status == "stopped")
    assert _data(api.post(f"/nodes/{ct.node}/lxc/{ct.vmid}/template")) is None
    rootfs = _data(api.get(f"/nodes/{ct.node}/lxc/{ct.vmid}/config"))["rootfs"]
    assert f":base-{ct.vmid}-disk-0" in rootfs or f":basevol-{ct.vmid}-disk-0" in rootfs
    status = _wait(api, _data(api.post(f"/nodes/{ct.node}/lxc/{ct.vmid}/status/start")))
    assert status["exitstatus"] == "you can't start a CT if it's a template"


def test_migrate_moves_the_guest_under_a_migrate_lock(pve: EmulatorHandle, api: httpx.Client) -> None:
    assert pve.state.guests[105].status == "running" and pve.state.guests[105].node == "pve3"
    assert _die(api.post("/nodes/pve3/qemu/105/migrate", data={"target": "pve1"})) == (
        "can't migrate running VM without --online"
    )
    upid = _data(api.post("/nodes/pve3/qemu/105/migrate", data={"target": "pve1", "online": 1}))
    assert upid.startswith("UPID:pve3:") and ":qmigrate:105:" in upid
    assert _data(api.get("/nodes/pve1/qemu/105/config"))["lock"] == "migrate"
    assert [g["lock"] for g in _data(api.get("/nodes/pve1/qemu")) if g["vmid"] == 105] == ["migrate"]
    assert _die(api.put("/nodes/pve1/qemu/105/config", data={"cores": 2})) == "VM is locked (migrate)"
    assert api.get("/nodes/pve3/qemu/105/config").status_code == 404
    assert _resource(api, 105)["node"] == "pve1"
    assert 105 not in [g["vmid"] for g in _data(api.get("/nodes/pve3/qemu"))]
    assert _wait(api, upid)["exitstatus"] == "OK"
    assert "lock" not in _data(api.get("/nodes/pve1/qemu/105/config"))
    assert _data(api.get("/nodes/pve1/qemu/105/status/current"))["status"] == "running"
    assert any("starting migration of VM 105 to node 'pve1'" in line for line in _log(api, upid))
    ct = next(g for g in pve.state.guests.values() if g.kind == "lxc" and g.status == "running")
    target = next(n for n in ("pve1", "pve2", "pve3") if n != ct.node)
    assert _die(api.post(f"/nodes/{ct.node}/lxc/{ct.vmid}/migrate", data={"target": target})) == (
        "can't migrate running container without --online or --restart"
    )
    upid = _data(api.post(f"/nodes/{ct.node}/lxc/{ct.vmid}/migrate", data={"target": target, "restart": 1}))
    _wait(api, upid)
    assert ct.node == target and _resource(api, ct.vmid)["node"] == target


def test_resize_grows_disks_and_refuses_shrinking(pve: EmulatorHandle, api: httpx.Client) -> None:
    guest = pve.state.guests[102]  # web-03: 32G on ceph-vm
    assert _opts(guest.config["scsi0"])["size"] == "32G"
    upid = _data(api.put("/nodes/pve3/qemu/102/resize", data={"disk": "scsi0", "size": "+8G"}))
    assert ":resize:102:" in upid and _wait(api, upid)["exitstatus"] == "OK"
    config = _data(api.get("/nodes/pve3/qemu/102/config"))
    assert _opts(config["scsi0"])["size"] == "40G" and config["scsi0"].startswith("ceph-vm:vm-102-disk-0,")
    assert _resource(api, 102)["maxdisk"] == 40 * 1024**3
    _wait(api, _data(api.put("/nodes/pve3/qemu/102/resize", data={"disk": "scsi0", "size": "1T"})))
    assert _opts(_data(api.get("/nodes/pve3/qemu/102/config"))["scsi0"])["size"] == "1T"
    status = _wait(api, _data(api.put("/nodes/pve3/qemu/102/resize", data={"disk": "scsi0", "size": "10G"})))
    assert status["exitstatus"] == "shrinking disks is not supported"
    assert _opts(pve.state.guests[102].config["scsi0"])["size"] == "1T"
    status = _wait(api, _data(api.put("/nodes/pve3/qemu/102/resize", data={"disk": "ide2", "size": "+1G"})))
    assert status["exitstatus"] == "you can't resize a cdrom"
    status = _wait(api, _data(api.put("/nodes/pve3/qemu/102/resize", data={"disk": "scsi5", "size": "+1G"})))
    assert status["exitstatus"] == "disk 'scsi5' does not exist"
    ct = pve.state.guests[201]
    before = _opts(ct.config["rootfs"])["size"]
    assert before == "8G"
    upid = _data(api.put(f"/nodes/{ct.node}/lxc/201/resize", data={"disk": "rootfs", "size": "+512M"}))
    assert _wait(api, upid)["exitstatus"] == "OK"
    assert _opts(_data(api.get(f"/nodes/{ct.node}/lxc/201/config"))["rootfs"])["size"] == "8704M"
    status = _wait(
        api, _data(api.put(f"/nodes/{ct.node}/lxc/201/resize", data={"disk": "rootfs", "size": "4G"}))
    )
    assert status["exitstatus"] == "unable to shrink disk size"


def test_digest_mismatch_is_refused(pve: EmulatorHandle, api: httpx.Client) -> None:
    digest = _data(api.get("/nodes/pve3/qemu/102/config"))["digest"]
    _data(api.put("/nodes/pve3/qemu/102/config", data={"description": "first", "digest": digest}))
    assert pve.state.guests[102].config["description"] == "first"
    assert _die(api.put("/nodes/pve3/qemu/102/config", data={"description": "second", "digest": digest})) == (
        "checksum mismatch (file change by other user?)"
    )
    assert pve.state.guests[102].config["description"] == "first"
    status = _wait(
        api,
        _data(
            api.put("/nodes/pve3/qemu/102/resize", data={"disk": "scsi0", "size": "+1G", "digest": digest})
        ),
    )
    assert status["exitstatus"] == "checksum mismatch (file change by other user?)"
    ct_digest = _data(api.get("/nodes/pve1/lxc/203/config"))["digest"]
    _data(api.put("/nodes/pve1/lxc/203/config", data={"description": "x"}))
    assert _die(api.put("/nodes/pve1/lxc/203/config", data={"cores": 1, "digest": ct_digest})) == (
        "detected modified configuration - file changed by other user? Try again."
    )


def test_pending_changes_of_a_running_vm(pve: EmulatorHandle, api: httpx.Client) -> None:
    guest = pve.state.guests[104]  # db-02, running, 8 cores
    assert guest.status == "running" and guest.config["cores"] == 8
    _data(
        api.put(f"/nodes/{guest.node}/qemu/104/config", data={"cores": 4, "name": "db-02b", "delete": "cpu"})
    )
    # `name` is hot-pluggable, cores and removing the CPU model wait for the next start
    assert guest.config["name"] == "db-02b" and guest.config["cores"] == 8 and "cpu" in guest.config
    pending = {p["key"]: p for p in _data(api.get(f"/nodes/{guest.node}/qemu/104/pending"))}
    assert pending["cores"] == {"key": "cores", "value": "8", "pending": "4"}
    assert pending["cpu"] == {"key": "cpu", "value": guest.config["cpu"], "delete": 1}
    assert pending["name"] == {"key": "name", "value": "db-02b"}
    assert _data(api.get(f"/nodes/{guest.node}/qemu/104/config"))["cores"] == 4  # pending values taken in
    current = _data(api.get(f"/nodes/{guest.node}/qemu/104/config", params={"current": 1}))
    assert current["cores"] == 8 and "cpu" in current
    _data(api.put(f"/nodes/{guest.node}/qemu/104/config", data={"net0": "virtio,bridge=vmbr0"}))
    assert guest.config["net0"].endswith(",bridge=vmbr0")  # network hotplug is on by default
    _wait(api, _data(api.post(f"/nodes/{guest.node}/qemu/104/status/stop")))
    assert guest.pending == {"cores": 4} and guest.pending_delete == ["cpu"]
    _wait(api, _data(api.post(f"/nodes/{guest.node}/qemu/104/status/start")))
    assert guest.config["cores"] == 4 and "cpu" not in guest.config and not guest.pending
    assert all(
        "pending" not in p and "delete" not in p
        for p in _data(api.get(f"/nodes/{guest.node}/qemu/104/pending"))
    )
    # a stopped VM takes changes at once
    _wait(api, _data(api.post(f"/nodes/{guest.node}/qemu/104/status/stop")))
    _data(api.put(f"/nodes/{guest.node}/qemu/104/config", data={"cores": 2, "revert": ""}))
    assert guest.config["cores"] == 2 and not guest.pending


def test_locks_refuse_conflicting_operations(
    pve: EmulatorHandle, api: httpx.Client, root: httpx.Client
) -> None:
    guest = pve.state.guests[106]  # mail-01, running
    node = guest.node
    _data(api.put(f"/nodes/{node}/qemu/106/config", data={"lock": "backup"}))
    assert guest.lock == "backup" and _data(api.get(f"/nodes/{node}/qemu/106/config"))["lock"] == "backup"
    assert _resource(api, 106) is not None
    assert _die(api.put(f"/nodes/{node}/qemu/106/config", data={"cores": 1})) == "VM is locked (backup)"
    assert (
        _die(api.post(f"/nodes/{node}/qemu/106/snapshot", data={"snapname": "snapx"}))
        == "VM is locked (backup)"
    )
    assert _die(api.post(f"/nodes/{node}/qemu/106/clone", data={"newid": 960})) == "VM is locked (backup)"
    status = _wait(api, _data(api.post(f"/nodes/{node}/qemu/106/status/stop")))
    assert status["exitstatus"] == "VM is locked (backup)" and guest.status == "running"
    # skiplock: root@pam only, and not through a token
    resp = api.post(f"/nodes/{node}/qemu/106/status/stop", data={"skiplock": 1})
    assert resp.status_code == 400 and resp.json()["errors"] == {"skiplock": "Only root may use this option."}
    assert (
        _wait(root, _data(root.post(f"/nodes/{node}/qemu/106/status/stop", data={"skiplock": 1})))[
            "exitstatus"
        ]
        == "OK"
    )
    assert guest.status == "stopped" and guest.lock == "backup"
    assert _die(api.delete(f"/nodes/{node}/qemu/106")) == "VM is locked (backup)"
    _data(root.put(f"/nodes/{node}/qemu/106/config", data={"delete": "lock", "skiplock": 1}))
    assert guest.lock is None and "lock" not in _data(api.get(f"/nodes/{node}/qemu/106/config"))
    _data(api.put(f"/nodes/{node}/qemu/106/config", data={"cores": 1}))
    assert guest.config["cores"] == 1
    # a task-time lock ends with its task
    upid = _data(api.post(f"/nodes/{node}/qemu/106/snapshot", data={"snapname": "snap1"}))
    assert _data(api.get(f"/nodes/{node}/qemu/106/config"))["lock"] == "snapshot"
    assert _die(api.delete(f"/nodes/{node}/qemu/106")) == "VM is locked (snapshot)"
    _wait(api, upid)
    assert "lock" not in _data(api.get(f"/nodes/{node}/qemu/106/config")) and guest.lock is None
