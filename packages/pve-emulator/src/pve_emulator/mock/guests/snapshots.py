"""Guest snapshots: list, take, read and describe, roll back to, delete (``lock: snapshot`` while a task runs)."""

from __future__ import annotations

import time
from typing import Any

from pve_emulator.errors import ApiError, bad_param, not_found
from pve_emulator.mock.guests.common import guest_of, set_running
from pve_emulator.mock.locks import check_lock, hold_lock
from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import Guest, GuestKind, Snapshot


def list_snapshots(call: Call, kind: GuestKind) -> list[dict[str, Any]]:
    guest = guest_of(call, kind)
    out: list[dict[str, Any]] = []
    for snap in guest.snapshots.values():
        entry: dict[str, Any] = {
            "name": snap.name,
            "description": snap.description,
            "snaptime": snap.snaptime,
        }
        if snap.parent:
            entry["parent"] = snap.parent
        if kind == "qemu":
            entry["vmstate"] = snap.vmstate
        out.append(entry)
    current: dict[str, Any] = {
        "name": "current",
        "description": "You are here!",
        "running": int(guest.status == "running"),
    }
    if guest.parent_snapshot:
        current["parent"] = guest.parent_snapshot
    out.append(current)
    return out


def create_snapshot(call: Call, kind: GuestKind) -> str:
    guest = guest_of(call, kind)
    name = call.params["snapname"]
    check_lock(call.state, guest, call.identity, call.params)
    if guest.is_template:
        raise ApiError(500, "you can't take a snapshot if it's a template")
    if name == "current" or name in guest.snapshots:
        raise bad_param("snapname", f"snapshot name '{name}' already used")
    guest.snapshots[name] = Snapshot(
        name=name,
        description=call.get("description", ""),
        snaptime=int(time.time()),
        parent=guest.parent_snapshot,
        vmstate=int(call.get("vmstate", 0) or 0),
        config=dict(guest.config),
    )
    guest.parent_snapshot = name
    task = call.state.add_task(
        guest.node, "qmsnapshot" if kind == "qemu" else "vzsnapshot", str(guest.vmid), call.identity.subject
    )
    hold_lock(call.state, guest, "snapshot", task)
    return task.upid


def _snap(call: Call, kind: GuestKind) -> tuple[Guest, Snapshot]:
    guest = guest_of(call, kind)
    snap = guest.snapshots.get(call.params["snapname"])
    if snap is None:
        raise not_found(f"snapshot '{call.params['snapname']}'")
    return guest, snap


def delete_snapshot(call: Call, kind: GuestKind) -> str:
    guest, snap = _snap(call, kind)
    if not call.get("force"):
        check_lock(call.state, guest, call.identity, call.params)
    for other in guest.snapshots.values():
        if other.parent == snap.name:
            other.parent = snap.parent
    if guest.parent_snapshot == snap.name:
        guest.parent_snapshot = snap.parent
    del guest.snapshots[snap.name]
    task = call.state.add_task(
        guest.node,
        "qmdelsnapshot" if kind == "qemu" else "vzdelsnapshot",
        str(guest.vmid),
        call.identity.subject,
    )
    hold_lock(call.state, guest, "snapshot-delete", task)
    return task.upid


def rollback_snapshot(call: Call, kind: GuestKind) -> str:
    guest, snap = _snap(call, kind)
    check_lock(call.state, guest, call.identity, call.params)
    guest.config = dict(snap.config)
    guest.pending, guest.pending_delete = {}, []
    guest.parent_snapshot = snap.name
    if call.get("start"):
        set_running(guest, True)
    elif kind == "qemu" and not snap.vmstate:
        set_running(guest, False)
    task = call.state.add_task(
        guest.node, "qmrollback" if kind == "qemu" else "vzrollback", str(guest.vmid), call.identity.subject
    )
    hold_lock(call.state, guest, "rollback", task)
    return task.upid


def snapshot_config(call: Call, kind: GuestKind) -> dict[str, Any]:
    _, snap = _snap(call, kind)
    return {
        **snap.config,
        "snaptime": snap.snaptime,
        "description": snap.description,
        **({"parent": snap.parent} if snap.parent else {}),
    }


def update_snapshot(call: Call, kind: GuestKind) -> None:
    _, snap = _snap(call, kind)
    if "description" in call.params:
        snap.description = call.params["description"]
    call.state.bump()


def snapshot_index(call: Call, kind: GuestKind) -> list[dict[str, Any]]:
    _snap(call, kind)
    return [{"cmd": "config"}, {"cmd": "rollback"}]
