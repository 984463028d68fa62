"""The UI schedule form (/plugins/hvsync/sync/schedule/) and the branch option of the full-update button:
each queues a real core Job through `enqueue_sync`, with the same validation as REST `sync/schedule/`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from support import user_with

pytestmark = pytest.mark.django_db

FORM = "/plugins/hvsync/sync/schedule/"
STATE = "/plugins/hvsync/sync-state/"


def sync_jobs():
    from core.models import Job

    return list(Job.objects.filter(name="hvsync sync").order_by("pk"))


def test_form_renders_every_stage_and_the_branch_option(ui, hv):
    page = ui.get(FORM)
    assert page.status_code == 200
    body = page.content.decode()
    for stage in ("devices", "virtual-machines", "backup-routines"):
        assert f'value="{stage}"' in body
    assert 'name="use_branch"' in body  # netbox-branching is installed in the test NetBox
    assert 'id="schedule-sync-button"' in body


def test_form_queues_a_scheduled_recurring_branched_sync(ui, hv):
    at = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    response = ui.post(
        FORM,
        {
            "sync_types": ["devices", "storage"],
            "hv_endpoints": [hv["endpoint"].pk],
            "schedule_at": at.strftime("%Y-%m-%d %H:%M:%S"),
            "interval": "60",
            "use_branch": "on",
        },
        follow=True,
    )
    assert response.status_code == 200
    [job] = sync_jobs()
    sync = job.data["sync"]
    assert sync["sync_types"] == ["devices", "storage"] and sync["hv_endpoint_ids"] == [hv["endpoint"].pk]
    assert sync["use_branch"] is True and sync["mode"] == "staged"
    assert job.interval == 60 and job.status == "scheduled" and job.scheduled == at
    assert f'Sync queued: <a href="{job.get_absolute_url()}">job {job.pk}</a>' in response.content.decode()


def test_empty_form_queues_a_full_sync_of_every_endpoint(ui, hv):
    ui.post(FORM, {}, follow=True)
    [job] = sync_jobs()
    assert job.data["sync"]["sync_types"] == ["all"] and job.data["sync"]["hv_endpoint_ids"] == []
    assert job.data["sync"]["use_branch"] is False and job.status == "pending"


def test_rest_rules_name_the_form_field(ui, hv):
    past = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
    page = ui.post(FORM, {"schedule_at": past})  # valid for the form, refused by the REST rules
    assert page.status_code == 200
    assert page.context["form"].errors == {"schedule_at": ["Must be in the future."]}
    zero = ui.post(FORM, {"interval": "0"})
    assert list(zero.context["form"].errors) == ["interval"]
    assert sync_jobs() == []


def test_form_needs_add_job(hv):
    client = user_with("netbox_hvsync.view_hvendpoint")
    assert client.get(FORM).status_code == 403
    assert client.post(FORM, {}).status_code == 403
    assert sync_jobs() == []


def test_full_update_button_can_run_in_a_branch(ui, hv):
    page = ui.get(STATE).content.decode()
    assert 'name="use_branch"' in page and 'id="schedule-sync-link"' in page
    text = ui.post(STATE, {"action": "full_sync", "use_branch": "on"}, follow=True).content.decode()
    [job] = sync_jobs()
    assert job.data["sync"]["use_branch"] is True and job.data["sync"]["sync_types"] == ["all"]
    assert "Full sync queued in a working branch" in text
