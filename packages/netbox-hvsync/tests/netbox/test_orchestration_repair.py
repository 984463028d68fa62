"""The sync-state page and repair (SPEC 4.6, 5.3, 7.3 "Repair") against a real backend process."""

from __future__ import annotations

import pytest
from support import CANDIDATE, user_with

pytestmark = pytest.mark.django_db

PAGE = "/plugins/hvsync/sync-state/"


@pytest.fixture
def configured(backend):
    from netbox_hvsync.models import BackendEndpoint

    row = BackendEndpoint(name="b", url=backend)
    row.token = CANDIDATE
    row.save()
    return row


def test_page_shows_the_bootstrap_badge_detail_and_raw_payload(ui, configured):
    body = ui.get(PAGE).content.decode()
    # the fresh backend has no inventory endpoint: SPEC 4.3 "skipped true with reason no_inventory_session"
    assert 'id="bootstrap-badge">skipped<' in body
    assert "no inventory endpoint of its own yet" in body
    assert "no_inventory_session" in body  # the raw payload
    assert CANDIDATE not in body


def test_page_without_a_backend_says_unavailable(ui):
    body = ui.get(PAGE).content.decode()
    assert 'id="bootstrap-badge">unavailable<' in body


def test_page_needs_view_permission_on_backend_endpoints(configured):
    assert user_with().get(PAGE).status_code == 403
    assert user_with("netbox_hvsync.view_backendendpoint").get(PAGE).status_code == 200


def test_repair_reconciles_best_effort_then_queues_one_full_sync(ui, configured):
    from core.models import Job

    response = ui.post(PAGE, follow=True)
    text = response.content.decode()
    job = Job.objects.get(name="hvsync sync")
    assert job.data["sync"]["repair"] is True and job.data["sync"]["sync_types"] == ["all"]
    assert f'href="{job.get_absolute_url()}"' in text  # the flash message links the job
    # the backend has no inventory endpoint, so the reconcile is refused: a warning, not a stop
    assert "custom-field reconcile was rejected" in text and "HTTP 409" in text
    # a repair already queued is a hard stop
    again = ui.post(PAGE, follow=True).content.decode()
    assert "Repair not started: a repair sync is already running" in again
    assert Job.objects.filter(name="hvsync sync").count() == 1


def test_repair_without_add_job_is_a_hard_stop(configured):
    from core.models import Job

    client = user_with("netbox_hvsync.view_backendendpoint")
    text = client.post(PAGE, follow=True).content.decode()
    assert (
        "Repair not started: repair needs the core.add_job and netbox_hvsync.view_hvendpoint and "
        "netbox_hvsync.view_backendendpoint permissions"
    ) in text
    assert not Job.objects.filter(name="hvsync sync").exists()


def test_full_update_button_queues_a_full_sync_through_the_same_pipeline(ui, configured):
    from core.models import Job

    page = ui.get(PAGE).content.decode()
    assert 'id="full-sync-button"' in page
    text = ui.post(PAGE, {"action": "full_sync"}, follow=True).content.decode()
    job = Job.objects.get(name="hvsync sync")
    assert job.data["sync"]["sync_types"] == ["all"] and "repair" not in job.data["sync"]
    assert f'href="{job.get_absolute_url()}"' in text and "Full sync queued" in text
    denied = user_with("netbox_hvsync.view_backendendpoint").post(PAGE, {"action": "full_sync"}, follow=True)
    assert "Full sync not queued" in denied.content.decode()
    assert Job.objects.filter(name="hvsync sync").count() == 1
