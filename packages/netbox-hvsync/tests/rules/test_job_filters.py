"""SPEC 4.4 "Sync-job filter rules" 1-5 over the `data["sync"]` block of core Job rows."""

import pytest
from netbox_hvsync.rules.job_filters import (
    EndpointResolvers,
    SyncJobCriteria,
    is_errored,
    job_matches,
    matches_hv_endpoint,
    matches_sync_type,
    matches_through_endpoint,
    matches_vm,
)


def sync(**block) -> dict:
    return {"sync": block}


@pytest.mark.parametrize("endpoints", [None, [], "absent"])
def test_rule1_empty_absent_or_null_endpoint_list_is_every_endpoint(endpoints) -> None:
    """Rule 1: "An empty endpoint list, an absent key or null means every endpoint; such a run matches any
    hv_endpoint_id, cluster_id or node_id." """
    data = sync() if endpoints == "absent" else sync(hv_endpoint_ids=endpoints)
    assert matches_hv_endpoint(data, [7])
    assert matches_through_endpoint(data, [10], lambda _c: None)
    assert job_matches(
        "completed", data, SyncJobCriteria(hv_endpoint_id=(7,), cluster_id=(10,), node_id=(20,))
    )


def test_endpoint_list_matches_only_its_endpoints_and_resolves_clusters_and_nodes() -> None:
    data = sync(hv_endpoint_ids=[7, 9])
    assert matches_hv_endpoint(data, [9]) and matches_hv_endpoint(data, [1, 7])
    assert not matches_hv_endpoint(data, [8])
    resolvers = EndpointResolvers(cluster_endpoint={10: 7, 11: 8}.get, node_endpoint={20: 9, 21: 8}.get)
    assert job_matches(None, data, SyncJobCriteria(cluster_id=(10,)), resolvers)
    assert not job_matches(None, data, SyncJobCriteria(cluster_id=(11,)), resolvers)
    assert not job_matches(None, data, SyncJobCriteria(cluster_id=(99,)), resolvers), "unresolvable cluster"
    assert job_matches(None, data, SyncJobCriteria(node_id=(20,)), resolvers)
    assert not job_matches(None, data, SyncJobCriteria(node_id=(21,)), resolvers)


@pytest.mark.parametrize(
    "data",
    [
        sync(sync_types=["all"]),
        sync(sync_types=[]),
        sync(),
        sync(sync_types=None),
        sync(sync_types=["devices", "all"]),
    ],
)
def test_rule2_all_or_no_types_match_every_sync_type(data) -> None:
    """Rule 2: "A run recorded with sync types all, or with no types (default all), matches every
    sync_type." """
    assert matches_sync_type(data, ["vm-backups"])


def test_rule2_listed_types_and_legacy_singular_key() -> None:
    """Rule 2: "The legacy singular sync_type key is honoured for old rows." """
    data = sync(sync_types=["devices", "storage"])
    assert matches_sync_type(data, ["storage"]) and matches_sync_type(data, ["sdn", "devices"])
    assert not matches_sync_type(data, ["sdn"])
    legacy = sync(sync_type="storage")
    assert matches_sync_type(legacy, ["storage"]) and not matches_sync_type(legacy, ["devices"])
    assert matches_sync_type(sync(sync_type="all"), ["devices"])
    flat_legacy = {"sync_type": "replications"}
    assert matches_sync_type(flat_legacy, ["replications"]) and not matches_sync_type(flat_legacy, ["sdn"])


def test_rule3_empty_vm_list_is_not_a_wildcard() -> None:
    """Rule 3: "An empty VM list is not a wildcard: it never matches inventory_vm_id." """
    assert not matches_vm(sync(vm_ids=[]), [5])
    assert not matches_vm(sync(), [5])
    assert not matches_vm(sync(vm_ids=None), [5])
    assert matches_vm(sync(vm_ids=[4, 5]), [5])
    assert matches_vm(sync(vm_ids=["5"]), [5])
    assert not matches_vm(sync(vm_ids=[4]), [5])


def test_rule4_errored_is_broader_than_failed() -> None:
    """Rule 4: "errored is broader than a failed status"; SPEC 3.2: "a sync can end completed while
    recording a stage error"."""
    assert is_errored("failed", sync())
    assert is_errored("errored", sync())
    assert is_errored("completed", sync(errors=["stage sdn: HTTP 502"]))
    assert is_errored("completed", sync(stages=[{"stage": "sdn", "ok": False}]))
    assert is_errored("completed", sync(stages={"sdn": {"error": "boom"}}))
    assert not is_errored("completed", sync(stages=[{"stage": "sdn", "ok": True}], errors=[]))
    assert not is_errored("running", sync())
    assert job_matches("completed", sync(errors=["x"]), SyncJobCriteria(errored=True))
    assert not job_matches("completed", sync(errors=["x"]), SyncJobCriteria(errored=False))
    assert job_matches("completed", sync(), SyncJobCriteria(errored=False))


def test_run_id_and_batch_object_type() -> None:
    data = sync(run_id="0b9f", batch_object_type="virtualization.virtualmachine")
    assert job_matches(None, data, SyncJobCriteria(run_id=("0b9f",)))
    assert not job_matches(None, data, SyncJobCriteria(run_id=("ffff",)))
    assert job_matches(None, data, SyncJobCriteria(batch_object_type=("virtualization.virtualmachine",)))
    assert not job_matches(
        None, sync(), SyncJobCriteria(batch_object_type=("virtualization.virtualmachine",))
    )


def test_junk_endpoint_list_is_not_a_wildcard() -> None:
    """Only "an empty endpoint list, an absent key or null" mean every endpoint."""
    assert not matches_hv_endpoint(sync(hv_endpoint_ids=["abc"]), [7])
    assert matches_hv_endpoint(sync(hv_endpoint_ids=["7"]), [7])
