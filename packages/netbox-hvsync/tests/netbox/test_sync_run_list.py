"""The sync-run list `/plugins/hvsync/sync-runs/`: only hvsync jobs, rows linking to their run pages, the
run's mode/scope/stage count, filters, permissions and the menu entry."""

from __future__ import annotations

import re

import pytest
from support import user_with
from sync_runs import finished_block, make_job, run_url

pytestmark = pytest.mark.django_db

LIST = "/plugins/hvsync/sync-runs/"


def rows(html: str) -> dict[int, list[str]]:
    """Job pk -> the text cells of its row, for every row that links to a sync-run page."""
    found: dict[int, list[str]] = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S):
        link = re.search(r'href="/plugins/hvsync/sync-runs/(\d+)/"', row)
        if link:
            tds = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            found[int(link.group(1))] = [re.sub(r"<[^>]+>", "", c).strip() for c in tds]
    return found


def listed(client, query: str = "") -> dict[int, list[str]]:
    response = client.get(f"{LIST}?per_page=1000{query}")
    assert response.status_code == 200
    return rows(response.content.decode())


@pytest.fixture
def jobs(superuser):
    selected = {
        "sync": {
            "mode": "selected",
            "sync_types": ["vms", "vm-disks"],
            "hv_endpoint_ids": [7, 8],
            "stages": [{"stage": "vms", "ok": True}, {"stage": "vm-disks", "ok": True}],
        }
    }
    return {
        "finished": make_job(data=finished_block(), user=superuser),
        "selected": make_job(status="failed", data=selected, name="hvsync selected sync"),
        "legacy": make_job(status="pending", data={"sync_type": "nodes"}, name="hvsync legacy"),
        "other": make_job(name="some report", data={"log": []}),
    }


def test_lists_hvsync_jobs_with_links_mode_scope_and_stage_count(ui, jobs):
    response = ui.get(f"{LIST}?per_page=1000")
    html = response.content.decode()
    assert "<title>Sync runs" in html or re.search(r"<h1[^>]*>\s*Sync runs\s*</h1>", html)
    found = rows(html)
    assert set(found) == {jobs["finished"].pk, jobs["selected"].pk, jobs["legacy"].pk}
    # the id and the name both lead to the run page, never to core's job page
    for job in (jobs["finished"], jobs["selected"]):
        assert html.count(f'href="{run_url(job)}"') == 2
        assert f'href="/core/jobs/{job.pk}/"' not in html
    assert f"/core/jobs/{jobs['other'].pk}/" not in html and "some report" not in html
    # id, name, status, mode, scope, stages, queued by, created, started, completed
    finished = found[jobs["finished"].pk]
    assert finished[:7] == [
        str(jobs["finished"].pk),
        "hvsync sync",
        "Completed",
        "staged",
        "all on every endpoint",
        "2",
        "hv-admin",
    ]
    assert len(finished) == 11 and finished[10] == ""  # the actions cell carries no action
    assert found[jobs["selected"].pk][1:7] == [
        "hvsync selected sync",
        "Failed",
        "selected",
        "vms, vm-disks on 2 endpoints",
        "2",
        "—",
    ]
    # a flat legacy row: no mode recorded (the page's default), its singular type, no stages
    assert found[jobs["legacy"].pk][2:6] == ["Pending", "staged", "nodes on every endpoint", "—"]
    # no add/import/edit/delete controls
    for control in ("/add/", "/import/", "/edit/", "/delete/"):
        assert f'href="{LIST}{control}' not in html and f"/core/jobs/{control}" not in html


def test_filters_by_status_sync_fields_and_quick_search(ui, jobs):
    assert set(listed(ui, "&status=failed")) == {jobs["selected"].pk}
    assert set(listed(ui, "&status=completed&status=pending")) == {jobs["finished"].pk, jobs["legacy"].pk}
    assert set(listed(ui, "&q=legacy")) == {jobs["legacy"].pk}
    # sync-block filters of SyncJobFilterSet: runs with recorded errors or a failed status
    assert set(listed(ui, "&errored=true")) == {jobs["finished"].pk, jobs["selected"].pk}
    assert set(listed(ui, "&sync_type=vm-disks")) == {jobs["finished"].pk, jobs["selected"].pk}
    # the columns read from `data` sort in SQL (PostgreSQL puts a missing value last)
    by_mode = list(listed(ui, "&sort=sync_mode"))
    assert by_mode == [jobs["selected"].pk, jobs["finished"].pk, jobs["legacy"].pk]
    by_stages = list(listed(ui, "&sort=stage_count"))
    assert set(by_stages[:2]) == {jobs["finished"].pk, jobs["selected"].pk}
    assert by_stages[2] == jobs["legacy"].pk
    # the filter tab carries the sync fields
    html = ui.get(LIST).content.decode()
    assert 'name="sync_type"' in html and 'name="errored"' in html and 'name="status"' in html


def test_needs_view_job_permission(jobs):
    from django.test import Client

    assert user_with("netbox_hvsync.view_hvendpoint").get(LIST).status_code == 403
    anonymous = Client().get(LIST)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert set(listed(user_with("core.view_job"))) == {
        jobs["finished"].pk,
        jobs["selected"].pk,
        jobs["legacy"].pk,
    }


def test_object_permission_narrows_rows(jobs):
    from core.models import ObjectType
    from django.test import Client
    from users.models import ObjectPermission, User

    viewer = User.objects.create_user(username="failed-runs-viewer")
    permission = ObjectPermission.objects.create(
        name="failed jobs only", actions=["view"], constraints={"status": "failed"}
    )
    permission.object_types.set([ObjectType.objects.get(app_label="core", model="job")])
    permission.users.add(viewer)
    client = Client()
    client.force_login(viewer)
    assert set(listed(client)) == {jobs["selected"].pk}


def test_menu_entry_next_to_schedule_and_only_with_permission(ui):
    body = ui.get("/").content.decode()
    schedule = body.index('href="/plugins/hvsync/sync/schedule/"')
    runs = re.search(r'href="/plugins/hvsync/sync-runs/"[^>]*>\s*Sync runs\s*<', body)
    assert runs is not None and runs.start() > schedule
    # the next link after "Schedule a sync" is "Sync runs"
    assert "href=" not in body[schedule + len("href=") : runs.start()]
    hidden = user_with("netbox_hvsync.view_hvendpoint").get("/").content.decode()
    assert 'href="/plugins/hvsync/sync-runs/"' not in hidden
    assert 'href="/plugins/hvsync/sync-runs/"' in user_with("core.view_job").get("/").content.decode()
