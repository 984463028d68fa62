"""SPEC 3.3 "Branch handling at the end of a sync job", in-process against real NetBox and real
netbox-branching: each job creates and provisions a real Branch (a real PostgreSQL schema), the merge and
archive are netbox-branching's own, and every status the tests assert is re-read from the database.

What is faked: the hvsync backend, at the job's transport seam (`resolve_backend()` hands the job a fake
transport) and the preflight (covered by test_orchestration_jobs.py and the orchestration suite). The
fake backend does what the real one does with `inventory_branch_schema_id`: it writes into NetBox under
that branch (here: `activate_branch()` on the branch named by the schema id, inside NetBox's own change
tracking, as a request carrying `X-NetBox-Branch` would).

Provisioning commits a schema and uses separate connections, so these tests are transactional
(pytest-django runs them after the rolled-back ones and flushes the database after each).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from backend_fakes import BACKEND_ID, FakeResponse, complete_frame

pytestmark = pytest.mark.django_db(transaction=True)


class FakeBackend:
    """The backend's answers the job reads, plus NetBox writes made under the requested branch."""

    def __init__(self, hv_row: dict[str, Any], user: Any, *, reconcile_ok: bool = True) -> None:
        from netbox_hvsync.sync.runner import RECONCILE_ROUTES, STAGE_ROUTES

        self.stage_of = {path: stage for stage, path in STAGE_ROUTES.items()}
        self.reconcile_paths = set(RECONCILE_ROUTES.values())
        self.hv_row = hv_row
        self.user = user
        self.reconcile_ok = reconcile_ok
        self.writers: dict[str, Callable[[], int]] = {}
        self.streams: list[tuple[str, dict[str, str]]] = []

    def request(self, method: str, url: str, **_: Any) -> FakeResponse:
        path = urlsplit(url).path
        if method == "GET" and path == "/hv/endpoints":
            return FakeResponse(200, [self.hv_row])
        if method == "GET" and path in self.reconcile_paths:
            entry = {"endpoint_id": BACKEND_ID, "ok": self.reconcile_ok, "data": [{"name": "pve1"}]}
            return FakeResponse(200, {"endpoints": [entry]})
        return FakeResponse(404, {"detail": f"not faked: {method} {path}"})

    def open_stream(self, url: str, *, headers: Any, params: dict[str, str]) -> FakeResponse:
        stage = self.stage_of[urlsplit(url).path]
        self.streams.append((stage, dict(params)))
        created = 0
        if writer := self.writers.get(stage):
            created = self.write_as_backend(params.get("inventory_branch_schema_id"), writer)
        return FakeResponse(200, lines=complete_frame(stage, created), headers={})

    def write_as_backend(self, schema_id: str | None, writer: Callable[[], int]) -> int:
        """A NetBox REST write with `X-NetBox-Branch: <schema_id>`: change-tracked, in that branch."""
        from django.test import RequestFactory
        from netbox.context_managers import event_tracking
        from netbox_branching.models import Branch
        from netbox_branching.utilities import activate_branch

        request = RequestFactory().get("/api/")
        request.id = uuid.uuid4()
        request.user = self.user
        branch = Branch.objects.get(schema_id=schema_id) if schema_id else None
        with activate_branch(branch), event_tracking(request):
            return writer()

    def close(self) -> None:
        return None


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A user, one Proxmox endpoint, and the job's backend replaced by FakeBackend."""
    from netbox_hvsync.backend.push import hv_record
    from netbox_hvsync.backend.resolution import ResolvedBackend
    from netbox_hvsync.models import HvEndpoint
    from netbox_hvsync.rules.transport import BackendContext
    from netbox_hvsync.sync import runner as sync_runner
    from users.models import User

    user = User.objects.create_user(username="branch-admin", password="pw", is_superuser=True)
    endpoint = HvEndpoint(name="pve-a", domain="pve-a.example.net", username="root@pam", token_name="hvsync")
    endpoint.token_value = "pve-a-token-secret-0001"
    endpoint.save()
    record = hv_record(endpoint)
    hv_row = {
        "id": BACKEND_ID,
        "name": f"pve-a {record.identity_suffix}",
        "domain": record.domain,
        "port": record.port,
    }
    backend = FakeBackend(hv_row, user)
    row = SimpleNamespace(pk=1, name="fake-backend")
    resolved = ResolvedBackend(row, BackendContext("http://backend.invalid", "k" * 40, 1), backend)  # type: ignore[arg-type]
    monkeypatch.setattr(sync_runner, "resolve_backend", lambda selected=None: resolved)
    monkeypatch.setattr(sync_runner.SyncRun, "preflight", lambda self, *a: SimpleNamespace(hint=""))
    return SimpleNamespace(user=user, endpoint=endpoint, backend=backend)


