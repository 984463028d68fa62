"""Selected-objects jobs for storage, backups, snapshots and task history (SPEC 4.5), and the REST shape
that schedules them (`object_ids` with `batch_object_type`), against real NetBox.

The backend is faked at the job's transport seam (as in test_local_reconciliation.py) and the preflight
is stubbed (covered by test_orchestration_jobs.py); the pinning, the per-object queries, the job's data,
log and failure are real. tests/orchestration/test_selected_kinds.py runs the same against the real
backend.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from backend_fakes import BACKEND_ID, FakeBackend, FakeResponse
from support import API

pytestmark = pytest.mark.django_db

STORAGE = "netbox_hvsync.hvstorage"
BACKUP = "netbox_hvsync.hvbackup"
SNAPSHOT = "netbox_hvsync.hvsnapshot"
TASK = "netbox_hvsync.hvtaskhistory"
UPID = "UPID:pve1:00000FA2:01E3943E:695469D8:qmstart:100:root@pam:"
NODE_UPID = "UPID:pve1:00000FA5:01E3F10B:695470E0:aptupdate::root@pam:"


class IndividualBackend(FakeBackend):
    """Also answers `POST /sync/individual/<kind>`: ok, or the status set in `refuse` for a query value."""

    def __init__(self, hv_row: dict[str, Any]) -> None:
        super().__init__(hv_row)
        self.individual: list[tuple[str, dict[str, str]]] = []
        self.refuse: dict[str, tuple[int, str]] = {}

    def request(self, method: str, url: str, **kwargs: Any) -> FakeResponse:
        parts = urlsplit(url)
        if method == "POST" and parts.path.startswith("/sync/individual/"):
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            self.individual.append((parts.path.rsplit("/", 1)[1], query))
            for value in query.values():
                if value in self.refuse:
                    status, detail = self.refuse[value]
                    return FakeResponse(status, {"ok": False, "detail": detail})
            summary = {"created": 1, "updated": 0, "unchanged": 2, "deleted": 0, "failed": 0}
            return FakeResponse(200, {"ok": True, "summary": summary})
        return super().request(method, url, **kwargs)


@pytest.fixture
def world(hv, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    from netbox_hvsync import models
    from netbox_hvsync.backend.push import hv_record
    from netbox_hvsync.backend.resolution import ResolvedBackend
    from netbox_hvsync.rules.transport import BackendContext
    from netbox_hvsync.sync import runner as sync_runner

    record = hv_record(hv["endpoint"])
    backend = IndividualBackend(
        {
            "id": BACKEND_ID,
            "name": f"pve-a {record.identity_suffix}",
            "domain": record.domain,
            "port": record.port,
        }
    )
    row = SimpleNamespace(pk=1, name="fake-backend")
    resolved = ResolvedBackend(row, BackendContext("http://backend.invalid", "k" * 40, 1), backend)  # type: ignore[arg-type]
    monkeypatch.setattr(sync_runner, "resolve_backend", lambda selected=None: resolved)
    monkeypatch.setattr(sync_runner.SyncRun, "preflight", lambda self, *a: SimpleNamespace(hint=""))
    vm1 = hv["vm1"]
    models.SyncedVirtualMachine.objects.create(
        endpoint=hv["endpoint"], virtual_machine=vm1, node_name="pve1", vmid=100
    )
    started = datetime(2026, 1, 1, tzinfo=UTC)
    extra = {
        "backup": models.HvBackup.objects.create(
            storage=hv["local"], volid="local:backup/vzdump-qemu-100-2026_01_01-00_00_00.vma.zst", vmid=100
        ),
        "snapshot": models.HvSnapshot.objects.create(virtual_machine=vm1, name="before-upgrade"),
        "orphan_snapshot": models.HvSnapshot.objects.create(virtual_machine=hv["vm2"], name="x"),
        "task": models.HvTaskHistory.objects.create(
            endpoint=hv["endpoint"],
            upid=UPID,
            task_type="qmstart",
            vmid=100,
            virtual_machine=vm1,
            starttime=started,
        ),
        "node_task": models.HvTaskHistory.objects.create(
            endpoint=hv["endpoint"], upid=NODE_UPID, task_type="aptupdate", starttime=started
        ),
    }
    return SimpleNamespace(backend=backend, **hv, **extra)


def run(world: SimpleNamespace, label: str, ids: list[int]) -> Any:
    from core.models import Job
    from netbox_hvsync.jobs import SyncJob, enqueue_sync

    queued = enqueue_sync(
        mode="selected", batch_object_type=label, object_ids=ids, hv_endpoint_ids=[world.endpoint.pk]
    )
    SyncJob.handle(queued, sync=queued.data["sync"])
    return Job.objects.get(pk=queued.pk)


def test_each_kind_is_one_pinned_call_with_the_query_that_names_it(world):
    scope = {"hv_endpoint_ids": str(BACKEND_ID)}
    cases = [
        (
            STORAGE,
            [world.local.pk, world.pbs.pk],
            [("storage", {"storage": "local"}), ("storage", {"storage": "pbs"})],
        ),
        (BACKUP, [world.backup.pk], [("backup", {"vmid": "100", "volid": world.backup.volid})]),
        (SNAPSHOT, [world.snapshot.pk], [("snapshot", {"vmid": "100", "name": "before-upgrade"})]),
        (
            TASK,
            [world.task.pk, world.node_task.pk],
            [("task-history", {"upid": UPID}), ("task-history", {"upid": NODE_UPID})],
        ),
    ]
    for label, ids, calls in cases:
        world.backend.individual.clear()
        job = run(world, label, ids)
        block = job.data["sync"]
        assert job.status == "completed", (label, job.error, block.get("objects"))
        assert world.backend.individual == [(kind, {**scope, **query}) for kind, query in calls]
        assert block["batch_object_type"] == label and block["object_ids"] == ids and block["vm_ids"] == []
        assert block["stages"] == [] and block["scope"] == str(BACKEND_ID)
        assert [(o["ok"], o["status"], o["summary"]["created"]) for o in block["objects"]] == [
            (True, 200, 1)
        ] * len(ids)
    objects = [o["object"] for o in job.data["sync"]["objects"]]
    assert objects == [
        f"task_history {world.task.pk} ({UPID})",
        f"task_history {world.node_task.pk} ({NODE_UPID})",
    ]


def test_failed_objects_are_named_and_fail_the_job_the_rest_still_run(world):
    world.backend.refuse["pbs"] = (404, "storage 'pbs' not found in scope")
    job = run(world, STORAGE, [world.local.pk, world.pbs.pk])
    assert job.status == "failed"
    assert (
        job.error.startswith("1 selected object(s) failed:")
        and f"storage {world.pbs.pk} (pbs): HTTP 404" in job.error
    )
    assert "not found in scope" in job.error
    objects = job.data["sync"]["objects"]
    assert [(o["ok"], o["status"]) for o in objects] == [(True, 200), (False, 404)]
    assert [k for k, _ in world.backend.individual] == ["storage", "storage"]
    assert any("selected object failed" in e["message"] for e in job.log_entries)
    # a snapshot whose VM hvsync never synced cannot be asked for: named, no call made
    world.backend.individual.clear()
    job = run(world, SNAPSHOT, [world.orphan_snapshot.pk, world.snapshot.pk])
    assert job.status == "failed" and "db-1@x" in job.error and "never synced" in job.error
    assert world.backend.individual == [
        ("snapshot", {"hv_endpoint_ids": str(BACKEND_ID), "vmid": "100", "name": "before-upgrade"})
    ]


def test_objects_are_pinned_to_the_owner_of_their_cluster(world):
    """SPEC 4.5 item 4: an owner outside the job's scope and an ambiguous owner fail that object (424)."""
    from netbox_hvsync import models
    from virtualization.models import Cluster

    foreign = Cluster.objects.create(name="pve-b-cluster", type=world.cluster.type)
    world.other_cluster.cluster = foreign
    world.other_cluster.save()
    remote = models.HvStorage.objects.create(cluster=world.other_cluster, name="remote", storage_type="dir")
    remote_backup = models.HvBackup.objects.create(
        storage=remote, volid="remote:backup/vzdump-lxc-200-x.tar.zst", vmid=200
    )
    job = run(world, BACKUP, [remote_backup.pk, world.backup.pk])
    assert job.status == "failed"
    assert f"owning hv endpoint {world.other.pk} is not in this job's resolved endpoint scope" in job.error
    assert [o["status"] for o in job.data["sync"]["objects"]] == [424, 200]
    assert [k for k, _ in world.backend.individual] == ["backup"]
    # two endpoints claim the same NetBox cluster: the storage's owner is ambiguous
    models.HvCluster.objects.create(endpoint=world.other, name="claims-a-too", cluster=world.cluster)
    world.backend.individual.clear()
    job = run(world, STORAGE, [world.local.pk])
    assert job.status == "failed" and "owner ambiguous" in job.error
    assert (
        f"({world.endpoint.pk}, {world.other.pk})" in job.error
        or f"{world.endpoint.pk}, {world.other.pk}" in job.error
    )
    assert world.backend.individual == []


