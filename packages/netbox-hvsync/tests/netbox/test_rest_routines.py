"""backup-routines/ and replications/: full CRUD, exact round trips, every SPEC 4.4 filter and `q`."""

from __future__ import annotations

import pytest
from support import API

pytestmark = pytest.mark.django_db

ROUTINES = API + "backup-routines/"
REPLICATIONS = API + "replications/"


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return sorted(row["id"] for row in response.json()["results"])


def routine_body(hv, **overrides):
    body = {
        "endpoint": hv["endpoint"].pk,
        "job_id": "backup-3f2a",
        "enabled": True,
        "schedule": "sun 01:00",
        "next_run": "2026-11-29T01:00:00Z",
        "node": hv["node1"].pk,
        "storage": hv["pbs"].pk,
        "selection": [100, 101],
        "comment": "weekly full",
        "status": "active",
        "keep_last": 3,
        "keep_daily": 7,
        "keep_weekly": 4,
        "keep_monthly": 6,
        "keep_yearly": 1,
        "keep_all": False,
        "notes_template": "{{guestname}}",
        "bwlimit": 51200,
        "zstd": 2,
        "io_workers": 4,
        "fleecing": "enabled=1",
        "fleecing_storage": hv["local"].pk,
        "repeat_missed": True,
        "pbs_change_detection_mode": "data",
        "raw_config": {"id": "backup-3f2a", "schedule": "sun 01:00", "mode": "snapshot"},
    }
    body.update(overrides)
    return body


def test_backup_routine_round_trip(api, hv):
    created = api.post(ROUTINES, routine_body(hv), format="json")
    assert created.status_code == 201, created.content
    row = api.get(f"{ROUTINES}{created.json()['id']}/").json()
    assert row["display"] == "backup-3f2a"
    assert row["url"].endswith(f"/api/plugins/hvsync/backup-routines/{row['id']}/")
    assert row["endpoint"]["id"] == hv["endpoint"].pk and row["endpoint"]["name"] == "pve-a"
    assert set(row["endpoint"]) >= {"id", "url", "display", "name"}
    assert row["node"]["node_id"] == 1 and row["node"]["online"] is True and row["node"]["name"] == "pve1"
    assert row["node"]["id"] == hv["node1"].pk and row["node"]["display"] == "pve1" and row["node"]["url"]
    assert row["storage"]["cluster"] == {"id": hv["hv_cluster"].pk, "name": "cluster-a"}
    assert row["storage"]["name"] == "pbs"
    assert row["fleecing_storage"]["name"] == "local"
    assert row["status"] == {"value": "active", "label": "Active"}
    assert row["next_run"] == "2026-11-29T01:00:00Z"
    assert row["selection"] == [100, 101]
    for key in (
        "keep_last",
        "keep_daily",
        "keep_weekly",
        "keep_monthly",
        "keep_yearly",
        "keep_all",
        "bwlimit",
        "zstd",
        "io_workers",
        "fleecing",
        "repeat_missed",
        "pbs_change_detection_mode",
        "raw_config",
        "notes_template",
        "comment",
        "schedule",
        "job_id",
        "enabled",
    ):
        assert row[key] == routine_body(hv)[key], key
    assert row["tags"] == [] and row["custom_fields"] == {}
    assert row["created"].endswith("Z") and "T" in row["created"]


