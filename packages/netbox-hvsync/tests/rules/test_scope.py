"""SPEC 4.5 "Selected-objects job" (items 2-6, the 424 table) and "Endpoint scope of a staged job"."""

from collections.abc import Sequence

import pytest
from netbox_hvsync.rules.scope import (
    MODE_DISABLED_REASON,
    ObjectKind,
    ScopeError,
    SelectedObject,
    StageRecord,
    mode_disabled_stage,
    owning_cluster,
    pin_object,
    selected_object_query,
    selected_scope,
    staged_job_failure,
    summarize_failed_objects,
)
from netbox_hvsync.rules.wire_ids import BatchResolution


class Lookups:
    """Cluster 10 owned by endpoint 7, cluster 11 by endpoint 8, cluster 12 claimed by 7 and 9, 13 unclaimed."""

    vms = {100: 10, 101: 11, 102: 12, 103: 13, 104: None}
    storages = {200: 10, 201: 12}
    backups = {300: 200, 301: 201, 302: None}
    snapshots = {400: 101, 401: None}
    tasks = {500: 100, 501: 103}
    claims = {10: [7], 11: [8], 12: [9, 7], 13: []}

    def vm_cluster(self, vm_id: int) -> int | None:
        return self.vms.get(vm_id)

    def storage_cluster(self, storage_id: int) -> int | None:
        return self.storages.get(storage_id)

    def backup_storage(self, backup_id: int) -> int | None:
        return self.backups.get(backup_id)

    def snapshot_vm(self, snapshot_id: int) -> int | None:
        return self.snapshots.get(snapshot_id)

    def task_vm(self, task_id: int) -> int | None:
        return self.tasks.get(task_id)

    def cluster_claimants(self, cluster_id: int) -> Sequence[int]:
        return self.claims.get(cluster_id, [])


L = Lookups()
SCOPE_MAP = {7: 70, 9: 90}  # endpoint 8 did not resolve
JOB_SCOPE = "70,90"


def test_object_types_resolve_their_cluster() -> None:
    """Item 5: "A VM and a storage carry their cluster directly; a backup resolves through its storage;
    snapshots and task-history rows through their VM." """
    assert owning_cluster(SelectedObject(ObjectKind.VIRTUAL_MACHINE, 100), L) == 10
    assert owning_cluster(SelectedObject(ObjectKind.STORAGE, 201), L) == 12
    assert owning_cluster(SelectedObject(ObjectKind.BACKUP, 300), L) == 10
    assert owning_cluster(SelectedObject(ObjectKind.BACKUP, 302), L) is None
    assert owning_cluster(SelectedObject(ObjectKind.SNAPSHOT, 400), L) == 11
    assert owning_cluster(SelectedObject(ObjectKind.SNAPSHOT, 401), L) is None
    assert owning_cluster(SelectedObject(ObjectKind.TASK_HISTORY, 500), L) == 10


def test_owner_table() -> None:
    """Item 4 table: resolved and present -> that endpoint's backend id alone; resolved but absent -> none,
    HTTP 424 naming the endpoint id; ambiguous -> none, 424 naming every claimant; not resolvable -> the
    job-wide scope."""
    present = pin_object(SelectedObject(ObjectKind.VIRTUAL_MACHINE, 100, "web1"), L, SCOPE_MAP, JOB_SCOPE)
    assert present.ok and present.hv_endpoint_ids == "70"
    absent = pin_object(SelectedObject(ObjectKind.SNAPSHOT, 400), L, SCOPE_MAP, JOB_SCOPE)
    assert absent.status == 424 and absent.hv_endpoint_ids is None
    assert absent.error == "snapshot 400: owning hv endpoint 8 is not in this job's resolved endpoint scope"
    ambiguous = pin_object(SelectedObject(ObjectKind.STORAGE, 201), L, SCOPE_MAP, JOB_SCOPE)
    assert ambiguous.status == 424 and "(7, 9)" in ambiguous.error
    unresolvable = pin_object(SelectedObject(ObjectKind.VIRTUAL_MACHINE, 103), L, SCOPE_MAP, JOB_SCOPE)
    assert unresolvable.ok and unresolvable.hv_endpoint_ids == JOB_SCOPE
    no_cluster = pin_object(SelectedObject(ObjectKind.VIRTUAL_MACHINE, 104), L, SCOPE_MAP, JOB_SCOPE)
    assert no_cluster.hv_endpoint_ids == JOB_SCOPE


def test_nothing_resolves_means_no_backend_call() -> None:
    """Item 2: "if nothing resolves the job fails with a message starting `Selected-object sync did not
    run:` and no backend call is made. A partial resolution logs a warning and continues on the narrowed
    scope." """
    with pytest.raises(ScopeError) as info:
        selected_scope(BatchResolution({}, {7: "hv endpoint 7 (a): unregistered"}))
    assert str(info.value).startswith("Selected-object sync did not run:")
    assert "unregistered" in str(info.value)
    ids, warnings = selected_scope(BatchResolution({7: 70, 9: 90}, {8: "hv endpoint 8 (b): target mismatch"}))
    assert ids == "70,90" and warnings == [
        "hv endpoint dropped from scope: hv endpoint 8 (b): target mismatch"
    ]


def test_query_parameters() -> None:
    """Item 3: the comma-separated backend ids and the branch schema id travel as query parameters; SPEC
    4.3: absent `hv_endpoint_ids` means every endpoint the backend holds."""
    assert selected_object_query("70,90", "br_abc") == {
        "hv_endpoint_ids": "70,90",
        "inventory_branch_schema_id": "br_abc",
    }
    assert selected_object_query(None, None) == {}


