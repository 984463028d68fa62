"""Selected-objects jobs of every non-VM kind (SPEC 4.5) through the real plugin, worker and backend:
one `/sync/individual/<kind>` call per object, pinned to the owning endpoint's backend id, carrying the
query that names the object; the object is rewritten from Proxmox and nothing else is."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from conftest import NetBox, Plugin, assert_no_secrets
from fault_proxy import FaultProxy

STAGES = ["devices", "storage", "virtual-machines", "task-history", "vm-backups", "vm-snapshots"]


def individual_calls(faults: FaultProxy) -> list[tuple[str, dict[str, str]]]:
    out = []
    for hit in faults.hits:
        parts = urlsplit(hit.path)
        if parts.path.startswith("/sync/individual/"):
            out.append((parts.path.rsplit("/", 1)[1], {k: v[0] for k, v in parse_qs(parts.query).items()}))
    return out


def selected(netbox: NetBox, label: str, pk: int) -> dict[str, Any]:
    job = netbox.run_sync(mode="selected", batch_object_type=label, object_ids=[pk])
    block = job["data"]["sync"]
    assert job["status"]["value"] == "completed", (job["error"], block.get("objects"))
    assert block["batch_object_type"] == label and block["stages"] == []
    assert [o["ok"] for o in block["objects"]] == [True]
    return job


def test_selected_storage_backup_snapshot_and_task_jobs_sync_their_object(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, emulator: Any
) -> None:
    if not netbox.count("plugins/hvsync/snapshots/"):
        job = netbox.run_sync(sync_types=STAGES)
        assert job["status"]["value"] == "completed", job["error"]
    hv = netbox.get(f"plugins/hvsync/hv-endpoints/{plugin.hv_endpoint['id']}/")
    scope = {"hv_endpoint_ids": str(hv["backend_id"])}
    [storage] = netbox.get("plugins/hvsync/storage/", name="nfs-backup")["results"]
    backup = netbox.get("plugins/hvsync/backups/", vmid=100, limit=1)["results"][0]
    [snap] = netbox.get("plugins/hvsync/snapshots/", name="before-upgrade")["results"]
    task = next(
        t
        for t in netbox.get("plugins/hvsync/task-history/", limit=100)["results"]
        if t["task_type"] == "qmstart"
    )
    state = emulator.state
    guest = state.guests[100]
    old_description = guest.snapshots["before-upgrade"].description
    old_content = state.storages["nfs-backup"]["content"]
    try:
        # Proxmox changes two objects; each selected job rewrites its own object only
        guest.snapshots["before-upgrade"].description = "selected-objects orchestration"
        state.storages["nfs-backup"]["content"] = "backup,iso,snippets"
        faults.hits.clear()
        job = selected(netbox, "netbox_hvsync.hvsnapshot", snap["id"])
        assert individual_calls(faults) == [("snapshot", {**scope, "vmid": "100", "name": "before-upgrade"})]
        assert job["data"]["sync"]["objects"][0]["summary"]["updated"] == 1
        got = netbox.get(f"plugins/hvsync/snapshots/{snap['id']}/")
        assert got["description"] == "selected-objects orchestration"
        assert netbox.get(f"plugins/hvsync/storage/{storage['id']}/")["content"] == ["backup", "iso"]

        faults.hits.clear()
        job = selected(netbox, "netbox_hvsync.hvstorage", storage["id"])
        assert individual_calls(faults) == [("storage", {**scope, "storage": "nfs-backup"})]
        assert netbox.get(f"plugins/hvsync/storage/{storage['id']}/")["content"] == [
            "backup",
            "iso",
            "snippets",
        ]

        faults.hits.clear()
        selected(netbox, "netbox_hvsync.hvbackup", backup["id"])
        assert individual_calls(faults) == [("backup", {**scope, "vmid": "100", "volid": backup["volid"]})]

        faults.hits.clear()
        job = selected(netbox, "netbox_hvsync.hvtaskhistory", task["id"])
        assert individual_calls(faults) == [("task-history", {**scope, "upid": task["upid"]})]
        assert not any(urlsplit(h.path).path.endswith("/create/stream") for h in faults.hits)
        assert_no_secrets(job, plugin.planted)
    finally:
        guest.snapshots["before-upgrade"].description = old_description
        state.storages["nfs-backup"]["content"] = old_content


def test_a_missing_object_fails_the_job_and_is_named(netbox: NetBox, plugin: Plugin, emulator: Any) -> None:
    """Proxmox no longer has the snapshot: the backend answers 404 and the job fails naming it."""
    if not netbox.count("plugins/hvsync/snapshots/"):
        assert netbox.run_sync(sync_types=STAGES)["status"]["value"] == "completed"
    [vm] = netbox.get("virtualization/virtual-machines/", name="web-01")["results"]
    ghost = netbox.post(
        "plugins/hvsync/snapshots/", {"virtual_machine": vm["id"], "name": "gone-from-proxmox"}
    )
    job = netbox.run_sync(
        mode="selected", batch_object_type="netbox_hvsync.hvsnapshot", object_ids=[ghost["id"]]
    )
    assert job["status"]["value"] == "failed"
    assert job["error"].startswith("1 selected object(s) failed:")
    assert "web-01@gone-from-proxmox" in job["error"] and "HTTP 404" in job["error"]
    assert job["data"]["sync"]["objects"][0]["status"] == 404