def test_backup_routine_nullable_fields_and_update_delete(api, hv):
    body = routine_body(
        hv,
        node=None,
        storage=None,
        fleecing_storage=None,
        next_run=None,
        keep_last=None,
        keep_all=None,
        bwlimit=None,
        zstd=None,
        io_workers=None,
        pbs_change_detection_mode="",
    )
    created = api.post(ROUTINES, body, format="json")
    assert created.status_code == 201, created.content
    row = created.json()
    for key in (
        "node",
        "storage",
        "fleecing_storage",
        "next_run",
        "keep_last",
        "keep_all",
        "bwlimit",
        "zstd",
        "io_workers",
    ):
        assert row[key] is None, key
    patched = api.patch(f"{ROUTINES}{row['id']}/", {"status": "stale", "keep_last": 9}, format="json")
    assert patched.status_code == 200, patched.content
    assert (
        patched.json()["status"] == {"value": "stale", "label": "Stale"} and patched.json()["keep_last"] == 9
    )
    put = api.put(f"{ROUTINES}{row['id']}/", routine_body(hv, job_id="renamed"), format="json")
    assert put.status_code == 200 and put.json()["job_id"] == "renamed"
    assert api.delete(f"{ROUTINES}{row['id']}/").status_code == 204
    assert api.get(f"{ROUTINES}{row['id']}/").status_code == 404


def test_backup_routine_validation_names_the_field(api, hv):
    bad = api.post(ROUTINES, routine_body(hv, status="bogus"), format="json")
    assert bad.status_code == 400 and "status" in bad.json()
    foreign = api.post(ROUTINES, routine_body(hv, node=hv["other_node"].pk), format="json")
    assert foreign.status_code == 400 and "node" in foreign.json(), foreign.content
    mode = api.post(ROUTINES, routine_body(hv, pbs_change_detection_mode="fast"), format="json")
    assert mode.status_code == 400 and "pbs_change_detection_mode" in mode.json()
    missing = api.post(ROUTINES, {"job_id": "x"}, format="json")
    assert missing.status_code == 400 and "endpoint" in missing.json()
    from netbox_hvsync.models import BackupRoutine

    assert not BackupRoutine.objects.exists()


