"""deletion-requests/ and apply-jobs/: read-only (405 on writes), with their filters."""

from __future__ import annotations

import pytest
from support import API

pytestmark = pytest.mark.django_db


@pytest.fixture
def records(hv, superuser):
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType
    from netbox_hvsync.models import ApplyJob, DeletionRequest

    approver = get_user_model().objects.create_user(username="second-pair-of-eyes")
    vm_type = ContentType.objects.get(app_label="virtualization", model="virtualmachine")
    pending = DeletionRequest.objects.create(
        endpoint=hv["endpoint"],
        object_type=vm_type,
        object_id=hv["vm1"].pk,
        object_repr="web-1",
        reason="decommissioned",
        requested_by=superuser,
    )
    approved = DeletionRequest.objects.create(
        object_type=vm_type,
        object_id=hv["vm2"].pk,
        object_repr="db-1",
        status="approved",
        requested_by=superuser,
        decided_by=approver,
    )
    job_a = ApplyJob.objects.create(
        endpoint=hv["endpoint"], status="completed", plan={"create": [1]}, result={"created": [1]}
    )
    job_b = ApplyJob.objects.create(endpoint=hv["other"], status="failed", error="conflict")
    return {"pending": pending, "approved": approved, "job_a": job_a, "job_b": job_b}


def test_deletion_requests_read_and_filter(api, records, superuser):
    rows = api.get(API + "deletion-requests/").json()["results"]
    assert {r["object_repr"] for r in rows} == {"web-1", "db-1"}
    pending = api.get(API + "deletion-requests/?status=pending").json()["results"]
    assert [r["id"] for r in pending] == [records["pending"].pk]
    row = api.get(f"{API}deletion-requests/{records['approved'].pk}/").json()
    assert row["status"] == {"value": "approved", "label": "Approved"}
    assert row["requested_by"]["username"] == superuser.username
    assert row["decided_by"]["username"] == "second-pair-of-eyes"
    assert row["object_type"] == "virtualization.virtualmachine" and row["decided_at"] is None


def test_four_eyes_rule(records, superuser):
    from django.core.exceptions import ValidationError

    request = records["pending"]
    request.status = "approved"
    request.decided_by = superuser  # the requester
    with pytest.raises(ValidationError, match="four eyes"):
        request.full_clean()


def test_apply_jobs_read_and_filter(api, records, hv):
    rows = api.get(f"{API}apply-jobs/?endpoint_id={hv['endpoint'].pk}").json()["results"]
    assert [r["id"] for r in rows] == [records["job_a"].pk]
    assert rows[0]["plan"] == {"create": [1]} and rows[0]["result"] == {"created": [1]}
    assert rows[0]["status"] == {"value": "completed", "label": "Completed"}
    failed = api.get(API + "apply-jobs/?status=failed").json()["results"]
    assert [r["error"] for r in failed] == ["conflict"]
    page = api.get(API + "apply-jobs/?limit=1").json()
    assert page["count"] == 2 and len(page["results"]) == 1


@pytest.mark.parametrize("resource", ["deletion-requests", "apply-jobs"])
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writes_are_405(api, records, resource, method):
    record = records["pending"] if resource == "deletion-requests" else records["job_a"]
    assert getattr(api, method)(f"{API}{resource}/", {}, format="json").status_code == 405
    if method != "post":
        assert getattr(api, method)(f"{API}{resource}/{record.pk}/", {}, format="json").status_code == 405
    assert api.head(f"{API}{resource}/").status_code == 200
    assert api.options(f"{API}{resource}/").status_code == 200


def test_user_without_view_permission_sees_nothing(records):
    from support import token_client
    from users.models import User

    client = token_client(User.objects.create_user(username="outsider"))
    for resource in ("deletion-requests", "apply-jobs", "backup-routines", "replications", "hv-endpoints"):
        assert client.get(f"{API}{resource}/").status_code == 403, resource
