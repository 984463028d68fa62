"""Local reconciliation of a sync job (SPEC 1.B.3, 4.5 step 7, 3.3): cluster, nodes, firewall, datacenter
options and templates, read through the job's backend with its backend ids, against real NetBox.

The backend is faked at the job's transport seam (as in test_branching_jobs.py) and the preflight is
stubbed (covered by test_orchestration_jobs.py and the orchestration suite); the job itself, its data,
its log and the NetBox side of the template comparison are real.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from backend_fakes import BACKEND_ID, FakeBackend, FakeResponse

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(hv, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The conftest's endpoint `pve-a` (backend id 7 at the fake backend), preflight stubbed."""
    from netbox_hvsync.backend.push import hv_record
    from netbox_hvsync.backend.resolution import ResolvedBackend
    from netbox_hvsync.rules.transport import BackendContext
    from netbox_hvsync.sync import runner as sync_runner

    record = hv_record(hv["endpoint"])
    hv_row = {
        "id": BACKEND_ID,
        "name": f"pve-a {record.identity_suffix}",
        "domain": record.domain,
        "port": record.port,
    }
    backend = FakeBackend(hv_row)
    row = SimpleNamespace(pk=1, name="fake-backend")
    resolved = ResolvedBackend(row, BackendContext("http://backend.invalid", "k" * 40, 1), backend)  # type: ignore[arg-type]
    monkeypatch.setattr(sync_runner, "resolve_backend", lambda selected=None: resolved)
    monkeypatch.setattr(sync_runner.SyncRun, "preflight", lambda self, *a: SimpleNamespace(hint=""))
    return SimpleNamespace(backend=backend, resolved=resolved, **hv)


def run(world: SimpleNamespace) -> Any:
    from core.models import Job
    from netbox_hvsync.jobs import SyncJob, enqueue_sync

    queued = enqueue_sync(sync_types=["devices"], hv_endpoint_ids=[world.endpoint.pk])
    SyncJob.handle(queued, sync=queued.data["sync"])
    return Job.objects.get(pk=queued.pk)


def log(job: Any) -> list[tuple[str, str]]:
    return [(entry["level"], entry["message"]) for entry in job.log_entries]


def synced_template(world: SimpleNamespace, name: str, vmid: int, *, flag: bool, tag: bool) -> None:
    from extras.models import Tag
    from netbox_hvsync.models import SyncedVirtualMachine
    from virtualization.models import VirtualMachine

    vm = VirtualMachine.objects.create(name=name, cluster=world.cluster)
    if tag:
        vm.tags.add(Tag.objects.get_or_create(name="pve-template", slug="pve-template")[0])
    SyncedVirtualMachine.objects.create(
        endpoint=world.endpoint, virtual_machine=vm, node_name="pve1", vmid=vmid, is_template=flag
    )


