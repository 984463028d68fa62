"""Selected-objects jobs (SPEC 4.5): same preflight, scope right after, one per-object call per VM pinned
to its cluster's owner; any failed object fails the job and is named in the log."""

from __future__ import annotations

from conftest import NetBox, Plugin, assert_no_secrets
from fault_proxy import FaultProxy

VM = "virtualization.virtualmachine"


def synced_vms(netbox: NetBox) -> list[dict]:
    # NetBox answers 400 to a filter on a tag that does not exist yet (nothing synced on this NetBox)
    tagged = netbox.count("extras/tags/", slug="hvsync") > 0
    vms = netbox.get("virtualization/virtual-machines/", tag="hvsync", limit=5)["results"] if tagged else []
    if not vms:  # this session has not synced VMs yet
        job = netbox.run_sync(sync_types=["devices", "storage", "virtual-machines"])
        assert job["status"]["value"] == "completed", job["error"]
        vms = netbox.get("virtualization/virtual-machines/", tag="hvsync", limit=5)["results"]
    assert vms
    return vms


def test_selected_vm_sync_calls_the_individual_route_with_the_pinned_scope(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    vm = synced_vms(netbox)[0]
    faults.hits.clear()
    job = netbox.run_sync(mode="selected", vm_ids=[vm["id"]])
    block = job["data"]["sync"]
    assert job["status"]["value"] == "completed", (job["error"], block.get("objects"))
    assert block["batch_object_type"] == VM and block["stages"] == []
    assert [o["ok"] for o in block["objects"]] == [True]
    hv = netbox.get(f"plugins/hvsync/hv-endpoints/{plugin.hv_endpoint['id']}/")
    calls = [h.path for h in faults.hits if h.path.startswith("/sync/individual/vm")]
    assert len(calls) == 1 and f"hv_endpoint_ids={hv['backend_id']}" in calls[0] and "vmid=" in calls[0]
    assert not any(h.path.split("?")[0].endswith("/create/stream") for h in faults.hits)
    assert_no_secrets(job, plugin.planted)


def test_a_failed_object_fails_the_job_and_is_named(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    vm = synced_vms(netbox)[0]
    site = netbox.upsert("dcim/sites/", {"name": "orch stranger site", "slug": "orch-stranger-site"})
    stranger = netbox.upsert(
        "virtualization/virtual-machines/",
        {"name": "not-from-proxmox", "status": "active", "site": site["id"]},
    )
    job = netbox.run_sync(mode="selected", vm_ids=[vm["id"], stranger["id"]])
    assert job["status"]["value"] == "failed"
    assert job["error"].startswith("1 selected object(s) failed:")
    assert "not-from-proxmox" in job["error"] and "never synced" in job["error"]
    objects = {o["object"]: o for o in job["data"]["sync"]["objects"]}
    assert sum(o["ok"] for o in objects.values()) == 1
    assert any("selected object failed" in e["message"] for e in job["log_entries"])
