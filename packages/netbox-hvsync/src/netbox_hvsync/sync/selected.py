"""Selected-objects jobs for every object type (SPEC 4.5 "Selected-objects job", items 3-6).

Each object is pinned with the rules' owner table (`rules.scope.pin_object`) and synced by one call to the
backend's `/sync/individual/<kind>` with the query that names it (a VM's VMID, a storage id, a backup's
VMID and volume id, a snapshot's VMID and name, a task's UPID). Answers are handled alike for every
type: failed objects are named, and any failure fails the job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from netbox_hvsync.backend.resolution import ResolvedBackend
from netbox_hvsync.rules.preflight import append_hint
from netbox_hvsync.rules.redaction import redacted_detail
from netbox_hvsync.rules.scope import (
    ObjectKind,
    SelectedCallContext,
    SelectedObject,
    pin_object,
    selected_job_failure,
    summarize_failed_objects,
)
from netbox_hvsync.rules.transport import TransportError, call
from netbox_hvsync.sync.lookups import vm_vmid
from netbox_hvsync.sync.state import RunState
from netbox_hvsync.wire import SELECTED_KINDS

INDIVIDUAL_TIMEOUT = 600.0


@dataclass(frozen=True)
class SelectedType:
    """One object type a selected-objects job accepts: its model label, core kind and backend route."""

    label: str
    kind: ObjectKind
    path: str


#: The plugin's object types and the rule kind each is pinned as (SPEC 4.5 "Selected-objects job", item 5).
_KINDS: Mapping[str, ObjectKind] = {
    "vm": ObjectKind.VIRTUAL_MACHINE,
    "storage": ObjectKind.STORAGE,
    "backup": ObjectKind.BACKUP,
    "snapshot": ObjectKind.SNAPSHOT,
    "task-history": ObjectKind.TASK_HISTORY,
}
#: Every selected-object kind the backend offers for a plugin object type (wire data), in wire order.
SELECTED_TYPES: Mapping[str, SelectedType] = {
    kind.object_type: SelectedType(kind.object_type, _KINDS[kind.kind], kind.route)
    for kind in SELECTED_KINDS.values()
    if kind.object_type is not None
}
VM_TYPE = SELECTED_KINDS["vm"].object_type or ""


def model_of(label: str) -> Any:
    """The Django model of a selected type's label."""
    from django.apps import apps

    app_label, model_name = label.split(".", 1)
    return apps.get_model(app_label, model_name)


@dataclass(frozen=True)
class Target:
    """What the backend needs to find one object in Proxmox (`query`), or why it cannot be asked."""

    label: str
    query: Mapping[str, str] | None
    reason: str = ""


NEVER_SYNCED = "no Proxmox VMID known for this VM (it was never synced by hvsync)"


def target_of(kind: ObjectKind, obj: Any) -> Target:
    """The per-object query of each kind (docs/sync.md "Selected-object syncs")."""
    if obj is None:
        return Target("", None, "no such object (deleted since the job was queued?)")
    if kind is ObjectKind.VIRTUAL_MACHINE:
        vmid = vm_vmid(obj)
        return Target(obj.name, {"vmid": str(vmid)} if vmid is not None else None, NEVER_SYNCED)
    if kind is ObjectKind.STORAGE:
        return Target(obj.name, {"storage": obj.name})
    if kind is ObjectKind.BACKUP:
        return Target(obj.volid, {"vmid": str(obj.vmid), "volid": obj.volid})
    if kind is ObjectKind.SNAPSHOT:
        vm = obj.virtual_machine
        vmid = vm_vmid(vm)
        label = f"{vm.name}@{obj.name}"
        query = {"vmid": str(vmid), "name": obj.name} if vmid is not None else None
        return Target(label, query, f"the snapshot's VM: {NEVER_SYNCED}")
    return Target(obj.upid, {"upid": obj.upid})


def selected_ids(block: Mapping[str, Any], selected: SelectedType) -> list[int]:
    """VMs keep their ids in `vm_ids` (the sync-job filters read it); other types in `object_ids`."""
    key = "vm_ids" if selected.label == VM_TYPE else "object_ids"
    return [int(i) for i in block.get(key) or []]


def run_objects(
    run: RunState,
    resolved: ResolvedBackend,
    scope_map: Mapping[int, int],
    job_scope: str,
    lookups: Any,
    hint: str,
) -> None:
    """One `/sync/individual/<kind>` call per object; any failed object fails the job (raised)."""
    selected = SELECTED_TYPES[run.block.get("batch_object_type") or VM_TYPE]
    ids = selected_ids(run.block, selected)
    rows = {o.pk: o for o in model_of(selected.label).objects.filter(pk__in=ids)}
    context = SelectedCallContext(job_scope, None, resolved.row.pk)
    failures: list[tuple[str, str]] = []
    results: list[dict[str, Any]] = []
    for pk in ids:
        target = target_of(selected.kind, rows.get(pk))
        obj = SelectedObject(selected.kind, pk, target.label)
        name = obj.describe()
        pin = pin_object(obj, lookups, scope_map, job_scope) if pk in rows else None
        if pin is not None and not pin.ok:
            failures.append((name, f"HTTP {pin.status}: {pin.error}"))
            results.append({"object": name, "ok": False, "status": pin.status, "error": pin.error})
            continue
        if pin is None or target.query is None:
            failures.append((name, target.reason))
            results.append({"object": name, "ok": False, "status": None, "error": target.reason})
            continue
        query = {**context.for_object(pin).query(), **target.query}
        result = _call(run, resolved, selected.path, query, name)
        results.append(result)
        if not result["ok"]:
            failures.append((name, result["reason"]))
            result.pop("reason")
    run.block["objects"] = results
    for line in summarize_failed_objects(failures):
        run.logger.error("selected object failed: %s", line)
    message = selected_job_failure(failures)
    if message:
        raise run.fail(append_hint(message, hint))
    run.logger.info("selected-object sync finished: %d %s object(s)", len(results), selected.kind.value)
    run.block["runtime"]["total_ms"] = run._ms(run.started)
    run.save()


def _call(
    run: RunState, resolved: ResolvedBackend, path: str, query: Mapping[str, str], name: str
) -> dict[str, Any]:
    try:
        answer = call(
            resolved.transport,
            "POST",
            resolved.context.url(path) + "?" + urlencode(query, safe=",:@"),
            headers=resolved.context.auth_headers(),
            timeout=INDIVIDUAL_TIMEOUT,
        )
    except TransportError as exc:
        reason = f"backend unreachable ({exc.kind})"
        return {
            "object": name,
            "ok": False,
            "status": None,
            "error": reason,
            "reason": reason,
            "failure_kind": "transport",
        }
    body = answer.body if isinstance(answer.body, Mapping) else {}
    if answer.status == 200 and body.get("ok") is True:
        return {"object": name, "ok": True, "status": 200, "summary": body.get("summary")}
    detail = (
        redacted_detail(answer.body, answer.text, run.secrets) if answer.is_json else f"HTTP {answer.status}"
    )
    return {
        "object": name,
        "ok": False,
        "status": answer.status,
        "error": detail,
        "reason": f"HTTP {answer.status}: {detail}",
    }


def unknown_type_message(label: str, supported: Sequence[str] = tuple(SELECTED_TYPES)) -> str:
    return (
        f"Selected-object sync did not run: object type {label!r} is not supported "
        f"(supported: {', '.join(supported)})"
    )