def test_backup_routine_filters(api, hv):
    from netbox_hvsync.models import BackupRoutine

    a = BackupRoutine.objects.create(
        endpoint=hv["endpoint"],
        job_id="job-a",
        node=hv["node1"],
        storage=hv["pbs"],
        comment="nightly pbs",
        keep_last=3,
        keep_daily=7,
        keep_weekly=4,
        keep_monthly=6,
    )
    b = BackupRoutine.objects.create(
        endpoint=hv["endpoint"],
        job_id="job-b",
        enabled=False,
        node=hv["node2"],
        storage=hv["local"],
        status="stale",
        keep_last=1,
        keep_daily=1,
        keep_weekly=1,
        keep_monthly=1,
    )
    c = BackupRoutine.objects.create(endpoint=hv["other"], job_id="job-c", comment="other endpoint")
    cases = {
        f"id={a.pk}": [a.pk],
        f"endpoint={hv['other'].pk}": [c.pk],
        "job_id=job-b": [b.pk],
        "enabled=false": [b.pk],
        f"node={hv['node1'].pk}": [a.pk],
        f"node_id={hv['node2'].pk}": [b.pk],
        f"storage={hv['pbs'].pk}": [a.pk],
        f"storage_id={hv['local'].pk}": [b.pk],
        "status=stale": [b.pk],
        "keep_last=3": [a.pk],
        "keep_daily=1": [b.pk],
        "keep_weekly=4": [a.pk],
        "keep_monthly=1": [b.pk],
        "q=nightly": [a.pk],
        "q=job-c": [c.pk],
        "q=JOB": sorted([a.pk, b.pk, c.pk]),
        "q=nomatch": [],
    }
    for query, expected in cases.items():
        assert ids(api.get(f"{ROUTINES}?{query}")) == sorted(expected), query
    page = api.get(f"{ROUTINES}?limit=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]


def replication_body(hv, **overrides):
    body = {
        "endpoint": hv["endpoint"].pk,
        "replication_id": "100-0",
        "virtual_machine": hv["vm1"].pk,
        "hv_node": hv["node1"].pk,
        "guest": 100,
        "target": "pve2",
        "job_type": "local",
        "schedule": "*/15",
        "rate": 12.5,
        "comment": "to pve2",
        "disable": False,
        "source": "pve1",
        "jobnum": 0,
        "remove_job": "full",
        "status": "active",
        "raw_config": {"id": "100-0", "target": "pve2", "type": "local"},
    }
    body.update(overrides)
    return body


def test_replication_round_trip_and_crud(api, hv):
    created = api.post(REPLICATIONS, replication_body(hv), format="json")
    assert created.status_code == 201, created.content
    row = api.get(f"{REPLICATIONS}{created.json()['id']}/").json()
    assert row["virtual_machine"]["id"] == hv["vm1"].pk and row["virtual_machine"]["name"] == "web-1"
    assert set(row["virtual_machine"]) >= {"id", "url", "display", "name"}
    assert row["hv_node"]["node_id"] == 1 and row["hv_node"]["online"] is True
    assert row["job_type"] == {"value": "local", "label": "Local"}
    assert row["remove_job"] == {"value": "full", "label": "Full"}
    assert row["status"] == {"value": "active", "label": "Active"}
    assert row["rate"] == 12.5 and row["guest"] == 100 and row["jobnum"] == 0
    assert row["raw_config"] == {"id": "100-0", "target": "pve2", "type": "local"}
    patched = api.patch(
        f"{REPLICATIONS}{row['id']}/", {"remove_job": None, "rate": None, "endpoint": None}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["remove_job"] is None and patched.json()["rate"] is None
    assert patched.json()["endpoint"] is None
    assert api.delete(f"{REPLICATIONS}{row['id']}/").status_code == 204


def test_replication_id_shape_is_validated(api, hv):
    bad = api.post(REPLICATIONS, replication_body(hv, replication_id="abc"), format="json")
    assert bad.status_code == 400 and "replication_id" in bad.json()
    mismatch = api.post(REPLICATIONS, replication_body(hv, replication_id="101-0"), format="json")
    assert mismatch.status_code == 400 and "replication_id" in mismatch.json()
    job_type = api.post(REPLICATIONS, replication_body(hv, job_type="remote"), format="json")
    assert job_type.status_code == 400 and "job_type" in job_type.json()


def test_replication_filters(api, hv):
    from netbox_hvsync.models import Replication

    a = Replication.objects.create(
        endpoint=hv["endpoint"],
        replication_id="100-0",
        virtual_machine=hv["vm1"],
        hv_node=hv["node1"],
        guest=100,
        target="pve2",
        schedule="*/15",
        source="pve1",
        jobnum=0,
        comment="alpha",
        remove_job="local",
    )
    b = Replication.objects.create(
        endpoint=hv["endpoint"],
        replication_id="101-1",
        virtual_machine=hv["vm2"],
        hv_node=hv["node2"],
        guest=101,
        target="pve1",
        schedule="*/30",
        source="pve2",
        jobnum=1,
        disable=True,
        status="stale",
    )
    c = Replication.objects.create(
        endpoint=hv["other"],
        replication_id="102-0",
        virtual_machine=hv["vm2"],
        guest=102,
        target="pve9",
        source="pve8",
        jobnum=0,
    )
    cases = {
        f"id={b.pk}": [b.pk],
        f"endpoint={hv['other'].pk}": [c.pk],
        "replication_id=100-0": [a.pk],
        f"virtual_machine={hv['vm2'].pk}": [b.pk, c.pk],
        f"virtual_machine_id={hv['vm1'].pk}": [a.pk],
        f"hv_node={hv['node2'].pk}": [b.pk],
        "guest=102": [c.pk],
        "target=pve1": [b.pk],
        "job_type=local": [a.pk, b.pk, c.pk],
        "schedule=*/30": [b.pk],
        "disable=true": [b.pk],
        "source=pve8": [c.pk],
        "jobnum=1": [b.pk],
        "remove_job=local": [a.pk],
        "status=stale": [b.pk],
        "q=web-1": [a.pk],
        "q=pve9": [c.pk],
        "q=alpha": [a.pk],
        "q=pve8": [c.pk],
        "q=101-1": [b.pk],
    }
    for query, expected in cases.items():
        assert ids(api.get(f"{REPLICATIONS}?{query}")) == sorted(expected), query
