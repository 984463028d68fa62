"""Ansible's community.proxmox modules, unchanged, against an emulator process.

Each module runs as ``ansible localhost -m community.proxmox.<module>`` in the tools venv, logged in with
a ticket (``api_user``/``api_password``) or an API token. The read-only info modules run with both; each
write test runs with one, the VM lifecycle with a ticket (its writes need the CSRF token) and the clones
with an API token, so both logins write (each write test costs about a minute on 2 cores: an ``ansible``
process per module call). The module's JSON result
(ansible.posix.json callback) is checked, and then the emulator's state as its API reports it: the VM
exists with the asked-for config, is running or stopped, the snapshot is listed, a clone has new MACs,
a new SMBIOS uuid and vmgenid, a linked clone's disk references the template's base volume.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import RunningEmulator

AUTHS = ("ticket", "token")
# vmids per login method, so both parametrisations share one emulator without colliding
BASE = {"ticket": 300, "token": 400}


def _credentials(emulator: RunningEmulator, auth: str) -> dict[str, Any]:
    common = {"api_host": "127.0.0.1", "api_port": emulator.port, "validate_certs": False}
    if auth == "ticket":
        return {**common, "api_user": emulator.user, "api_password": emulator.password}
    return {
        **common,
        "api_user": emulator.token_user,
        "api_token_id": emulator.token_name,
        "api_token_secret": emulator.token_secret,
    }


@dataclass(frozen=True, slots=True)
class Module:
    """Runs one community.proxmox module ad hoc (``ansible localhost -m``) with one login method."""

    auth: str
    emulator: RunningEmulator
    venv: Path
    env: dict[str, str]
    cwd: Path

    def __call__(self, module_name: str, /, **args: Any) -> dict[str, Any]:
        cmd = [
            str(self.venv / "bin" / "ansible"),
            "localhost",
            "-e",
            f"ansible_python_interpreter={self.venv / 'bin' / 'python'}",
            "-m",
            f"community.proxmox.{module_name}",
            "-a",
            json.dumps({**_credentials(self.emulator, self.auth), **args}),
        ]
        done = subprocess.run(cmd, env=self.env, cwd=self.cwd, capture_output=True, text=True, timeout=180)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"{module_name}: no JSON result (rc {done.returncode})\n{done.stdout}\n{done.stderr}")
        return report["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture
def module(
    emulator: RunningEmulator,
    tools_venv: Path,
    tool_env: dict[str, str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Module:
    """Ansible with its home and temp under tmp_path, no ansible.cfg, results as JSON on stdout."""
    env = {
        **tool_env,
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_CONFIG": str(tmp_path / "no-ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    }
    return Module(request.param, emulator, tools_venv, env, tmp_path)


def _ok(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("failed"), result
    return result


def _config(emulator: RunningEmulator, node: str, vmid: int) -> dict[str, Any]:
    return emulator.get(f"/nodes/{node}/qemu/{vmid}/config")  # type: ignore[return-value]


def _vm_resources(emulator: RunningEmulator) -> dict[int, dict[str, Any]]:
    return {r["vmid"]: r for r in emulator.get("/cluster/resources", type="vm")}  # type: ignore[union-attr]


def _options(value: str) -> dict[str, str]:
    return dict(p.partition("=")[::2] for p in value.split(",") if "=" in p)


def _task_log(emulator: RunningEmulator, node: str, vmid: int, kind: str) -> list[str]:
    tasks = emulator.get(f"/nodes/{node}/tasks", vmid=vmid, typefilter=kind)
    assert tasks, f"no {kind} task for {vmid}"
    upid = tasks[0]["upid"]  # type: ignore[index]
    return [line["t"] for line in emulator.get(f"/nodes/{node}/tasks/{upid}/log")]  # type: ignore[union-attr]


def _refusal(emulator: RunningEmulator, method: str, path: str, **params: Any) -> str:
    """Repeat a call a module made and return Proxmox's error text (HTTP 500, ``message``)."""
    with emulator.api() as client:
        response = client.request(method, path, data=params or None)
    assert response.status_code == 500, response.text
    return str(response.json()["message"]).strip()