def run_branched(world: SimpleNamespace, sync_types: list[str]) -> Any:
    from core.models import Job
    from netbox_hvsync.jobs import SyncJob, enqueue_sync

    queued = enqueue_sync(
        user=world.user, sync_types=sync_types, hv_endpoint_ids=[world.endpoint.pk], use_branch=True
    )
    SyncJob.handle(queued, sync=queued.data["sync"])
    return Job.objects.get(pk=queued.pk)


def job_branch(job: Any) -> Any:
    from netbox_branching.models import Branch

    info = job.data["sync"]["branch"]
    branch = Branch.objects.get(pk=info["id"])  # a fresh row: the database's word, not the job's
    assert branch.name == info["name"] == f"hvsync-sync-{job.data['sync']['run_id']}"
    assert branch.schema_id == info["schema_id"]
    return branch


def schema_exists(branch: Any) -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [branch.schema_name])
        return cursor.fetchone() is not None


def log_messages(job: Any) -> list[str]:
    return [entry["message"] for entry in job.log_entries]


def test_branched_sync_writes_in_the_branch_and_the_merge_brings_it_to_main(world):
    from dcim.models import Site
    from netbox_branching.utilities import activate_branch

    in_main_before_merge: list[bool] = []

    def write_site() -> int:
        Site.objects.create(name="branched-site", slug="branched-site")
        return 1

    def check_main() -> int:  # a later stage: the site is in the branch, main does not have it yet
        with activate_branch(None):
            in_main_before_merge.append(Site.objects.filter(slug="branched-site").exists())
        return 0

    world.backend.writers = {"devices": write_site, "storage": check_main}
    job = run_branched(world, ["devices", "storage"])

    assert job.status == "completed", (job.error, log_messages(job))
    branch = job_branch(job)
    assert [stage for stage, _ in world.backend.streams] == ["devices", "storage"]
    assert all(p["inventory_branch_schema_id"] == branch.schema_id for _, p in world.backend.streams)
    assert all(p["hv_endpoint_ids"] == str(BACKEND_ID) for _, p in world.backend.streams)
    assert in_main_before_merge == [False]
    assert Site.objects.filter(slug="branched-site").count() == 1  # merged into main
    assert branch.status == "merged" and branch.merged_by == world.user
    assert job.data["sync"]["branch"]["disposition"] == "merged"
    assert f"branch {branch.name} merged" in log_messages(job)


def test_branch_with_no_changes_is_archived_and_verified(world):
    job = run_branched(world, ["devices"])

    assert job.status == "completed", (job.error, log_messages(job))
    branch = job_branch(job)
    assert branch.status == "archived"
    assert not schema_exists(branch)  # archive deprovisions the schema
    assert job.data["sync"]["branch"]["disposition"] == "archived"
    assert f"no changes to merge; branch {branch.name} archived" in log_messages(job)
    assert world.backend.streams[0][1]["inventory_branch_schema_id"] == branch.schema_id


def test_archive_that_raises_is_recorded_not_a_crash(world, monkeypatch):
    """netbox-branching's archive raising (here: a database error dropping the schema) ends the job as
    failed with the branch left open and its disposition recorded, the exception named in the job log."""
    from django.db import DatabaseError
    from netbox_branching.models import Branch

    def broken_archive(self: Any, user: Any) -> None:
        raise DatabaseError("could not drop schema: lock timeout")

    monkeypatch.setattr(Branch, "archive", broken_archive)
    job = run_branched(world, ["devices"])

    assert job.status == "failed", (job.status, job.error)
    branch = job_branch(job)
    assert branch.status == "ready" and schema_exists(branch)  # nothing half-done: still open
    assert job.data["sync"]["branch"]["disposition"] == "left_open"
    assert job.data["sync"]["branch_disposition"] == "left_open"
    assert "archiving it raised DatabaseError: could not drop schema: lock timeout" in job.error
    assert job.error.endswith("branch left open")
    messages = log_messages(job)
    assert (
        f"archive of branch {branch.name} failed: DatabaseError: could not drop schema: lock timeout"
        in messages
    )
    assert job.error in messages


