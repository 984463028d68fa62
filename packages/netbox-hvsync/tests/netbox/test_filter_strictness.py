"""Integer filters are strict and every filter's values are bounded (filtersets.StrictValues).

`sync-jobs/?inventory_vm_id=1E+5000` answered 500 and `=1.5` matched VM 1; Python's `int()` read `1_0`,
`+1` and other scripts' digits as ids. Each is now a 400 naming the filter, on the sync-jobs route and on
the plugin's other list routes, and more than MAX_FILTER_VALUES values of one filter is a 400 too.
"""

from __future__ import annotations

import uuid

import pytest
from support import API

pytestmark = pytest.mark.django_db

SYNC_JOBS = API + "sync-jobs/"
NOT_WHOLE_NUMBERS = ["1E+5000", "1.5", "1.0", "1_0", "+1", "-1", "\u0661", "\uff11", "0x1", "1e3", "9" * 40]


def sync_job(**block):
    from core.models import Job

    return Job.objects.create(
        name="hvsync sync",
        status="completed",
        data={"sync": block},
        job_id=uuid.uuid4(),
        queue_name="default",
    )


@pytest.fixture
def runs(hv):
    vm1, vm2 = hv["vm1"].pk, hv["vm2"].pk
    return {
        "vm1": sync_job(hv_endpoint_ids=[hv["endpoint"].pk], vm_ids=[vm1], run_id="r1"),
        "vm2": sync_job(hv_endpoint_ids=[hv["other"].pk], vm_ids=[vm2], run_id="r2"),
    }


def ids(response):
    assert response.status_code == 200, response.content
    return sorted(row["id"] for row in response.json()["results"])


@pytest.mark.parametrize("value", NOT_WHOLE_NUMBERS)
def test_inventory_vm_id_takes_whole_numbers_only(api, runs, value):
    response = api.get(SYNC_JOBS, {"inventory_vm_id": value})
    assert response.status_code == 400, (value, response.status_code, response.content[:200])
    body = response.json()
    assert list(body) == ["inventory_vm_id"] and "whole numbers" in body["inventory_vm_id"][0]


def test_inventory_vm_id_matches_exactly_the_vm(api, runs, hv):
    assert ids(api.get(SYNC_JOBS, {"inventory_vm_id": hv["vm1"].pk})) == [runs["vm1"].pk]
    assert ids(api.get(SYNC_JOBS, {"inventory_vm_id": f" {hv['vm2'].pk} "})) == [runs["vm2"].pk]
    assert ids(api.get(SYNC_JOBS, {"inventory_vm_id": str(2**63 - 1)})) == []


@pytest.mark.parametrize(
    "name", ["hv_endpoint_id", "cluster_id", "node_id", "id", "id__gte", "object_id", "interval", "user_id"]
)
@pytest.mark.parametrize("value", ["1.5", "1_0", "\u0661", "1E+5000"])
def test_every_integer_filter_of_sync_jobs_is_strict(api, runs, name, value):
    response = api.get(SYNC_JOBS, {name: value})
    assert response.status_code == 400, (name, value, response.content[:200])
    assert name in response.json()


def test_endpoint_filters_still_match_by_id(api, runs, hv):
    assert ids(api.get(SYNC_JOBS, {"hv_endpoint_id": hv["endpoint"].pk})) == [runs["vm1"].pk]
    assert ids(api.get(SYNC_JOBS, {"cluster_id": hv["other_cluster"].pk})) == [runs["vm2"].pk]
    assert ids(api.get(SYNC_JOBS, {"run_id": "r2"})) == [runs["vm2"].pk]


@pytest.mark.parametrize("name", ["hv_endpoint_id", "id", "sync_type", "status"])
def test_more_than_100_values_of_one_filter_is_a_400(api, runs, hv, name):
    from netbox_hvsync.filtersets import MAX_FILTER_VALUES

    assert MAX_FILTER_VALUES == 100
    value = {"hv_endpoint_id": hv["endpoint"].pk, "id": runs["vm1"].pk, "sync_type": "storage"}.get(
        name, "completed"
    )
    at_bound = api.get(SYNC_JOBS, {name: [value] * 100})
    assert at_bound.status_code == 200, at_bound.content[:200]
    over = api.get(SYNC_JOBS, {name: [value] * 101})
    assert over.status_code == 400
    assert over.json() == {name: ["At most 100 values per filter; 101 were given."]}


@pytest.mark.parametrize(
    ("route", "name"),
    [
        ("backup-routines/", "endpoint_id"),
        ("backup-routines/", "node_id"),
        ("backup-routines/", "keep_last"),
        ("replications/", "virtual_machine_id"),
        ("replications/", "jobnum"),
        ("hv-endpoints/", "site_id"),
        ("hv-endpoints/", "port"),
        ("clusters/", "endpoint_id"),
        ("storage/", "node_id"),
        ("backups/", "vmid"),
        ("deletion-requests/", "endpoint_id"),
        ("deletion-requests/", "object_id"),
        ("apply-jobs/", "endpoint_id"),
        ("synced-virtual-machines/", "endpoint_id"),
        ("synced-virtual-machines/", "vmid"),
        ("synced-interfaces/", "vm_interface"),
    ],
)
@pytest.mark.parametrize("value", ["1.5", "1_0", "\u0661"])
def test_other_routes_integer_filters_are_strict(api, hv, route, name, value):
    response = api.get(API + route, {name: value})
    assert response.status_code == 400, (route, name, value, response.content[:200])
    assert name in response.json()


def test_other_routes_match_by_id_and_keep_isnull(api, hv):
    rows = api.get(API + "clusters/", {"endpoint_id": hv["endpoint"].pk}).json()["results"]
    assert [r["name"] for r in rows] == ["cluster-a"]
    both = api.get(API + "clusters/", {"endpoint_id": [hv["endpoint"].pk, hv["other"].pk]})
    assert sorted(r["name"] for r in both.json()["results"]) == ["cluster-a", "cluster-b"]
    ports = api.get(API + "hv-endpoints/", {"port__gte": "8006"})
    assert ports.status_code == 200 and len(ports.json()["results"]) == 2
    over = api.get(API + "clusters/", {"endpoint_id": [hv["endpoint"].pk] * 101})
    assert over.status_code == 400 and "endpoint_id" in over.json()
