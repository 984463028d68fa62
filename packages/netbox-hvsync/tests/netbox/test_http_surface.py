"""The plugin's HTTP surface as any user meets it: writes to read-only resources are 405 whatever the
caller's permissions (SPEC 7.2), and the home page's links follow NetBox's BASE_PATH."""

from __future__ import annotations

import uuid

import pytest
from support import API, token_client

pytestmark = pytest.mark.django_db

READ_ONLY = ("deletion-requests", "apply-jobs", "sync-jobs")


@pytest.fixture
def rows(hv, superuser):
    from core.models import Job
    from django.contrib.contenttypes.models import ContentType
    from netbox_hvsync.models import ApplyJob, DeletionRequest

    vm_type = ContentType.objects.get(app_label="virtualization", model="virtualmachine")
    return {
        "deletion-requests": DeletionRequest.objects.create(
            object_type=vm_type, object_id=hv["vm1"].pk, object_repr="web-1", requested_by=superuser
        ),
        "apply-jobs": ApplyJob.objects.create(endpoint=hv["endpoint"], status="completed"),
        "sync-jobs": Job.objects.create(
            name="hvsync sync", status="completed", data={"sync": {}}, job_id=uuid.uuid4()
        ),
    }


def users():
    """No permission at all; view only; every permission on the three models (and core jobs); superuser."""
    from django.contrib.contenttypes.models import ContentType
    from users.models import ObjectPermission, User

    nobody = User.objects.create_user(username="nobody")
    viewer = User.objects.create_user(username="viewer")
    writer = User.objects.create_user(username="writer")
    admin = User.objects.create_user(username="root-405", is_superuser=True)
    types = [
        ContentType.objects.get(app_label="netbox_hvsync", model="deletionrequest"),
        ContentType.objects.get(app_label="netbox_hvsync", model="applyjob"),
        ContentType.objects.get(app_label="core", model="job"),
    ]
    for user, actions in ((viewer, ["view"]), (writer, ["view", "add", "change", "delete"])):
        permission = ObjectPermission.objects.create(name=f"p-{user.username}", actions=actions)
        permission.object_types.set(types)
        permission.users.add(user)
    return {"nobody": nobody, "viewer": viewer, "writer": writer, "superuser": admin}


@pytest.mark.parametrize("resource", READ_ONLY)
def test_writes_to_read_only_resources_are_405_for_every_user(rows, resource):
    from core.models import Job
    from netbox_hvsync.models import ApplyJob, DeletionRequest

    before = (DeletionRequest.objects.count(), ApplyJob.objects.count(), Job.objects.count())
    pk = rows[resource].pk
    for who, user in users().items():
        client = token_client(user)
        for method in ("post", "put", "patch", "delete"):
            for url in (f"{API}{resource}/", f"{API}{resource}/{pk}/"):
                answer = getattr(client, method)(url, {"status": "failed"}, format="json")
                assert answer.status_code == 405, (who, method, url, answer.status_code, answer.content[:200])
                assert answer.json() == {"detail": f'Method "{method.upper()}" not allowed.'}
    assert (DeletionRequest.objects.count(), ApplyJob.objects.count(), Job.objects.count()) == before
    rows[resource].refresh_from_db()
    assert str(getattr(rows[resource], "status", "")) != "failed" or resource == "sync-jobs"


@pytest.mark.parametrize("resource", READ_ONLY)
def test_reads_keep_their_permission_checks(rows, resource):
    people = users()
    assert token_client(people["nobody"]).get(f"{API}{resource}/").status_code == 403
    listing = token_client(people["viewer"]).get(f"{API}{resource}/")
    assert listing.status_code == 200 and listing.json()["count"] == 1


def test_anonymous_writes_still_get_netboxs_login_answer(rows):
    from rest_framework.test import APIClient

    assert APIClient().post(f"{API}sync-jobs/", {}, format="json").status_code == 403


def test_home_page_footer_follows_the_script_prefix(ui):
    """NetBox's BASE_PATH (or a WSGI script prefix) moves every URL: the footer link is reversed, not
    hard-coded."""
    from django.urls import reverse, set_script_prefix

    try:
        set_script_prefix("/netbox/")  # what NetBox served under /netbox/ reverses against
        page = ui.get("/plugins/hvsync/")
        assert page.status_code == 200
        expected = reverse("plugins:netbox_hvsync:sync_state")
    finally:
        set_script_prefix("/")
    assert expected == "/netbox/plugins/hvsync/sync-state/"
    body = page.content.decode()
    footer = body[body.index('id="hvsync-footer"') :]
    assert f'href="{expected}"' in footer
    assert 'href="/plugins/hvsync/sync-state/"' not in body
