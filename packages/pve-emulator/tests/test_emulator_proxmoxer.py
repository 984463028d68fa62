"""Black-box tests with proxmoxer, unchanged, over HTTPS: the way real clients talk to Proxmox VE."""

from __future__ import annotations

import pytest
from proxmoxer import ProxmoxAPI, ResourceException
from proxmoxer.tools import Tasks
from pve_emulator.testing import EmulatorHandle

# The emulator's certificate is self-signed on purpose; proxmoxer is told not to verify it.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


def _ticket_client(pve: EmulatorHandle) -> ProxmoxAPI:
    return ProxmoxAPI(
        pve.host, port=pve.port, user=pve.user, password=pve.password, verify_ssl=False, timeout=10
    )


def _token_client(pve: EmulatorHandle) -> ProxmoxAPI:
    user, name = pve.token_id.split("!")
    return ProxmoxAPI(
        pve.host,
        port=pve.port,
        user=user,
        token_name=name,
        token_value=pve.token_secret,
        verify_ssl=False,
        timeout=10,
    )


def test_ticket_login_and_nodes(pve_tls: EmulatorHandle) -> None:
    prox = _ticket_client(pve_tls)
    nodes = prox.nodes.get()
    assert sorted(n["node"] for n in nodes) == ["pve1", "pve2", "pve3"]
    assert all(n["status"] == "online" and n["maxmem"] > 0 for n in nodes)


def test_wrong_password_is_rejected(pve_tls: EmulatorHandle) -> None:
    with pytest.raises(Exception) as info:
        ProxmoxAPI(
            pve_tls.host, port=pve_tls.port, user=pve_tls.user, password="wrong", verify_ssl=False, timeout=10
        )
    assert "401" in str(info.value) or "authentication" in str(info.value).lower()


def test_token_login_reads_cluster(pve_tls: EmulatorHandle) -> None:
    prox = _token_client(pve_tls)
    status = prox.cluster.status.get()
    cluster = next(e for e in status if e["type"] == "cluster")
    assert cluster["nodes"] == 3 and cluster["quorate"] == 1
    assert {e["name"] for e in status if e["type"] == "node"} == {"pve1", "pve2", "pve3"}


@pytest.mark.parametrize("login", [_ticket_client, _token_client], ids=["ticket", "token"])
def test_vm_lifecycle(pve_tls: EmulatorHandle, login) -> None:
    prox = login(pve_tls)
    vmid = int(prox.cluster.nextid.get())
    node = prox.nodes("pve2")
    upid = node.qemu.post(
        vmid=vmid,
        name=f"life-{vmid}",
        memory=2048,
        cores=2,
        sockets=1,
        ostype="l26",
        net0="virtio,bridge=vmbr0,tag=100",
        scsi0="local-lvm:16",
        ide2="none,media=cdrom",
        agent="1",
    )
    assert upid.startswith("UPID:pve2:") and f":qmcreate:{vmid}:" in upid
    assert Tasks.blocking_status(prox, upid, timeout=5, polling_interval=0.05)["exitstatus"] == "OK"

    config = node.qemu(vmid).config.get()
    assert config["name"] == f"life-{vmid}" and config["cores"] == 2
    assert config["net0"].startswith("virtio=BC:24:11:") and config["net0"].endswith("bridge=vmbr0,tag=100")
    assert config["scsi0"] == f"local-lvm:vm-{vmid}-disk-0,size=16G"

    upid = node.qemu(vmid).status.start.post()
    assert node.tasks(upid).status.get()["status"] == "running"
    status = Tasks.blocking_status(prox, upid, timeout=5, polling_interval=0.05)
    assert status["status"] == "stopped" and status["exitstatus"] == "OK"
    assert node.qemu(vmid).status.current.get()["status"] == "running"
    assert [line["t"] for line in node.tasks(upid).log.get()][-1] == "TASK OK"

    Tasks.blocking_status(
        prox,
        node.qemu(vmid).snapshot.post(snapname="first", description="one"),
        timeout=5,
        polling_interval=0.05,
    )
    snaps = node.qemu(vmid).snapshot.get()
    assert [s["name"] for s in snaps] == ["first", "current"]
    assert snaps[1]["parent"] == "first"

    with pytest.raises(ResourceException) as running:
        node.qemu(vmid).delete()
    assert running.value.status_code == 400
    Tasks.blocking_status(prox, node.qemu(vmid).status.stop.post(), timeout=5, polling_interval=0.05)
    Tasks.blocking_status(prox, node.qemu(vmid).delete(), timeout=5, polling_interval=0.05)
    assert vmid not in [vm["vmid"] for vm in node.qemu.get()]
    with pytest.raises(ResourceException) as gone:
        node.qemu(vmid).config.get()
    assert gone.value.status_code == 404


def test_validation_error_reaches_proxmoxer(pve_tls: EmulatorHandle) -> None:
    prox = _token_client(pve_tls)
    with pytest.raises(ResourceException) as info:
        prox.nodes("pve1").qemu.post(vmid="notanumber")
    assert info.value.status_code == 400
    assert "vmid" in info.value.errors
