"""The SQL sync-job filters give exactly the answers of the reference predicates in netbox_hvsync.rules."""

from __future__ import annotations

import itertools
import uuid

import pytest
from support import API

pytestmark = pytest.mark.django_db

# Odd shapes old or hand-made rows may carry; the reference decides what each one means.
DATA_SHAPES = [
    None,
    {},
    {"sync": None},
    {"sync": {}},
    {"sync": {"sync_types": ["all"], "hv_endpoint_ids": []}},
    {"sync": {"sync_types": [], "sync_type": "storage"}},
    {"sync": {"sync_types": None, "sync_type": "storage"}},
    {"sync": {"sync_type": ""}},
    {"sync": {"sync_type": None, "hv_endpoint_ids": None}},
    {"sync": {"sync_types": "sdn", "hv_endpoint_ids": "{e1}"}},
    {"sync": {"sync_types": ["sdn"], "hv_endpoint_ids": ["STR:{e1}"]}},
    {"sync": {"sync_types": ["", None]}},
    {"sync": {"sync_types": ["storage", "all"], "hv_endpoint_ids": ["junk"]}},
    {"sync": {"sync_types": 7, "hv_endpoint_ids": "{e2}", "vm_ids": "{vm1}"}},
    {"sync": {"sync_types": ["vm-disks"], "hv_endpoint_ids": ["{e1}", "{e2}"], "vm_ids": ["{vm1}", "x"]}},
    {"sync": {"sync_types": ["storage"], "hv_endpoint_ids": [{"{e1}": 1}], "errors": "text"}},
    {"sync": {"run_id": "r-1", "batch_object_type": "virtualization.virtualmachine", "errors": []}},
    {"sync": {"stages": [{"stage": "sdn"}, {"stage": "storage", "error": "boom"}]}},
    {"sync": {"stages": {"sdn": {"ok": False}}}},
    {"sync": {"stages": {"sdn": {"ok": True, "errors": []}}, "error": ""}},
    {"sync": {"stages": [{"ok": True}], "error": {"detail": "x"}}},
    {"sync_types": ["storage"], "hv_endpoint_ids": ["{e2}"], "run_id": "flat"},  # flat legacy row
    {"sync_type": "vm-backups", "errors": ["x"]},  # flat legacy row
]


def materialise(value, ids):
    """Placeholders become real ids: `"{e1}"` as a number, `"STR:{e1}"` as its string form."""
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in ids:
        return ids[value[1:-1]]
    if isinstance(value, str) and value.startswith("STR:"):
        return str(materialise(value[4:], ids))  # an id stored as a string
    if isinstance(value, list):
        return [materialise(v, ids) for v in value]
    if isinstance(value, dict):
        return {str(materialise(k, ids)): materialise(v, ids) for k, v in value.items()}
    return value


@pytest.fixture
def shaped_jobs(hv):
    from core.models import Job

    ids = {"e1": hv["endpoint"].pk, "e2": hv["other"].pk, "vm1": hv["vm1"].pk}
    rows = []
    for data, status in itertools.product(DATA_SHAPES, ("completed", "failed")):
        data = materialise(data, ids)
        rows.append(Job.objects.create(name="hvsync legacy", status=status, data=data, job_id=uuid.uuid4()))
    return rows


def reference_ids(rows, criteria, hv):
    from netbox_hvsync.rules.job_filters import EndpointResolvers, job_matches

    resolvers = EndpointResolvers(
        cluster_endpoint=lambda pk: {
            hv["hv_cluster"].pk: hv["endpoint"].pk,
            hv["other_cluster"].pk: hv["other"].pk,
        }.get(pk),
        node_endpoint=lambda pk: {hv["node1"].pk: hv["endpoint"].pk, hv["other_node"].pk: hv["other"].pk}.get(
            pk
        ),
    )
    return sorted(j.pk for j in rows if job_matches(j.status, j.data, criteria, resolvers))


def test_sql_filters_equal_reference_predicates(api, hv, shaped_jobs):
    from netbox_hvsync.rules.job_filters import SyncJobCriteria

    e1, e2, vm1 = hv["endpoint"].pk, hv["other"].pk, hv["vm1"].pk
    cases = [
        ({"sync_type": "storage"}, SyncJobCriteria(sync_type=("storage",))),
        ({"sync_type": "sdn"}, SyncJobCriteria(sync_type=("sdn",))),
        ({"sync_type": ["vm-backups", "vm-disks"]}, SyncJobCriteria(sync_type=("vm-backups", "vm-disks"))),
        ({"hv_endpoint_id": e1}, SyncJobCriteria(hv_endpoint_id=(e1,))),
        ({"hv_endpoint_id": e2}, SyncJobCriteria(hv_endpoint_id=(e2,))),
        ({"cluster_id": hv["hv_cluster"].pk}, SyncJobCriteria(cluster_id=(hv["hv_cluster"].pk,))),
        ({"node_id": hv["other_node"].pk}, SyncJobCriteria(node_id=(hv["other_node"].pk,))),
        ({"inventory_vm_id": vm1}, SyncJobCriteria(inventory_vm_id=(vm1,))),
        ({"run_id": "r-1"}, SyncJobCriteria(run_id=("r-1",))),
        ({"run_id": "flat"}, SyncJobCriteria(run_id=("flat",))),
        (
            {"batch_object_type": "virtualization.virtualmachine"},
            SyncJobCriteria(batch_object_type=("virtualization.virtualmachine",)),
        ),
        ({"errored": "true"}, SyncJobCriteria(errored=True)),
        ({"errored": "false"}, SyncJobCriteria(errored=False)),
        (
            {"sync_type": "storage", "hv_endpoint_id": e2, "errored": "false"},
            SyncJobCriteria(sync_type=("storage",), hv_endpoint_id=(e2,), errored=False),
        ),
    ]
    mismatches = {}
    for params, criteria in cases:
        response = api.get(API + "sync-jobs/", {**params, "limit": 1000})
        assert response.status_code == 200, (params, response.content)
        got = sorted(r["id"] for r in response.json()["results"])
        expected = reference_ids(shaped_jobs, criteria, hv)
        if got != expected:
            mismatches[str(params)] = {
                "sql_only": sorted(set(got) - set(expected)),
                "reference_only": sorted(set(expected) - set(got)),
            }
    assert mismatches == {}
