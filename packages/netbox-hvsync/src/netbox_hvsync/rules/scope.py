"""Endpoint scope of sync jobs (SPEC 4.5 "Selected-objects job" and "Endpoint scope of a staged job").

Selected objects are pinned to the owner of their cluster (the 424 table); a job whose scope resolves
to nothing fails before any backend call; failed objects are named up to
`BATCH_FAILURE_DETAIL_LIMIT` and the rest summarised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from .constants import BATCH_FAILURE_DETAIL_LIMIT
from .wire_ids import BatchResolution

SELECTED_NOT_RUN_PREFIX = "Selected-object sync did not run:"
NO_STAGE_RAN = "No sync stage ran"
MODE_DISABLED_REASON = "disabled by sync mode"
FAILED_DEPENDENCY = 424


class ScopeError(Exception):
    """The job cannot run (or must fail) because of its endpoint scope."""


class ObjectKind(StrEnum):
    VIRTUAL_MACHINE = "virtual_machine"
    STORAGE = "storage"
    BACKUP = "backup"
    SNAPSHOT = "snapshot"
    TASK_HISTORY = "task_history"


@dataclass(frozen=True)
class SelectedObject:
    kind: ObjectKind
    pk: int
    label: str = ""

    def describe(self) -> str:
        return f"{self.kind.value} {self.pk}" + (f" ({self.label})" if self.label else "")


class ClusterLookups(Protocol):
    """Lookups the glue answers from its models; None means "not known"."""

    def vm_cluster(self, vm_id: int) -> int | None: ...
    def storage_cluster(self, storage_id: int) -> int | None: ...
    def backup_storage(self, backup_id: int) -> int | None: ...
    def snapshot_vm(self, snapshot_id: int) -> int | None: ...
    def task_vm(self, task_id: int) -> int | None: ...
    def cluster_claimants(self, cluster_id: int) -> Sequence[int]: ...


def owning_cluster(obj: SelectedObject, lookups: ClusterLookups) -> int | None:
    """A VM and a storage carry their cluster; a backup resolves through its storage; snapshots and
    task-history rows through their VM."""
    if obj.kind is ObjectKind.VIRTUAL_MACHINE:
        return lookups.vm_cluster(obj.pk)
    if obj.kind is ObjectKind.STORAGE:
        return lookups.storage_cluster(obj.pk)
    if obj.kind is ObjectKind.BACKUP:
        storage = lookups.backup_storage(obj.pk)
        return None if storage is None else lookups.storage_cluster(storage)
    vm = lookups.snapshot_vm(obj.pk) if obj.kind is ObjectKind.SNAPSHOT else lookups.task_vm(obj.pk)
    return None if vm is None else lookups.vm_cluster(vm)


@dataclass(frozen=True)
class ObjectPin:
    """`hv_endpoint_ids` to send for one object, or a 424 failure for it alone."""

    hv_endpoint_ids: str | None
    status: int | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is None


def pin_object(
    obj: SelectedObject,
    lookups: ClusterLookups,
    scope_map: Mapping[int, int],
    job_scope: str | None,
) -> ObjectPin:
    """Apply the owner table: present owner -> its backend id alone; owner absent from the map or
    ambiguous -> 424 for this object (naming the endpoint id or every claimant); unresolvable -> the
    job-wide scope."""
    cluster = owning_cluster(obj, lookups)
    claimants = sorted(set(lookups.cluster_claimants(cluster))) if cluster is not None else []
    if not claimants:
        return ObjectPin(job_scope)
    if len(claimants) > 1:
        names = ", ".join(str(pk) for pk in claimants)
        return ObjectPin(
            None,
            FAILED_DEPENDENCY,
            f"{obj.describe()}: cluster {cluster} is claimed by several hv endpoints ({names}); owner ambiguous",
        )
    owner = claimants[0]
    if owner not in scope_map:
        return ObjectPin(
            None,
            FAILED_DEPENDENCY,
            f"{obj.describe()}: owning hv endpoint {owner} is not in this job's resolved endpoint scope",
        )
    return ObjectPin(str(scope_map[owner]))


def selected_scope(resolution: BatchResolution) -> tuple[str, list[str]]:
    """Job-wide `hv_endpoint_ids` for a selected-objects job, plus warnings for a partial resolution.

    Raises ScopeError (message starting `Selected-object sync did not run:`) when nothing resolves;
    the caller must then make no backend call."""
    if not resolution.scope_map:
        reasons = "; ".join(resolution.dropped.values()) or "no hv endpoint in scope"
        raise ScopeError(f"{SELECTED_NOT_RUN_PREFIX} no hv endpoint resolved to a backend id ({reasons})")
    warnings = [f"hv endpoint dropped from scope: {reason}" for reason in resolution.dropped.values()]
    return resolution.backend_ids_csv, warnings


def selected_object_query(hv_endpoint_ids: str | None, branch_schema_id: str | None) -> dict[str, str]:
    """Query parameters of a per-object call; an absent value is omitted (absent ids = every endpoint)."""
    query: dict[str, str] = {}
    if hv_endpoint_ids:
        query["hv_endpoint_ids"] = hv_endpoint_ids
    if branch_schema_id:
        query["inventory_branch_schema_id"] = branch_schema_id
    return query


@dataclass(frozen=True)
class StageRecord:
    endpoint_pk: int
    stage: str
    ran: bool
    reason: str = ""


def mode_disabled_stage(endpoint_pk: int, stage: str) -> StageRecord:
    """An endpoint whose selected stage is disabled by sync mode: a skipped stage, not a scope error."""
    return StageRecord(endpoint_pk, stage, ran=False, reason=MODE_DISABLED_REASON)


#: Stages whose every object belongs to a guest: an endpoint syncing neither VMs nor templates has nothing
#: to do in them. Task history, backups of storage and the rest also hold node-level objects, so they run.
GUEST_STAGES = frozenset({"virtual-machines", "vm-disks", "vm-snapshots", "vm-interfaces"})


@dataclass(frozen=True)
class SyncModes:
    """An hv endpoint's sync modes (SPEC 4.3): which guest kinds the backend syncs for it."""

    vm: bool = True
    vm_template: bool = True

    @property
    def query(self) -> dict[str, str]:
        """The stage query flags; a disabled kind is always sent explicitly, an enabled one too, so the
        backend's default never decides."""
        return {
            "sync_mode_vm": "true" if self.vm else "false",
            "sync_mode_vm_template": "true" if self.vm_template else "false",
        }