@pytest.mark.parametrize("module", AUTHS, indirect=True)
def test_info_modules_report_the_emulator_state(module: Module, emulator: RunningEmulator) -> None:
    nodes = _ok(module("proxmox_node_info"))["proxmox_nodes"]
    api_nodes = {n["node"]: n for n in emulator.get("/nodes")}  # type: ignore[union-attr]
    assert {n["node"] for n in nodes} == set(api_nodes)
    for node in nodes:
        assert node["status"] == api_nodes[node["node"]]["status"]
        assert node["maxcpu"] == api_nodes[node["node"]]["maxcpu"]

    vms = _ok(module("proxmox_vm_info"))["proxmox_vms"]
    resources = _vm_resources(emulator)
    assert {v["vmid"] for v in vms} == set(resources)
    for vm in vms:
        assert (vm["node"], vm["name"], vm["status"]) == (
            resources[vm["vmid"]]["node"],
            resources[vm["vmid"]]["name"],
            resources[vm["vmid"]]["status"],
        )
    one = _ok(module("proxmox_vm_info", vmid=100, config="current"))["proxmox_vms"]
    assert [v["vmid"] for v in one] == [100]
    assert one[0]["config"]["scsi0"] == _config(emulator, one[0]["node"], 100)["scsi0"]

    storages = _ok(module("proxmox_storage_info"))["proxmox_storages"]
    api_storages = {s["storage"]: s for s in emulator.get("/storage")}  # type: ignore[union-attr]
    assert {s["storage"] for s in storages} == set(api_storages)
    for storage in storages:
        assert storage["type"] == api_storages[storage["storage"]]["type"]
        assert sorted(storage["content"]) == sorted(api_storages[storage["storage"]]["content"].split(","))

    tasks = _ok(module("proxmox_tasks_info", node="pve1"))["proxmox_tasks"]
    api_tasks = {t["upid"]: t for t in emulator.get("/nodes/pve1/tasks", limit=1000)}  # type: ignore[union-attr]
    assert tasks and {t["upid"] for t in tasks} <= set(api_tasks)
    for task in tasks:
        assert (task["type"], task["status"]) == (
            api_tasks[task["upid"]]["type"],
            api_tasks[task["upid"]]["status"],
        )


@pytest.mark.parametrize("module", ["ticket"], indirect=True)
def test_kvm_create_start_snapshot_stop_delete(module: Module, emulator: RunningEmulator) -> None:
    vmid = BASE[module.auth]
    spec = {
        "node": "pve1",
        "vmid": vmid,
        "name": f"ansible-{vmid}",
        "cores": 2,
        "memory": 1024,
        "scsi": {"scsi0": "local-lvm:8"},
        "net": {"net0": "virtio,bridge=vmbr0"},
    }
    created = _ok(module("proxmox_kvm", **spec))
    assert created["changed"] is True and created["vmid"] == vmid
    config = _config(emulator, "pve1", vmid)
    assert (config["name"], int(config["cores"]), int(config["memory"])) == (f"ansible-{vmid}", 2, 1024)
    assert config["scsi0"] == f"local-lvm:vm-{vmid}-disk-0,size=8G"
    assert created["devices"]["scsi0"] == config["scsi0"].split(",")[0]
    assert config["net0"] == f"virtio={created['mac']['net0']},bridge=vmbr0"
    assert _vm_resources(emulator)[vmid]["status"] == "stopped"

    again = _ok(module("proxmox_kvm", **spec))
    assert again["changed"] is False and "already exists" in again["msg"]
    assert _config(emulator, "pve1", vmid)["digest"] == config["digest"]

    started = _ok(module("proxmox_kvm", node="pve1", vmid=vmid, state="started"))
    assert started["changed"] is True
    assert emulator.get(f"/nodes/pve1/qemu/{vmid}/status/current")["status"] == "running"  # type: ignore[index]
    assert _ok(module("proxmox_kvm", node="pve1", vmid=vmid, state="started"))["changed"] is False

    snap = _ok(
        module("proxmox_snap", vmid=vmid, snapname="before-upgrade", description="ansible", state="present")
    )
    assert snap["changed"] is True
    listed = {s["name"]: s for s in emulator.get(f"/nodes/pve1/qemu/{vmid}/snapshot")}  # type: ignore[union-attr]
    assert listed["before-upgrade"]["description"] == "ansible"
    assert listed["current"]["parent"] == "before-upgrade"
    info = _ok(module("proxmox_snap_info", vmid=vmid))["snapshots"]
    assert {s["name"] for s in info} == set(listed)
    assert (
        _ok(module("proxmox_snap", vmid=vmid, snapname="before-upgrade", state="present"))["changed"] is False
    )
    removed = _ok(module("proxmox_snap", vmid=vmid, snapname="before-upgrade", state="absent"))
    assert removed["changed"] is True
    assert [s["name"] for s in emulator.get(f"/nodes/pve1/qemu/{vmid}/snapshot")] == ["current"]  # type: ignore[union-attr]

    stopped = _ok(module("proxmox_kvm", node="pve1", vmid=vmid, state="stopped", force=True))
    assert stopped["changed"] is True
    assert emulator.get(f"/nodes/pve1/qemu/{vmid}/status/current")["status"] == "stopped"  # type: ignore[index]

    deleted = _ok(module("proxmox_kvm", node="pve1", vmid=vmid, state="absent"))
    assert deleted["changed"] is True
    assert vmid not in _vm_resources(emulator)
    assert vmid not in [g["vmid"] for g in emulator.get("/nodes/pve1/qemu")]  # type: ignore[union-attr]
    assert _ok(module("proxmox_kvm", node="pve1", vmid=vmid, state="absent"))["changed"] is False


