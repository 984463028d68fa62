"""A sync job on NetBox's queue really syncs: preflight pushes, scope, reconciliation, all 13 stages."""

from __future__ import annotations

from typing import Any

from conftest import PLUGIN_API, NetBox, Plugin, assert_no_secrets
from fault_proxy import FaultProxy

STAGES = [
    "devices",
    "storage",
    "virtual-machines",
    "task-history",
    "vm-disks",
    "vm-backups",
    "vm-snapshots",
    "network-interfaces",
    "vm-interfaces",
    "ip-addresses",
    "sdn",
    "replications",
    "backup-routines",
]


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

    # a rerun converges: no new objects, nothing created
    again = netbox.run_sync()
    assert again["status"]["value"] == "completed", again["error"]
    assert netbox.count("virtualization/virtual-machines/", tag="hvsync") == vms
    assert netbox.count("dcim/devices/", tag="hvsync") == devices
    created = sum((s.get("summary") or {}).get("created", 0) for s in again["data"]["sync"]["stages"])
    assert created == 0
    # the backend id was stable: the second preflight PUT the same row instead of POSTing a new one
    assert netbox.get(f"{PLUGIN_API}hv-endpoints/{hv_pk}/")["backend_id"] == hv["backend_id"]


def test_sync_types_run_only_the_selected_stages_in_pipeline_order(netbox: NetBox, plugin: Plugin) -> None:
    job = netbox.run_sync(sync_types=["vm-disks", "devices"])
    assert job["status"]["value"] == "completed", job["error"]
    assert [s["stage"] for s in job["data"]["sync"]["stages"]] == ["devices", "vm-disks"]
