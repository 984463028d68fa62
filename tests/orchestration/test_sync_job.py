"""A sync job on NetBox's queue really syncs: preflight pushes, scope, reconciliation, all 13 stages."""

from __future__ import annotations

from typing import Any

from conftest import PLUGIN_API, STAGES, NetBox, Plugin, assert_no_secrets
from fault_proxy import FaultProxy


def messages(job: dict[str, Any]) -> list[str]:
    return [entry["message"] for entry in job.get("log_entries") or []]


def test_full_sync_job_runs_every_stage_and_converges(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    # the backend endpoint's key was adopted through the REST save (bootstrap of the fresh backend)
    assert plugin.backend_endpoint["key_state"]["value"] == "adopted"
    assert plugin.backend_endpoint["key_fingerprint"].startswith("v1:")
    job = netbox.run_sync()
    block = job["data"]["sync"]
    assert job["status"]["value"] == "completed", (job["error"], block.get("errors"), messages(job)[-5:])
    assert [s["stage"] for s in block["stages"]] == STAGES
    assert all(s["ok"] and s["status"] == 200 for s in block["stages"])
    hv_pk = plugin.hv_endpoint["id"]

    # preflight pushed both records; the bookkeeping landed with filtered updates
    assert block["preflight"]["inventory_pushes"][str(plugin.inventory_endpoint["id"])]["ok"] is True
    assert block["preflight"]["hv_pushes"][str(hv_pk)]["ok"] is True
    hv = netbox.get(f"{PLUGIN_API}hv-endpoints/{hv_pk}/")
    inv = netbox.get(f"{PLUGIN_API}inventory-endpoints/{plugin.inventory_endpoint['id']}/")
    assert hv["backend_id"] == block["endpoints"][str(hv_pk)]["backend_id"]
    assert inv["pushed_credential_fingerprint"].startswith("v1:")
    assert block["scope"] == str(hv["backend_id"])

    # local reconciliation read cluster and nodes through the job's backend
    assert block["reconciliation"]["ok"] is True
    assert block["reconciliation"]["parts"]["nodes"]["endpoints"][str(hv["backend_id"])]["items"] >= 1
    # ... and the demo cluster's firewall, datacenter options and templates (SPEC 4.5 step 7)
    parts = block["reconciliation"]["parts"]
    assert parts["firewall"]["endpoints"][str(hv["backend_id"])] == {
        "ok": True,
        "enabled": True,
        "policy_in": "DROP",
        "policy_out": "ACCEPT",
        "groups": 2,
        "group_rules": 3,
        "rules": 3,
        "aliases": 2,
        "ipsets": 1,
        "ipset_entries": 2,
    }
    assert {"console", "keyboard", "migration"} <= set(
        parts["datacenter"]["endpoints"][str(hv["backend_id"])]["option_keys"]
    )
    templates = parts["templates"]["endpoints"][str(hv["backend_id"])]
    assert templates["vmids"] == [118, 119] and templates["by_type"] == {"qemu": 2}
    assert set(templates["missing"]) <= {118, 119} and templates["extra"] == []

    # per-endpoint runtime breakdown and progress in the job log
    breakdown = block["runtime"]["endpoints"][str(hv_pk)]
    assert breakdown["backend_id"] == hv["backend_id"] and set(breakdown["stages_ms"]) == set(STAGES)
    assert all(isinstance(ms, int) and ms >= 0 for ms in breakdown["stages_ms"].values())
    log = messages(job)
    assert any(m.startswith("stage 13/13 backup-routines: started") for m in log)
    assert any(m.startswith("stage virtual-machines: ok") for m in log)
    assert_no_secrets(job, plugin.planted)

    # every call carried the key header and no stage call went anywhere but the stream routes
    stage_calls = [h for h in faults.hits if h.path.split("?")[0].endswith("/create/stream")]
    assert len(stage_calls) == 13
    assert all(h.headers.get("X-Service-API-Key") for h in stage_calls)
    assert all(f"hv_endpoint_ids={hv['backend_id']}" in h.path for h in stage_calls)

    vms = netbox.count("virtualization/virtual-machines/", tag="hvsync")
    devices = netbox.count("dcim/devices/", tag="hvsync")
    assert vms > 0 and devices > 0

    # a rerun converges: every stage ok, nothing created, updated or deleted, and NetBox's changelog
    # has no new row (nothing was written at all)
    changes_before = netbox.count("core/object-changes/")
    again = netbox.run_sync()
    assert again["status"]["value"] == "completed", again["error"]
    assert all(s["ok"] and s["status"] == 200 for s in again["data"]["sync"]["stages"])
    assert netbox.count("virtualization/virtual-machines/", tag="hvsync") == vms
    assert netbox.count("dcim/devices/", tag="hvsync") == devices
    written = {
        verb: sum((s.get("summary") or {}).get(verb, 0) for s in again["data"]["sync"]["stages"])
        for verb in ("created", "updated", "deleted", "failed")
    }
    assert written == {"created": 0, "updated": 0, "deleted": 0, "failed": 0}
    assert netbox.count("core/object-changes/") == changes_before
    # after the first sync every Proxmox template is a NetBox VM synced as a template
    rerun = again["data"]["sync"]["reconciliation"]
    assert rerun["ok"] is True
    templates = rerun["parts"]["templates"]["endpoints"][str(hv["backend_id"])]
    assert (templates["missing"], templates["extra"]) == ([], [])
    assert not [m for m in messages(again) if m.startswith("local reconciliation: templates of")]
    # the backend id was stable: the second preflight PUT the same row instead of POSTing a new one
    assert netbox.get(f"{PLUGIN_API}hv-endpoints/{hv_pk}/")["backend_id"] == hv["backend_id"]


def test_sync_types_run_only_the_selected_stages_in_pipeline_order(netbox: NetBox, plugin: Plugin) -> None:
    job = netbox.run_sync(sync_types=["vm-disks", "devices"])
    assert job["status"]["value"] == "completed", job["error"]
    assert [s["stage"] for s in job["data"]["sync"]["stages"]] == ["devices", "vm-disks"]