@pytest.mark.parametrize("module", ["token"], indirect=True)
def test_kvm_full_and_linked_clones_of_a_template(module: Module, emulator: RunningEmulator) -> None:
    base = BASE[module.auth] + 10
    source, full, template, linked = base, base + 1, base + 2, base + 3
    disk = {"scsi": {"scsi0": "local-lvm:4"}, "net": {"net0": "virtio,bridge=vmbr0"}, "node": "pve1"}
    _ok(module("proxmox_kvm", vmid=source, name=f"src-{source}", **disk))
    src_config = _config(emulator, "pve1", source)

    cloned = _ok(module("proxmox_kvm", node="pve1", clone=f"src-{source}", name=f"full-{full}", newid=full))
    assert cloned["changed"] is True and cloned["vmid"] == full
    config = _config(emulator, "pve1", full)
    assert config["name"] == f"full-{full}" and config["cores"] == src_config["cores"]
    assert config["scsi0"] == f"local-lvm:vm-{full}-disk-0,size=4G"
    assert _options(config["net0"])["virtio"] != _options(src_config["net0"])["virtio"]
    assert _options(config["net0"])["bridge"] == "vmbr0"
    assert _options(config["smbios1"])["uuid"] != _options(src_config["smbios1"])["uuid"]
    assert config["vmgenid"] != src_config["vmgenid"]
    assert "lock" not in config and "template" not in config
    assert f"create full clone of drive scsi0 (local-lvm:vm-{source}-disk-0)" in _task_log(
        emulator, "pve1", source, "qmclone"
    )

    # a linked clone needs a template: the tool asks, Proxmox refuses with its text
    refused = module(
        "proxmox_kvm",
        node="pve1",
        clone=f"src-{source}",
        name="nope",
        newid=base + 9,
        full=False,
        format="unspecified",
    )
    assert refused.get("failed") and "500" in refused["msg"]
    assert base + 9 not in _vm_resources(emulator)
    # proxmoxer shows the HTTP reason phrase; the emulator's text is in the body's `message`
    reason = _refusal(emulator, "POST", f"/nodes/pve1/qemu/{source}/clone", newid=base + 9, full=0)
    assert reason == f"Linked clone feature is not supported for 'local-lvm:vm-{source}-disk-0' (scsi0)"

    made = _ok(module("proxmox_kvm", vmid=template, name=f"tmpl-{template}", template=True, **disk))
    assert made["changed"] is True
    tmpl_config = _config(emulator, "pve1", template)
    assert (
        tmpl_config["template"] == 1 and tmpl_config["scsi0"] == f"local-lvm:base-{template}-disk-0,size=4G"
    )
    assert _vm_resources(emulator)[template]["template"] == 1

    _ok(
        module(
            "proxmox_kvm",
            node="pve1",
            clone=f"tmpl-{template}",
            name=f"link-{linked}",
            newid=linked,
            full=False,
            format="unspecified",
        )
    )
    config = _config(emulator, "pve1", linked)
    assert config["scsi0"] == f"local-lvm:base-{template}-disk-0/vm-{linked}-disk-0,size=4G"
    assert config["name"] == f"link-{linked}" and "template" not in config
    assert _options(config["smbios1"])["uuid"] != _options(tmpl_config["smbios1"])["uuid"]
    assert _options(config["net0"])["virtio"] != _options(tmpl_config["net0"])["virtio"]
    assert f"create linked clone of drive scsi0 (local-lvm:base-{template}-disk-0)" in _task_log(
        emulator, "pve1", template, "qmclone"
    )

    # state=template converts the full clone: its disk becomes a base volume
    converted = _ok(module("proxmox_kvm", node="pve1", vmid=full, state="template"))
    assert converted["changed"] is True
    config = _config(emulator, "pve1", full)
    assert config["template"] == 1 and config["scsi0"] == f"local-lvm:base-{full}-disk-0,size=4G"
    assert _ok(module("proxmox_kvm", node="pve1", vmid=full, state="template"))["changed"] is False

    # the template's base volume is in use by the linked clone: Proxmox refuses to destroy it
    refused = module("proxmox_kvm", node="pve1", vmid=template, state="absent")
    assert refused.get("failed") and "500" in refused["msg"]
    assert template in _vm_resources(emulator)
    reason = _refusal(emulator, "DELETE", f"/nodes/pve1/qemu/{template}")
    assert reason == f"base volume 'local-lvm:base-{template}-disk-0' is still in use by linked cloned"
    for vmid in (linked, template, full, source):
        assert _ok(module("proxmox_kvm", node="pve1", vmid=vmid, state="absent"))["changed"] is True
    assert not {source, full, template, linked} & set(_vm_resources(emulator))
