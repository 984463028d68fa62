"""SyncJob.run() blocking paths in-process (SPEC 4.5 B1/B2, 7.3): the job fails with the named code, the
job row carries the same message as the raised error, and job data is persisted before the raise."""

from __future__ import annotations

import pytest
from support import CANDIDATE

pytestmark = pytest.mark.django_db


def run(**kwargs):
    from core.models import Job
    from netbox_hvsync.jobs import SyncJob, enqueue_sync

    queued = enqueue_sync(**kwargs)
    SyncJob.handle(queued, sync=queued.data["sync"])
    return Job.objects.get(pk=queued.pk)


def test_no_backend_is_b1_and_job_data_survives_the_raise(hv):
    job = run(sync_types=["storage"], hv_endpoint_ids=[hv["endpoint"].pk])
    assert job.status == "failed"
    assert job.error.startswith("Preflight blocked the sync: B1: no usable backend endpoint")
    block = job.data["sync"]
    assert block["errors"] == [job.error] and block["preflight"]["blocked"] == "B1"
    assert block["stages"] == [] and block["sync_types"] == ["storage"]
    assert any(entry["message"] == job.error for entry in job.log_entries)


def test_b1_names_the_pinned_backend_endpoint(db):
    from netbox_hvsync.models import BackendEndpoint

    off = BackendEndpoint.objects.create(name="off", url="http://127.0.0.1:9", enabled=False)
    job = run(backend_endpoint_id=off.pk)
    assert job.status == "failed" and f"selected backend endpoint id {off.pk}" in job.error


def test_no_enabled_inventory_endpoint_is_b2(backend):
    from netbox_hvsync.models import BackendEndpoint, InventoryEndpoint

    row = BackendEndpoint(name="b", url=backend)
    row.token = CANDIDATE
    row.save()
    InventoryEndpoint.objects.create(name="nb", domain="nb.example", token_key="k", enabled=False)
    job = run()
    assert job.status == "failed" and job.error.startswith("Preflight blocked the sync: B2:")
    assert CANDIDATE not in str(job.data) and CANDIDATE not in job.error
