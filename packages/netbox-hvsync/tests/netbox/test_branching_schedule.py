"""`use_branch` on POST sync/schedule/: recorded in the job's sync block, refused where it cannot apply."""

from __future__ import annotations

import pytest
from support import API

pytestmark = pytest.mark.django_db


def test_use_branch_is_recorded_in_the_job_and_defaults_to_false(api):
    branched = api.post(
        API + "sync/schedule/", {"sync_types": ["devices"], "use_branch": True}, format="json"
    )
    assert branched.status_code == 201, branched.content
    assert branched.json()["data"]["sync"]["use_branch"] is True
    assert branched.json()["data"]["sync"]["sync_types"] == ["devices"]
    plain = api.post(API + "sync/schedule/", {}, format="json")
    assert plain.status_code == 201 and plain.json()["data"]["sync"]["use_branch"] is False


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"use_branch": "perhaps"}, "valid boolean"),
        ({"use_branch": True, "mode": "selected", "vm_ids": [1]}, "selected-objects mode is not branched"),
    ],
)
def test_bad_use_branch_is_a_400_naming_the_field_and_queues_nothing(api, netbox_objects, body, message):
    from core.models import Job

    if "vm_ids" in body:
        body = {**body, "vm_ids": [netbox_objects["vm1"].pk]}
    before = Job.objects.count()
    response = api.post(API + "sync/schedule/", body, format="json")
    assert response.status_code == 400, response.content
    assert message in " ".join(response.json()["use_branch"])
    assert Job.objects.count() == before