def test_staged_scope_failures() -> None:
    """ "An endpoint that never resolved to a backend id fails the job: `No sync stage ran` when nothing
    resolved, or a message with the number of skipped endpoints when some did." """
    ran = [StageRecord(7, "devices", ran=True)]
    nothing = staged_job_failure(BatchResolution({}, {7: "hv endpoint 7: unregistered"}), [])
    assert nothing is not None and nothing.startswith("No sync stage ran")
    some = staged_job_failure(BatchResolution({7: 70}, {8: "e8 unregistered", 9: "e9 target mismatch"}), ran)
    assert some is not None and some.startswith("2 hv endpoint(s) skipped") and "e9 target mismatch" in some
    assert staged_job_failure(BatchResolution({7: 70}, {}), ran) is None


def test_mode_disabled_is_a_skipped_stage_not_a_scope_error() -> None:
    """ "An endpoint whose selected stages are all disabled by sync mode is recorded as a skipped stage with
    the mode-disabled reason, not as a scope error; a skipped stage does not count as a stage that ran." """
    skipped = mode_disabled_stage(7, "virtual-machines")
    assert skipped == StageRecord(7, "virtual-machines", ran=False, reason=MODE_DISABLED_REASON)
    only_skipped = staged_job_failure(BatchResolution({7: 70}, {}), [skipped])
    assert only_skipped is not None and only_skipped.startswith("No sync stage ran")
    assert "virtual-machines (endpoint 7: disabled by sync mode)" in only_skipped
    assert (
        staged_job_failure(BatchResolution({7: 70}, {}), [skipped, StageRecord(7, "devices", True)]) is None
    )


def test_failed_objects_named_up_to_the_limit() -> None:
    """Item 6: "The job log names failed objects up to BATCH_FAILURE_DETAIL_LIMIT and summarises the rest." """
    failures = [(f"vm {i}", "HTTP 424") for i in range(13)]
    lines = summarize_failed_objects(failures)
    assert (
        len(lines) == 11 and lines[0] == "vm 0: HTTP 424" and lines[-1] == "... and 3 more failed object(s)"
    )
    assert summarize_failed_objects(failures[:10]) == [f"vm {i}: HTTP 424" for i in range(10)]


def test_any_failed_object_fails_the_job() -> None:
    """Item 6: "Any failed object fails the enclosing job"; SPEC 7.3: "Per-object 424 in a selected-objects
    run; the job then fails." """
    from netbox_hvsync.rules.scope import selected_job_failure

    assert selected_job_failure([]) is None
    message = selected_job_failure([("vm 1 (web)", "HTTP 424: owner ambiguous")])
    assert message == "1 selected object(s) failed: vm 1 (web): HTTP 424: owner ambiguous"


def test_call_context_threads_ids_branch_and_pin() -> None:
    """Item 3: ids and branch schema id "travel both as query parameters and as explicit arguments through
    every recursive dependency call; the backend id pin ... is also threaded to every per-object call"."""
    from netbox_hvsync.rules.scope import SelectedCallContext

    job = SelectedCallContext("70,90", "br_1", 3)
    pin = pin_object(SelectedObject(ObjectKind.VIRTUAL_MACHINE, 100), L, SCOPE_MAP, job.hv_endpoint_ids)
    one = job.for_object(pin)
    assert one == SelectedCallContext("70", "br_1", 3)
    assert one.query() == {"hv_endpoint_ids": "70", "inventory_branch_schema_id": "br_1"}
    bad = pin_object(SelectedObject(ObjectKind.STORAGE, 201), L, SCOPE_MAP, job.hv_endpoint_ids)
    with pytest.raises(ValueError, match="owner ambiguous"):
        job.for_object(bad)


def test_stage_calls_group_endpoints_by_sync_modes() -> None:
    """SPEC 4.3: the mode flags are query flags of a stage call; endpoints with different modes need
    different calls, and an endpoint with no guest kind enabled skips the guest-only stages (4.5)."""
    from netbox_hvsync.rules.scope import StageCall, SyncModes, stage_calls

    modes = {1: SyncModes(), 2: SyncModes(vm_template=False), 3: SyncModes(False, False), 4: SyncModes()}
    scope = {1: 11, 2: 12, 3: 13, 4: 14}
    calls, skipped = stage_calls("vm-disks", scope, modes)
    assert calls == [
        StageCall(SyncModes(), {1: 11, 4: 14}),
        StageCall(SyncModes(vm_template=False), {2: 12}),
    ]
    assert calls[0].backend_ids_csv == "11,14"
    assert calls[1].modes.query == {"sync_mode_vm": "true", "sync_mode_vm_template": "false"}
    assert skipped == [StageRecord(3, "vm-disks", ran=False, reason=MODE_DISABLED_REASON)]
    # node-level stages run for every endpoint, each with its own modes
    calls, skipped = stage_calls("devices", scope, modes)
    assert skipped == [] and [c.backend_ids_csv for c in calls] == ["11,14", "12", "13"]
    assert calls[2].modes.query == {"sync_mode_vm": "false", "sync_mode_vm_template": "false"}
    # endpoints without recorded modes sync everything, in one call
    calls, _ = stage_calls("virtual-machines", scope, {})
    assert calls == [StageCall(SyncModes(), scope)]