def test_every_part_is_recorded_per_endpoint_with_the_backend_ids(world):
    synced_template(world, "ct-tpl", 900, flag=True, tag=False)
    synced_template(world, "vm-tpl", 901, flag=False, tag=True)  # the tag alone counts
    job = run(world)

    assert job.status == "completed", job.error
    rec = job.data["sync"]["reconciliation"]
    assert rec["ok"] is True and rec["failed_parts"] == [] and rec["duration_ms"] >= 0
    assert set(rec["parts"]) == {"cluster", "nodes", "firewall", "datacenter", "templates"}  # jsonb: no order
    key = str(BACKEND_ID)
    assert rec["parts"]["cluster"]["endpoints"][key] == {"ok": True, "items": 2}
    assert rec["parts"]["nodes"]["endpoints"][key] == {"ok": True, "items": 1}
    assert rec["parts"]["firewall"] == {
        "ok": True,
        "status": 200,
        "endpoints": {
            key: {
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
        },
    }
    assert rec["parts"]["datacenter"]["endpoints"][key] == {
        "ok": True,
        "option_keys": ["console", "keyboard", "mac_prefix"],
    }
    assert rec["parts"]["templates"]["endpoints"][key] == {
        "ok": True,
        "templates": 2,
        "vmids": [900, 901],
        "by_type": {"lxc": 1, "qemu": 1},
        "missing": [],
        "extra": [],
    }
    # every read carried the job's backend ids, never a URL
    assert [c[0] for c in world.backend.calls] == [
        "/hv/cluster/status",
        "/hv/nodes/",
        "/hv/cluster/firewall",
        "/hv/cluster/options",
        "/hv/templates",
    ]
    assert all(q == {"hv_endpoint_ids": [key]} for _, q in world.backend.calls)
    assert "config" not in json.dumps(rec)  # summaries only, not the raw Proxmox answers
    # no reconciliation warning (the test NetBox runs no RQ worker: the queue fallback warns, test_sync_queue.py)
    queue_warning = job.data["sync"]["queue"]["warning"] or ""
    assert not [m for level, m in log(job) if level == "warning" and m != queue_warning]
    assert any(
        "local reconciliation (cluster, nodes, firewall, datacenter, templates) done" in m
        for _, m in log(job)
    )


def test_a_failed_part_is_a_warning_and_classified_unsuccessful(world):
    world.backend.answers["/hv/cluster/firewall"] = FakeResponse(
        502,
        {
            "detail": "no hv endpoint answered: hv endpoint 7 'pve-a': authentication refused",
            "endpoints": [
                {
                    "endpoint_id": BACKEND_ID,
                    "endpoint_name": "pve-a",
                    "ok": False,
                    "data": None,
                    "error": {
                        "kind": "auth",
                        "status": 403,
                        "detail": "hv endpoint 7 'pve-a': Permission check failed",
                    },
                }
            ],
        },
    )
    job = run(world)

    # not a stop: the stages ran and the job completed, with the warning recorded
    assert job.status == "completed", job.error
    block = job.data["sync"]
    assert [s["stage"] for s in block["stages"]] == ["devices"]
    rec = block["reconciliation"]
    assert rec["ok"] is False and rec["failed_parts"] == ["firewall"]
    fw = rec["parts"]["firewall"]
    assert fw["ok"] is False and fw["status"] == 502 and "no hv endpoint answered" in fw["error"]
    assert fw["endpoints"][str(BACKEND_ID)] == {
        "ok": False,
        "error": {"kind": "auth", "status": 403, "detail": "hv endpoint 7 'pve-a': Permission check failed"},
    }
    assert all(rec["parts"][p]["ok"] for p in ("cluster", "nodes", "datacenter", "templates"))
    message = "local reconciliation was unsuccessful for some endpoint(s): firewall"
    assert message in block["warnings"] and ("warning", message) in log(job)


def test_unreachable_backend_for_a_part_and_the_classification(world):
    """SPEC 3.3: the value `reconcile_locally` returns is what a branched job hands `finish_branch`."""
    from netbox_hvsync.rules.transport import TransportError
    from netbox_hvsync.sync.runner import SyncRun

    world.backend.answers["/hv/templates"] = TransportError("read timed out", kind="timeout")
    job = run(world)
    rec = job.data["sync"]["reconciliation"]
    assert rec["ok"] is False and rec["failed_parts"] == ["templates"]
    assert rec["parts"]["templates"] == {"ok": False, "error": "timeout: backend unreachable"}

    sync_run = SyncRun(job, logging.getLogger("test"), {"endpoints": {}})
    assert sync_run.reconcile_locally(world.resolved, str(BACKEND_ID)) is False
    del world.backend.answers["/hv/templates"]
    assert sync_run.reconcile_locally(world.resolved, str(BACKEND_ID)) is True


def test_template_comparison_reports_missing_and_extra_without_writing(world):
    from netbox_hvsync.models import SyncedVirtualMachine
    from virtualization.models import VirtualMachine

    synced_template(world, "vm-tpl", 901, flag=True, tag=True)
    synced_template(world, "old-tpl", 950, flag=True, tag=False)  # no longer a template in Proxmox
    synced_template(world, "plain", 900, flag=False, tag=False)  # 900 is synced, but not as a template
    before = (VirtualMachine.objects.count(), SyncedVirtualMachine.objects.count())
    job = run(world)

    assert job.status == "completed", job.error  # a difference is a warning, not a failure
    rec = job.data["sync"]["reconciliation"]
    assert rec["ok"] is True
    entry = rec["parts"]["templates"]["endpoints"][str(BACKEND_ID)]
    assert entry["missing"] == [900] and entry["extra"] == [950]
    warnings = [m for level, m in log(job) if level == "warning"]
    assert (
        "local reconciliation: templates of pve-a: 1 in Proxmox not synced to NetBox as templates (900 ct-tpl)"
        in warnings
    )
    assert (
        "local reconciliation: templates of pve-a: 1 synced to NetBox as templates but not templates in "
        "Proxmox (950)" in warnings
    )
    assert (VirtualMachine.objects.count(), SyncedVirtualMachine.objects.count()) == before  # nothing written
    assert not SyncedVirtualMachine.objects.get(vmid=900).is_template


def test_other_endpoints_templates_do_not_count(world):
    """A template synced for another Proxmox endpoint does not satisfy this endpoint's template."""
    from netbox_hvsync.models import SyncedVirtualMachine
    from virtualization.models import VirtualMachine

    vm = VirtualMachine.objects.create(name="elsewhere", cluster=world.cluster)
    SyncedVirtualMachine.objects.create(endpoint=world.other, virtual_machine=vm, vmid=901, is_template=True)
    job = run(world)
    entry = job.data["sync"]["reconciliation"]["parts"]["templates"]["endpoints"][str(BACKEND_ID)]
    assert entry["missing"] == [900, 901] and entry["extra"] == []
