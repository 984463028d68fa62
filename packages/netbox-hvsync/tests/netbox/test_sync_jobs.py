"""sync-jobs/ over NetBox's core Job rows: every filter and SPEC 4.4 rules 1-5; schedule and cancel."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from support import API, token_client

pytestmark = pytest.mark.django_db

SYNC_JOBS = API + "sync-jobs/"


def job(name="hvsync sync", status="completed", data=None, error="", **fields):
    from core.models import Job

    return Job.objects.create(
        name=name, status=status, data=data, error=error, job_id=uuid.uuid4(), queue_name="default", **fields
    )


@pytest.fixture
def seeded(hv, superuser):
    e1, e2 = hv["endpoint"].pk, hv["other"].pk
    vm1 = hv["vm1"].pk
    jobs = {
        "all": job(
            data={"sync": {"sync_types": ["all"], "hv_endpoint_ids": [], "vm_ids": [], "run_id": "r-all"}},
            user=superuser,
        ),
        "storage": job(
            data={
                "sync": {
                    "sync_types": ["storage", "devices"],
                    "hv_endpoint_ids": [e1],
                    "vm_ids": [vm1],
                    "run_id": "r-storage",
                    "batch_object_type": "virtualization.virtualmachine",
                    "errors": ["storage: backend answered 502"],
                }
            }
        ),
        "legacy": job(status="failed", data={"sync": {"sync_type": "vm-backups", "hv_endpoint_ids": [e2]}}),
        "no_types": job(data={"sync": {"hv_endpoint_ids": None}}),
        "empty_types": job(
            data={
                "sync": {
                    "sync_types": [],
                    "hv_endpoint_ids": [e2],
                    "stages": [{"stage": "sdn", "ok": False}, {"stage": "storage", "ok": True}],
                }
            }
        ),
        "error_text": job(data={"sync": {"sync_types": ["sdn"], "hv_endpoint_ids": [str(e1)]}}, error="boom"),
        "not_sync": job(name="Some script", data={"output": "x"}),
    }
    for j in jobs.values():
        j.log_entries = [{"level": "info", "message": f"row {j.pk}", "timestamp": timezone.now().isoformat()}]
        j.save()
    return jobs


def names(response, seeded) -> list[str]:
    assert response.status_code == 200, response.content
    by_pk = {j.pk: key for key, j in seeded.items()}
    return sorted(by_pk[row["id"]] for row in response.json()["results"])


SYNC_ROWS = ["all", "empty_types", "error_text", "legacy", "no_types", "storage"]


def test_lists_only_sync_jobs_serialized_as_core(api, seeded):
    assert names(api.get(SYNC_JOBS), seeded) == SYNC_ROWS
    mine = api.get(f"{SYNC_JOBS}{seeded['all'].pk}/").json()
    core = api.get(f"/api/core/jobs/{seeded['all'].pk}/").json()
    assert mine == core  # exactly the core job serialization
    assert mine["status"] == {"value": "completed", "label": "Completed"}
    assert mine["data"]["sync"]["run_id"] == "r-all" and mine["log_entries"][0]["message"].startswith("row ")
    assert api.get(f"{SYNC_JOBS}{seeded['not_sync'].pk}/").status_code == 404


def test_log_entries_only_on_detail_or_when_asked(api, seeded):
    rows = api.get(SYNC_JOBS).json()["results"]
    assert rows and all("log_entries" not in r for r in rows) and all("data" in r for r in rows)
    rows = api.get(f"{SYNC_JOBS}?include_log_entries=true").json()["results"]
    assert all(r["log_entries"][0]["message"] == f"row {r['id']}" for r in rows)
    rows = api.get(f"{SYNC_JOBS}?include_log_entries=false").json()["results"]
    assert all("log_entries" not in r for r in rows)
    assert "log_entries" in api.get(f"{SYNC_JOBS}{seeded['storage'].pk}/").json()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # rule 2: `all`, no types, and an empty list match every sync_type; legacy singular key honoured
        ("sync_type=storage", ["all", "empty_types", "no_types", "storage"]),
        ("sync_type=vm-backups", ["all", "empty_types", "legacy", "no_types"]),
        ("sync_type=storage&sync_type=sdn", ["all", "empty_types", "error_text", "no_types", "storage"]),
        ("sync_type=all", ["all", "empty_types", "no_types"]),
        # rule 1: empty, absent or null endpoint list matches any endpoint
        ("hv_endpoint_id={e1}", ["all", "error_text", "no_types", "storage"]),
        ("hv_endpoint_id={e2}", ["all", "empty_types", "legacy", "no_types"]),
        ("hv_endpoint_id={e1}&hv_endpoint_id={e2}", SYNC_ROWS),
        ("cluster_id={c1}", ["all", "error_text", "no_types", "storage"]),
        ("node_id={n1}", ["all", "error_text", "no_types", "storage"]),
        ("node_id={n9}", ["all", "empty_types", "legacy", "no_types"]),
        # rule 3: an empty VM list is not a wildcard
        ("inventory_vm_id={vm1}", ["storage"]),
        ("inventory_vm_id={vm2}", []),
        ("run_id=r-storage", ["storage"]),
        ("run_id=nope", []),
        ("batch_object_type=virtualization.virtualmachine", ["storage"]),
        # rule 4: errored is broader than a failed status
        ("errored=true", ["empty_types", "legacy", "storage"]),
        # a completed row whose only trace is the Job.error column is not errored (as core.job_filters decides)
        ("errored=false", ["all", "error_text", "no_types"]),
        ("status=failed", ["legacy"]),
        ("status=failed&status=completed", SYNC_ROWS),
        ("q=hvsync", SYNC_ROWS),
        ("name__ic=sync", SYNC_ROWS),
        ("sync_type=storage&hv_endpoint_id={e2}&errored=true", ["empty_types"]),
    ],
)
def test_filters(api, seeded, hv, query, expected):
    query = query.format(
        e1=hv["endpoint"].pk,
        e2=hv["other"].pk,
        c1=hv["hv_cluster"].pk,
        n1=hv["node1"].pk,
        n9=hv["other_node"].pk,
        vm1=hv["vm1"].pk,
        vm2=hv["vm2"].pk,
    )
    assert names(api.get(f"{SYNC_JOBS}?{query}"), seeded) == expected


def test_core_filters_dates_user_and_ordering(api, seeded, superuser):
    from core.models import Job

    old = timezone.now() - timedelta(days=3)
    Job.objects.filter(pk=seeded["legacy"].pk).update(created=old, completed=old)
    cutoff = (timezone.now() - timedelta(days=1)).isoformat()
    assert names(api.get(SYNC_JOBS, {"created__before": cutoff}), seeded) == ["legacy"]
    assert "legacy" not in names(api.get(SYNC_JOBS, {"created__after": cutoff}), seeded)
    assert names(api.get(SYNC_JOBS, {"completed__before": cutoff}), seeded) == ["legacy"]
    assert names(api.get(SYNC_JOBS, {"user": superuser.username}), seeded) == ["all"]
    assert names(api.get(SYNC_JOBS, {"id": seeded["storage"].pk}), seeded) == ["storage"]
    ordered = [r["id"] for r in api.get(SYNC_JOBS, {"ordering": "-id"}).json()["results"]]
    assert ordered == sorted(ordered, reverse=True)
    page = api.get(SYNC_JOBS, {"limit": 2}).json()
    assert page["count"] == 6 and len(page["results"]) == 2


def test_bad_filter_value_is_a_clear_400(api, seeded):
    response = api.get(f"{SYNC_JOBS}?sync_type=bogus")
    assert response.status_code == 400 and "sync_type" in response.json()
    response = api.get(f"{SYNC_JOBS}?hv_endpoint_id=999999")
    assert response.status_code == 400 and "hv_endpoint_id" in response.json()


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writes_are_405(api, seeded, method):
    assert getattr(api, method)(SYNC_JOBS, {}, format="json").status_code == 405
    if method != "post":
        assert getattr(api, method)(f"{SYNC_JOBS}{seeded['all'].pk}/", {}, format="json").status_code == 405


def test_object_permissions_apply(seeded):
    """Rule 5: the caller sees the jobs the core view permission allows."""
    from users.models import ObjectPermission, User

    nobody = User.objects.create_user(username="nobody")
    assert token_client(nobody).get(SYNC_JOBS).status_code == 403
    viewer = User.objects.create_user(username="failed-only")
    permission = ObjectPermission.objects.create(
        name="failed jobs", actions=["view"], constraints={"status": "failed"}
    )
    from core.models import ObjectType

    permission.object_types.set([ObjectType.objects.get(app_label="core", model="job")])
    permission.users.add(viewer)
    client = token_client(viewer)
    assert names(client.get(SYNC_JOBS), seeded) == ["legacy"]
    assert client.get(f"{SYNC_JOBS}{seeded['all'].pk}/").status_code == 404


def test_schedule_creates_core_job_with_sync_block(api, hv):
    body = {
        "sync_types": ["storage", "vm-backups"],
        "hv_endpoint_ids": [hv["endpoint"].pk],
        "cluster_ids": [hv["hv_cluster"].pk],
        "interval": 60,
    }
    response = api.post(API + "sync/schedule/", body, format="json")
    assert response.status_code == 201, response.content
    row = response.json()
    assert row["name"] == "hvsync sync" and row["status"]["value"] == "pending" and row["interval"] == 60
    sync = row["data"]["sync"]
    assert sync["sync_types"] == ["storage", "vm-backups"] and sync["hv_endpoint_ids"] == [hv["endpoint"].pk]
    assert sync["cluster_ids"] == [hv["hv_cluster"].pk] and sync["vm_ids"] == [] and sync["mode"] == "staged"
    assert uuid.UUID(sync["run_id"])
    listed = api.get(f"{SYNC_JOBS}?run_id={sync['run_id']}").json()["results"]
    assert [r["id"] for r in listed] == [row["id"]]
    selected = api.post(API + "sync/schedule/", {"mode": "selected", "vm_ids": [hv["vm1"].pk]}, format="json")
    assert selected.status_code == 201
    assert selected.json()["data"]["sync"]["batch_object_type"] == "virtualization.virtualmachine"
    assert selected.json()["data"]["sync"]["sync_types"] == ["all"]


def test_schedule_narrows_clusters_to_their_endpoints_and_refuses_node_scope(api, hv):
    """cluster_ids and node_ids were recorded and ignored: the run synced every endpoint."""
    from core.models import Job

    alone = api.post(API + "sync/schedule/", {"cluster_ids": [hv["other_cluster"].pk]}, format="json")
    assert alone.status_code == 201, alone.content
    assert alone.json()["data"]["sync"]["hv_endpoint_ids"] == [hv["other"].pk]
    before = Job.objects.count()
    outside = api.post(
        API + "sync/schedule/",
        {"hv_endpoint_ids": [hv["endpoint"].pk], "cluster_ids": [hv["other_cluster"].pk]},
        format="json",
    )
    assert outside.status_code == 400 and list(outside.json()) == ["cluster_ids"], outside.content
    nodes = api.post(API + "sync/schedule/", {"node_ids": [hv["node1"].pk]}, format="json")
    assert nodes.status_code == 400 and "read whole" in nodes.json()["node_ids"][0], nodes.content
    assert Job.objects.count() == before


def test_schedule_survives_a_job_id_sequence_that_fell_behind(api, hv, caplog):
    """A core_job id sequence behind the highest id (seen once in CI) must not turn scheduling into a 500."""
    from django.db import connection

    first, _, taken = job(status="completed"), job(status="completed"), job(status="completed")
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval('core_job_id_seq', %s)", [first.pk - 1])  # the next 3 ids collide
    response = api.post(API + "sync/schedule/", {"sync_types": ["devices"]}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["id"] == taken.pk + 1
    assert "advanced the id sequence past the highest id" in caplog.text
    again = api.post(API + "sync/schedule/", {"sync_types": ["devices"]}, format="json")
    assert again.status_code == 201 and again.json()["id"] == response.json()["id"] + 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sync_types": ["everything"]}, "sync_types"),
        ({"sync_types": ["all", "sdn"]}, "sync_types"),
        ({"hv_endpoint_ids": [999999]}, "hv_endpoint_ids"),
        ({"hv_endpoint_ids": "1"}, "hv_endpoint_ids"),
        ({"mode": "selected"}, "vm_ids"),
        ({"schedule_at": "2001-01-01T00:00:00Z"}, "schedule_at"),
        ({"interval": 0}, "interval"),
    ],
)
def test_schedule_validation_names_the_field(api, hv, body, field):
    from core.models import Job

    before = Job.objects.count()
    response = api.post(API + "sync/schedule/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert Job.objects.count() == before


def test_schedule_and_cancel_need_their_own_permissions(seeded):
    from core.models import ObjectType
    from users.models import ObjectPermission, User

    viewer = User.objects.create_user(username="viewer")
    permission = ObjectPermission.objects.create(name="view jobs", actions=["view"])
    permission.object_types.set([ObjectType.objects.get(app_label="core", model="job")])
    permission.users.add(viewer)
    client = token_client(viewer)
    assert client.post(API + "sync/schedule/", {}, format="json").status_code == 403
    assert client.post(f"{API}jobs/{seeded['all'].pk}/cancel/").status_code == 403
    permission.actions = ["view", "add"]
    permission.save()
    refused = client.post(API + "sync/schedule/", {}, format="json")  # core.add_job alone is not enough
    assert refused.status_code == 403 and "netbox_hvsync.view_hvendpoint" in refused.json()["detail"]
    endpoints = ObjectPermission.objects.create(name="view endpoints", actions=["view"])
    endpoints.object_types.set([ObjectType.objects.get(app_label="netbox_hvsync", model="hvendpoint")])
    endpoints.users.add(viewer)
    assert client.post(API + "sync/schedule/", {}, format="json").status_code == 201
    assert client.post(f"{API}jobs/{seeded['all'].pk}/cancel/").status_code == 403


def test_cancel(api, seeded, superuser):
    pending = job(status="pending", data={"sync": {"sync_types": ["all"]}})
    response = api.post(f"{API}jobs/{pending.pk}/cancel/")
    assert response.status_code == 200, response.content
    assert response.json()["status"]["value"] == "failed" and "Cancelled by" in response.json()["error"]
    pending.refresh_from_db()
    assert pending.status == "failed" and pending.completed is not None
    finished = api.post(f"{API}jobs/{seeded['all'].pk}/cancel/")
    assert finished.status_code == 409 and "completed" in finished.json()["detail"]
    assert api.post(f"{API}jobs/{seeded['not_sync'].pk}/cancel/").status_code == 404
    assert api.get(f"{API}jobs/{pending.pk}/cancel/").status_code == 405
