"""The sync-run page `/plugins/hvsync/sync-runs/<pk>/`: content, the live HTMX partial, permissions,
redaction, the links to it, and the runner's throttled `progress` entry."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone
from support import user_with
from sync_runs import PLANTED, finished_block, make_job, run_url

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def cells(html: str, stage: str) -> list[list[str]]:
    """The text cells of every stage-table row of `stage`."""
    rows = re.findall(rf'<tr data-stage="{re.escape(stage)}">(.*?)</tr>', html, re.S)
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows
    ]


@pytest.fixture
def finished(superuser):
    from core.models import Job

    now = timezone.now()
    job = make_job(data=finished_block(), user=superuser)
    # `created` is stamped on insert; set the three times as a real run leaves them
    Job.objects.filter(pk=job.pk).update(
        created=now - timedelta(seconds=30),
        started=now - timedelta(seconds=20),
        completed=now - timedelta(seconds=15),
    )
    job.refresh_from_db()
    return job


def test_finished_run_renders_stage_rows_failed_objects_and_changelog_link(ui, finished, superuser):
    response = ui.get(run_url(finished))
    assert response.status_code == 200
    html = response.content.decode()
    # devices covered both endpoints: a row each, counts of the stream, each endpoint's own duration
    # (gone, returned, deletion_requests: "—" for a summary recorded without them)
    assert cells(html, "devices") == [
        ["pve-alpha", "devices", "ok", "—", "11", "2", "40", "0", "0", "—", "—", "—", "2900"],
        ["pve-beta", "devices", "ok", "—", "11", "2", "40", "0", "0", "—", "—", "—", "2500"],
    ]
    assert cells(html, "storage") == [
        ["pve-beta", "storage", "failed (502)", "application", "0", "1", "9", "3", "1", "—", "—", "—", "990"]
    ]
    # timeline widths proportional to the stage durations (3000 : 1000)
    assert re.search(r'class="ok" style="width: 75.00%"[^>]*data-stage="devices"', html)
    assert re.search(r'class="failed" style="width: 25.00%"[^>]*data-stage="storage"', html)
    # failed object with its stored (redacted) error
    failed = re.search(r'id="sync-run-failed-objects".*?</table>', html, re.S).group(0)
    assert "local-lvm@pve2" in failed and "Authorization: [redacted]" in failed
    # preflight, reconciliation, warnings, errors, skipped stages, header
    assert "backend id 3" in html and "firewall" in html and "4: failed" in html
    assert "local reconciliation was unsuccessful" in html and "stage storage failed" in html
    assert "vm-disks" in re.search(r'id="sync-run-skipped".*?</div>', html, re.S).group(0)
    assert re.search(r'id="sync-run-wait">10.0 s<', html) and re.search(r'id="sync-run-time">5.0 s<', html)
    # not polling: the run is over
    assert "hx-trigger" not in html
    # change-log link: NetBox's list, filtered on the run's window (+-5 s)
    href = re.search(r'<a href="([^"]+)" id="sync-run-changelog"', html).group(1).replace("&amp;", "&")
    url = urlsplit(href)
    assert url.path == "/core/changelog/"
    query = parse_qs(url.query)
    assert query["time_after"] == [(finished.started - timedelta(seconds=5)).isoformat(timespec="seconds")]
    assert query["time_before"] == [(finished.completed + timedelta(seconds=5)).isoformat(timespec="seconds")]
    assert "user_id" not in query  # no inventory endpoint: the backend's NetBox user is unknown
    assert ui.get(href).status_code == 200


def test_changelog_link_filters_on_the_backend_user_when_known(ui, finished, superuser):
    from ipam.models import IPAddress
    from netbox_hvsync.models import InventoryEndpoint
    from users.models import Token, User

    writer = User.objects.create_user(username="hvsync-writer")
    token = Token(user=writer, version=2)
    token.token = Token.generate() if hasattr(Token, "generate") else "t" * 40
    token.save()
    ip = IPAddress.objects.create(address="192.0.2.10/32")
    InventoryEndpoint.objects.create(
        name="nb", ip_address=ip, token_version=2, token_key=token.key, enabled=True
    )
    html = ui.get(run_url(finished)).content.decode()
    href = re.search(r'<a href="([^"]+)" id="sync-run-changelog"', html).group(1).replace("&amp;", "&")
    assert parse_qs(urlsplit(href).query)["user_id"] == [str(writer.pk)]
    assert "user hvsync-writer" in html


def test_planted_secret_never_renders(ui, finished):
    for response in (ui.get(run_url(finished)), ui.get(run_url(finished), **HTMX)):
        assert response.status_code == 200
        assert PLANTED not in response.content.decode()


def test_running_partial_polls_and_shows_current_stage(ui, superuser):
    block = finished_block()
    block["sync"]["stages"] = block["sync"]["stages"][:1]
    block["sync"]["progress"] = {
        "stage": "vm-disks",
        "index": 5,
        "total": 13,
        "frames": 17,
        "counts": {"created": 4, "updated": 0, "unchanged": 12, "deleted": 0, "failed": 0},
    }
    job = make_job(status="running", data=block, user=superuser, started=timezone.now())
    response = ui.get(run_url(job), **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert not html.lstrip().startswith("<!DOCTYPE")  # the partial, not the whole page
    opening = re.match(r"\s*(<div id=\"sync-run-body\"[^>]*>)", html).group(1)
    assert f'hx-get="{run_url(job)}"' in opening
    assert 'hx-trigger="every 2s"' in opening and 'hx-swap="outerHTML"' in opening
    assert re.search(r'id="progress-index">5/13<', html)
    assert re.search(r'id="progress-stage">vm-disks<', html)
    counts = re.search(r'id="progress-counts">(.*?)</p>', html, re.S).group(1)
    assert re.findall(r">(\w+ \d+)<", counts) == [
        "created 4",
        "updated 0",
        "unchanged 12",
        "deleted 0",
        "failed 0",
        "gone 0",
        "returned 0",
        "deletion_requests 0",
    ]
    assert re.search(r'id="progress-frames">17<', html)
    # the full page embeds the same polling body
    page = ui.get(run_url(job)).content.decode()
    assert "<!DOCTYPE" in page and 'hx-trigger="every 2s"' in page


def test_finished_partial_does_not_poll_and_drops_stale_progress(ui, finished):
    finished.data["sync"]["progress"] = {
        "stage": "devices",
        "index": 1,
        "total": 13,
        "frames": 1,
        "counts": {},
    }
    finished.save()
    html = ui.get(run_url(finished), **HTMX).content.decode()
    assert 'id="sync-run-body"' in html
    assert "hx-get" not in html and "hx-trigger" not in html
    assert 'id="sync-run-progress"' not in html


def test_non_hvsync_job_and_missing_job_are_404(ui):
    other = make_job(name="some report", data={"log": []})
    assert ui.get(run_url(other)).status_code == 404
    assert ui.get(run_url(other), **HTMX).status_code == 404
    assert ui.get("/plugins/hvsync/sync-runs/999999999/").status_code == 404


def test_permission_is_required(finished):
    from django.test import Client

    refused = user_with("netbox_hvsync.view_hvendpoint").get(run_url(finished))
    assert refused.status_code == 403
    anonymous = Client().get(run_url(finished))
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert user_with("core.view_job").get(run_url(finished)).status_code == 200


def test_object_permission_restricts_to_permitted_jobs(finished):
    from core.models import ObjectType
    from django.test import Client
    from users.models import ObjectPermission, User

    viewer = User.objects.create_user(username="failed-only-viewer")
    permission = ObjectPermission.objects.create(
        name="failed jobs only", actions=["view"], constraints={"status": "failed"}
    )
    permission.object_types.set([ObjectType.objects.get(app_label="core", model="job")])
    permission.users.add(viewer)
    client = Client()
    client.force_login(viewer)
    assert client.get(run_url(finished)).status_code == 404
    failed = make_job(status="failed", data=finished_block())
    assert client.get(run_url(failed)).status_code == 200


def test_links_from_core_job_page_home_and_sync_state(ui, finished):
    url = run_url(finished)
    core_page = ui.get(f"/core/jobs/{finished.pk}/").content.decode()
    assert re.search(rf'<a href="{url}"[^>]*id="hvsync-sync-run-link"', core_page)
    other = make_job(name="some report", data={"log": []})
    assert 'id="hvsync-sync-run-link"' not in ui.get(f"/core/jobs/{other.pk}/").content.decode()
    home = ui.get("/plugins/hvsync/").content.decode()
    recent = re.search(r'id="hvsync-recent-runs".*?</table>', home, re.S).group(0)
    assert f'href="{url}"' in recent and f'href="{run_url(other)}"' not in recent
    assert 'href="/plugins/hvsync/sync-runs/"' in home.split('id="hvsync-recent-runs"', 1)[1]


def test_runner_progress_is_throttled_and_cleared(superuser):
    from netbox_hvsync.sync.state import PROGRESS_SAVE_INTERVAL_S, RunState

    job = make_job(status="running", data={"sync": {"run_id": "r"}}, user=superuser)
    state = RunState(job, logging.getLogger("test"), {"run_id": "r"})
    saves: list[dict] = []
    original = state.save

    def counting_save() -> None:
        original()
        saves.append(dict(job.data["sync"].get("progress") or {}))

    state.save = counting_save  # type: ignore[method-assign]
    state.begin_progress("storage", 2, 13)
    assert len(saves) == 1 and saves[0]["stage"] == "storage" and saves[0]["index"] == 2
    start = state._progress_saved
    write = {
        "phase": "write",
        "counts": {"created": 2, "unchanged": 5, "updated": 0, "deleted": 0, "failed": 0},
    }
    for i in range(50):  # 50 frames within less than the interval: no write
        state.see_progress(write, start + i * (PROGRESS_SAVE_INTERVAL_S / 100))
    assert len(saves) == 1
    state.see_progress(write, start + PROGRESS_SAVE_INTERVAL_S + 0.01)
    assert len(saves) == 2
    job.refresh_from_db()
    stored = job.data["sync"]["progress"]
    assert (
        stored["frames"] == 51 and stored["counts"]["created"] == 102 and stored["counts"]["unchanged"] == 255
    )
    done = {
        "phase": "done",
        "counts": {"created": 7, "unchanged": 9, "updated": 1, "deleted": 0, "failed": 0},
    }
    state.see_progress(done, start + 3 * PROGRESS_SAVE_INTERVAL_S)
    assert saves[-1]["counts"] == {"created": 7, "updated": 1, "unchanged": 9, "deleted": 0, "failed": 0}
    state.end_progress()
    state.save()
    job.refresh_from_db()
    assert "progress" not in job.data["sync"]