@dataclass(frozen=True)
class StageCall:
    """One backend call of a stage: the endpoints sharing one pair of sync modes (the flags are query
    parameters of the whole call, so endpoints with different modes need separate calls)."""

    modes: SyncModes
    scope_map: dict[int, int]

    @property
    def backend_ids_csv(self) -> str:
        return ",".join(str(i) for i in sorted(set(self.scope_map.values())))


def stage_calls(
    stage: str, scope_map: Mapping[int, int], modes: Mapping[int, SyncModes]
) -> tuple[list[StageCall], list[StageRecord]]:
    """The calls one stage needs, and the endpoints it skips because their modes leave it nothing to do
    (SPEC 4.5: recorded as skipped stages with the mode-disabled reason, not as scope errors)."""
    groups: dict[SyncModes, dict[int, int]] = {}
    skipped: list[StageRecord] = []
    for pk, backend_id in sorted(scope_map.items()):
        mode = modes.get(pk, SyncModes())
        if stage in GUEST_STAGES and not (mode.vm or mode.vm_template):
            skipped.append(mode_disabled_stage(pk, stage))
            continue
        groups.setdefault(mode, {})[pk] = backend_id
    default_first = sorted(groups.items(), key=lambda item: (not item[0].vm, not item[0].vm_template))
    return [StageCall(mode, group) for mode, group in default_first], skipped


def staged_job_failure(resolution: BatchResolution, stages: Sequence[StageRecord]) -> str | None:
    """The failure a staged job ends with because of scope, or None.

    Nothing resolved (or no stage ran at all, skipped stages not counting) -> `No sync stage ran`;
    some endpoints never resolved -> a message with the number of skipped endpoints."""
    ran = [s for s in stages if s.ran]
    if not resolution.scope_map or not ran:
        details = "; ".join(resolution.dropped.values())
        skipped = [f"{s.stage} (endpoint {s.endpoint_pk}: {s.reason})" for s in stages if not s.ran]
        parts = [p for p in (details, ", ".join(skipped) and "skipped stages: " + ", ".join(skipped)) if p]
        return NO_STAGE_RAN + (": " + "; ".join(parts) if parts else "")
    if resolution.dropped:
        count = len(resolution.dropped)
        return f"{count} hv endpoint(s) skipped because they never resolved to a backend id: " + "; ".join(
            resolution.dropped.values()
        )
    return None


def summarize_failed_objects(
    failures: Sequence[tuple[str, str]], limit: int = BATCH_FAILURE_DETAIL_LIMIT
) -> list[str]:
    """Job-log lines: the first `limit` failed objects by name and reason, then one summary line."""
    lines = [f"{name}: {reason}" for name, reason in failures[:limit]]
    rest = len(failures) - limit
    if rest > 0:
        lines.append(f"... and {rest} more failed object(s)")
    return lines


def selected_job_failure(failures: Sequence[tuple[str, str]]) -> str | None:
    """Any failed object fails the enclosing selected-objects job (SPEC 4.5 item 6); the message names
    failed objects up to the limit and summarises the rest. None when every object succeeded."""
    if not failures:
        return None
    return f"{len(failures)} selected object(s) failed: " + "; ".join(summarize_failed_objects(failures))


@dataclass(frozen=True)
class SelectedCallContext:
    """What every per-object call (and every recursive dependency call) carries explicitly: the resolved
    backend ids, the branch schema id and the job's backend endpoint pin (SPEC 4.5 item 3)."""

    hv_endpoint_ids: str | None
    branch_schema_id: str | None
    backend_endpoint_id: int | None

    def query(self) -> dict[str, str]:
        return selected_object_query(self.hv_endpoint_ids, self.branch_schema_id)

    def for_object(self, pin: ObjectPin) -> SelectedCallContext:
        """The same context narrowed to one object's pinned scope (the pin and branch stay)."""
        if not pin.ok:
            raise ValueError(f"object failed scope pinning: {pin.error}")
        return SelectedCallContext(pin.hv_endpoint_ids, self.branch_schema_id, self.backend_endpoint_id)