def test_schedule_accepts_object_ids_for_every_kind(api, world):
    from netbox_hvsync.sync.selected import SELECTED_TYPES

    assert set(SELECTED_TYPES) == {"virtualization.virtualmachine", STORAGE, BACKUP, SNAPSHOT, TASK}
    for label, pk in [
        (STORAGE, world.local.pk),
        (BACKUP, world.backup.pk),
        (SNAPSHOT, world.snapshot.pk),
        (TASK, world.task.pk),
    ]:
        r = api.post(
            API + "sync/schedule/",
            {"mode": "selected", "batch_object_type": label, "object_ids": [pk, pk]},
            format="json",
        )
        assert r.status_code == 201, r.content
        block = r.json()["data"]["sync"]
        assert (block["batch_object_type"], block["object_ids"], block["vm_ids"]) == (label, [pk], [])
    # VMs: vm_ids as before, or object_ids (stored in vm_ids, which the sync-job filters read)
    r = api.post(
        API + "sync/schedule/",
        {
            "mode": "selected",
            "batch_object_type": "virtualization.virtualmachine",
            "object_ids": [world.vm1.pk],
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    assert (r.json()["data"]["sync"]["vm_ids"], r.json()["data"]["sync"]["object_ids"]) == (
        [world.vm1.pk],
        [],
    )


@pytest.mark.parametrize(
    ("body", "field", "text"),
    [
        ({"mode": "selected", "batch_object_type": STORAGE}, "object_ids", "needs at least one id"),
        ({"mode": "selected", "batch_object_type": STORAGE, "object_ids": [987654]}, "object_ids", "Unknown"),
        ({"mode": "selected", "batch_object_type": BACKUP, "object_ids": [0]}, "object_ids", ""),
        ({"mode": "selected", "batch_object_type": SNAPSHOT, "vm_ids": ["VM"]}, "vm_ids", ""),
        (
            {"mode": "selected", "batch_object_type": "dcim.device", "object_ids": [1]},
            "batch_object_type",
            "",
        ),
        ({"mode": "selected", "object_ids": [987654]}, "object_ids", "Unknown"),
        ({"object_ids": ["STORAGE"]}, "object_ids", "selected-objects mode"),
    ],
)
def test_schedule_rejects_bad_object_selections_naming_the_field(api, world, body, field, text):
    body = {
        k: [world.local.pk if v == "STORAGE" else world.vm1.pk if v == "VM" else v for v in val]
        if isinstance(val, list)
        else val
        for k, val in body.items()
    }
    r = api.post(API + "sync/schedule/", body, format="json")
    assert r.status_code == 400, r.content
    assert field in r.json(), r.json()
    assert text in str(r.json()[field])