def test_merge_that_returns_with_changes_left_keeps_the_branch_open_and_fails_the_job(world, monkeypatch):
    from dcim.models import Site
    from netbox_branching.models import Branch

    merges: list[str] = []
    monkeypatch.setattr(Branch, "merge", lambda self, user, commit=True: merges.append(self.name))
    world.backend.writers = {"devices": lambda: Site.objects.create(name="kept", slug="kept") and 1}
    job = run_branched(world, ["devices"])

    assert job.status == "failed"
    branch = job_branch(job)
    assert merges == [branch.name]  # the merge path ran and returned normally
    assert branch.status == "ready" and schema_exists(branch)
    assert branch.get_unmerged_changes().count() >= 1
    assert not Site.objects.filter(slug="kept").exists()
    assert job.error == job.data["sync"]["errors"][-1]
    assert f"branch {branch.name} is 'ready' after merge with" in job.error and "left open" in job.error
    assert job.data["sync"]["branch"]["disposition"] == "left_open"


def test_unsuccessful_local_reconciliation_skips_the_merge_and_keeps_stage_evidence(world):
    from dcim.models import Site

    world.backend.reconcile_ok = False
    world.backend.writers = {"devices": lambda: Site.objects.create(name="unmerged", slug="unmerged") and 1}
    job = run_branched(world, ["devices", "storage"])

    assert job.status == "failed"
    branch = job_branch(job)
    block = job.data["sync"]
    assert block["reconciliation"]["ok"] is False
    assert [s["stage"] for s in block["stages"]] == ["devices", "storage"]  # evidence persisted
    assert block["stages"][0]["summary"]["created"] == 1
    assert block["branch_disposition"] == "left_open" and block["branch"]["name"] == branch.name
    assert block["branch"]["disposition"] == "left_open"
    assert "merge of branch" in job.error and "skipped" in job.error
    assert branch.status == "ready" and branch.merged_time is None
    assert not Site.objects.filter(slug="unmerged").exists()


def test_stale_in_memory_ready_is_not_authorization_for_the_merge(world):
    """The job's own Branch object still says READY; the row says otherwise, so no merge is attempted."""
    from dcim.models import Site
    from netbox_branching.models import Branch

    def write_then_flip() -> int:
        Site.objects.create(name="stale", slug="stale")
        Branch.objects.using("default").filter(name__startswith="hvsync-sync-").update(status="merging")
        return 1

    world.backend.writers = {"devices": write_then_flip}
    job = run_branched(world, ["devices"])

    assert job.status == "failed"
    branch = job_branch(job)
    assert branch.status == "merging" and branch.merged_time is None
    assert "is 'merging', not ready; merge not attempted" in job.error
    assert not Site.objects.filter(slug="stale").exists()


def test_failed_stage_leaves_the_branch_open_and_records_it(world):
    from dcim.models import Site

    def write_then_fail() -> int:
        Site.objects.create(name="half", slug="half")
        return 1

    world.backend.writers = {"devices": write_then_fail}
    original = world.backend.open_stream

    def failing_storage(url: str, *, headers: Any, params: dict[str, str]) -> FakeResponse:
        if url.endswith("/plugins/hvsync/storage/create/stream"):
            world.backend.streams.append(("storage", dict(params)))
            return FakeResponse(400, {"detail": "storage stage refused"})
        return original(url, headers=headers, params=params)

    world.backend.open_stream = failing_storage
    job = run_branched(world, ["devices", "storage"])

    assert job.status == "failed" and "storage stage refused" in job.error
    branch = job_branch(job)
    assert branch.status == "ready" and not Site.objects.filter(slug="half").exists()
    assert job.data["sync"]["branch"]["disposition"] == "left_open"
    assert any("merge of branch" in m and "skipped" in m for m in log_messages(job))


def test_a_branch_that_cannot_be_created_fails_the_job_before_any_stage(world):
    from core.models import Job
    from netbox_branching.models import Branch
    from netbox_hvsync.jobs import SyncJob, enqueue_sync

    queued = enqueue_sync(user=world.user, hv_endpoint_ids=[world.endpoint.pk], use_branch=True)
    taken = Branch(name=f"hvsync-sync-{queued.data['sync']['run_id']}")
    taken.save(provision=False)
    SyncJob.handle(queued, sync=queued.data["sync"])
    job = Job.objects.get(pk=queued.pk)

    assert job.status == "failed" and job.error.startswith("No sync stage ran: ")
    assert f"branch {taken.name} cannot be created" in job.error and "already exists" in job.error
    assert world.backend.streams == [] and job.data["sync"]["stages"] == []
    assert list(Branch.objects.values_list("pk", flat=True)) == [taken.pk]
