"""A branched full sync (SPEC 3.3) on the real system: NetBox's worker creates and provisions a
netbox-branching branch, every stage request carries its schema id, the backend writes through
`X-NetBox-Branch`, and the merge at the end brings the new objects to main."""

from __future__ import annotations

from typing import Any

import httpx
from conftest import NetBox, Plugin, assert_no_secrets
from fault_proxy import FaultProxy


def messages(job: dict[str, Any]) -> list[str]:
    return [entry["message"] for entry in job.get("log_entries") or []]


def create_emulator_vm(emulator: Any) -> str:
    """A VM that no sync has seen yet, so it can only reach main through this job's branch."""
    headers = {"Authorization": f"PVEAPIToken={emulator.token_id}={emulator.token_secret}"}
    with httpx.Client(base_url=emulator.url + "/api2/json", headers=headers, verify=False, timeout=30) as c:
        node = c.get("/nodes").json()["data"][0]["node"]
        vmid = int(c.get("/cluster/nextid").json()["data"])
        name = f"branched-{vmid}"
        answer = c.post(f"/nodes/{node}/qemu", data={"vmid": vmid, "name": name, "memory": 1024})
        assert answer.status_code == 200, answer.text
    return name


def test_branched_full_sync_lands_in_the_branch_and_merges_to_main(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, emulator: Any
) -> None:
    name = create_emulator_vm(emulator)
    assert netbox.count("virtualization/virtual-machines/", name=name) == 0

    job = netbox.run_sync(timeout=900, use_branch=True)
    block = job["data"]["sync"]
    assert job["status"]["value"] == "completed", (job["error"], block.get("errors"), messages(job)[-8:])
    info = block["branch"]
    assert info["disposition"] == "merged" and block["branch_disposition"] == "merged"

    # the branch row, read back through netbox-branching's own API
    branch = netbox.get(f"plugins/branching/branches/{info['id']}/")
    assert branch["name"] == info["name"] and branch["schema_id"] == info["schema_id"]
    assert branch["status"]["value"] == "merged"

    # every stage request named the branch
    stage_calls = [h for h in faults.hits if h.path.split("?")[0].endswith("/create/stream")]
    assert len(stage_calls) == 13
    assert all(f"inventory_branch_schema_id={info['schema_id']}" in h.path for h in stage_calls)

    # the new VM was written in the branch (a ChangeDiff of this branch) and is in main after the merge
    found = netbox.get("virtualization/virtual-machines/", name=name)["results"]
    assert len(found) == 1
    diffs = netbox.get("plugins/branching/changes/", branch_id=info["id"], limit=1000)["results"]
    assert any(
        d["object_type"] == "virtualization.virtualmachine" and d["object_id"] == found[0]["id"]
        for d in diffs
    )
    assert f"branch {info['name']} merged" in messages(job)
    assert_no_secrets(job, plugin.planted)
