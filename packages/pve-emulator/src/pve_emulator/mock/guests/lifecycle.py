"""A guest's life after creation: power state, status, migration, template conversion, disk resize, delete."""

from __future__ import annotations

import re
import time
from typing import Any

from pve_emulator.errors import ApiError, bad_param
from pve_emulator.mock.guests.common import (
    disk_entries,
    guest_of,
    is_disk_key,
    list_entry,
    set_running,
    size_bytes,
    to_base_volumes,
)
from pve_emulator.mock.guests.config import apply_pending
from pve_emulator.mock.guests.qemu import agent_enabled
from pve_emulator.mock.locks import (
    CHECKSUM,
    LABEL,
    MODIFIED,
    check_lock,
    config_digest,
    hold_lock,
    lock_error,
)
from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import ClusterState, Guest, GuestKind


def _linked_clones_of(state: ClusterState, guest: Guest) -> list[str]:
    """Base volumes of a template that a linked clone still uses (``base-100-disk-0/vm-123-disk-0``)."""
    bases = {f"{s}:{n}" for _, s, n, _ in disk_entries(guest) if n.startswith("base-")}
    used = set()
    for other in state.guests.values():
        for _, s, n, _ in disk_entries(other):
            if "/" in n and f"{s}:{n.split('/', 1)[0]}" in bases:
                used.add(f"{s}:{n.split('/', 1)[0]}")
    return sorted(used)


def delete_guest(call: Call, kind: GuestKind) -> str:
    guest = guest_of(call, kind)
    check_lock(call.state, guest, call.identity, call.params)
    if guest.status == "running":
        raise bad_param(
            "vmid", f"{'VM' if kind == 'qemu' else 'CT'} {guest.vmid} is running - destroy failed"
        )
    state = call.state
    replications = sorted(k for k, j in state.replication_jobs.items() if j.get("guest") == guest.vmid)
    if replications and not call.get("purge"):
        # ReplicationConfig::check_for_existing_jobs: only `purge` removes a guest's replication jobs
        raise ApiError(
            500,
            f"There is a replication job '{replications[0]}' for guest '{guest.vmid}' - Please remove that first.",
        )
    if int(guest.config.get("protection", 0) or 0):
        raise bad_param("vmid", "can't remove guest with protection enabled")
    in_use = _linked_clones_of(state, guest)
    if in_use:
        raise ApiError(500, f"base volume '{in_use[0]}' is still in use by linked cloned")
    del state.guests[guest.vmid]
    if call.get("purge"):
        state.backup_jobs = {
            k: {**j, "vmid": ",".join(v for v in str(j.get("vmid", "")).split(",") if v != str(guest.vmid))}
            for k, j in state.backup_jobs.items()
        }
        for job_id in replications:  # the job, its run state and its last log go with the guest
            del state.replication_jobs[job_id]
            state.replication_logs.pop(job_id, None)
        state.replication_state.pop(guest.vmid, None)
        state.acls = [a for a in state.acls if a.path != f"/vms/{guest.vmid}"]
    return call.state.add_task(
        guest.node, "qmdestroy" if kind == "qemu" else "vzdestroy", str(guest.vmid), call.identity.subject
    ).upid


def guest_status(call: Call, kind: GuestKind) -> dict[str, Any]:
    guest = guest_of(call, kind)
    out = list_entry(guest, time.time())
    out.pop("type", None)
    out["qmpstatus" if kind == "qemu" else "type"] = guest.status if kind == "qemu" else "lxc"
    out["ha"] = {"managed": 0}
    if kind == "qemu":
        out["agent"] = 1 if agent_enabled(guest) else 0
        out["running-machine"] = "pc-i440fx-9.2+pve1" if guest.status == "running" else None
        out = {k: v for k, v in out.items() if v is not None}
    return out


_ACTIONS: dict[str, tuple[str, bool | None]] = {
    "start": ("start", True),
    "stop": ("stop", False),
    "shutdown": ("shutdown", False),
    "reboot": ("reboot", True),
    "reset": ("reset", True),
    "suspend": ("suspend", None),
    "resume": ("resume", True),
}


def power(call: Call, kind: GuestKind, action: str) -> str:
    """Power actions run as tasks: a template or a locked guest makes the task fail, not the call."""
    guest = guest_of(call, kind)
    verb, running = _ACTIONS[action]
    exitstatus = "OK"
    locked = lock_error(call.state, guest, call.identity, call.params)
    if guest.is_template and action == "start":
        exitstatus = f"you can't start a {'vm' if kind == 'qemu' else 'CT'} if it's a template"
    elif locked and action != "resume":
        exitstatus = locked
    elif action in ("reboot", "shutdown", "suspend", "reset") and guest.status != "running":
        exitstatus = f"{'VM' if kind == 'qemu' else 'CT'} {guest.vmid} not running"
    elif action == "start" and guest.status == "running":
        exitstatus = f"{'VM' if kind == 'qemu' else 'CT'} {guest.vmid} already running"
    else:
        if action == "suspend":
            guest.status = "paused" if kind == "qemu" else "frozen"
        elif running is not None:
            if running and (guest.status != "running" or action == "reboot"):
                apply_pending(guest)  # a (re)start boots the pending config
            set_running(guest, running)
    prefix = "qm" if kind == "qemu" else "vz"
    log = [f"{verb} {guest.vmid}", "TASK OK" if exitstatus == "OK" else f"TASK ERROR: {exitstatus}"]
    call.state.bump()
    return call.state.add_task(
        guest.node, f"{prefix}{verb}", str(guest.vmid), call.identity.subject, log=log, exitstatus=exitstatus
    ).upid


def migrate(call: Call, kind: GuestKind) -> str:
    """Move a guest to another node: a task on the source node, ``lock: migrate`` while it runs."""
    guest = guest_of(call, kind)
    target = call.params["target"]
    if target not in call.state.nodes:
        raise bad_param("target", f"no such node '{target}'")
    if target == guest.node:
        raise bad_param("target", "target is local node.")
    check_lock(call.state, guest, call.identity, {})
    if guest.status == "running":
        if kind == "qemu" and not call.get("online"):
            raise ApiError(500, "can't migrate running VM without --online")
        if kind == "lxc" and not (call.get("online") or call.get("restart")):
            raise ApiError(500, "can't migrate running container without --online or --restart")
    source = guest.node
    label = "VM" if kind == "qemu" else "CT"
    mode = "online" if guest.status == "running" else "offline"
    if kind == "lxc" and guest.status == "running":
        mode = "restart"
    log = [
        f"use dedicated network address for sending migration traffic ({call.state.nodes[target].ip})",
        f"starting migration of {label} {guest.vmid} to node '{target}' ({call.state.nodes[target].ip})",
        f"{mode} migration of {label} {guest.vmid}",
        "migration finished successfully (duration 00:00:01)",
        "TASK OK",
    ]
    guest.node = target
    task = call.state.add_task(
        source, "qmigrate" if kind == "qemu" else "vzmigrate", str(guest.vmid), call.identity.subject, log=log
    )
    hold_lock(call.state, guest, "migrate", task)
    return task.upid


def make_template(call: Call, kind: GuestKind) -> Any:
    """Convert a stopped guest without snapshots: its disks become read-only ``base-`` volumes."""
    guest = guest_of(call, kind)
    label = LABEL[kind]
    check_lock(call.state, guest, call.identity, {})
    if guest.snapshots:
        raise ApiError(500, f"unable to create template, because {label} contains snapshots")
    if guest.is_template:
        raise ApiError(500, "you can't convert a template to a template")
    if guest.status == "running":
        running = "VM is running" if kind == "qemu" else "the CT is running"
        raise ApiError(500, f"you can't convert a {label} to template if {running}")
    to_base_volumes(guest)
    guest.config["template"] = 1
    guest.pending, guest.pending_delete = {}, []
    call.state.bump()
    task = call.state.add_task(
        guest.node, "qmtemplate" if kind == "qemu" else "vztemplate", str(guest.vmid), call.identity.subject
    )
    return task.upid if kind == "qemu" else None


_SIZE = re.compile(r"^(\+)?(\d+(?:\.\d+)?)([KMGT])?$")
_UNITS = {None: 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def format_size(size: int) -> str:
    """PVE's ``format_size``: the largest unit that divides the size exactly."""
    for unit in ("T", "G", "M", "K"):
        if size % _UNITS[unit] == 0 and size >= _UNITS[unit]:
            return f"{size // _UNITS[unit]}{unit}"
    return str(size)


def _resize_error(call: Call, guest: Guest) -> str | None:
    """Why the resize worker dies (its text), or None after growing the disk in the config."""
    kind = guest.kind
    if call.get("digest") and call.params["digest"] != config_digest(guest):
        return CHECKSUM if kind == "qemu" else MODIFIED
    locked = lock_error(call.state, guest, call.identity, call.params)
    if locked:
        return locked
    disk = call.params["disk"]
    value = guest.config.get(disk)
    if value is None or not is_disk_key(kind, disk):
        return f"disk '{disk}' does not exist"
    text = str(value)
    volume, _, rest = text.partition(",")
    if kind == "qemu" and "media=cdrom" in rest:
        return "you can't resize a cdrom"
    if ":" not in volume:
        return f"disk '{disk}' has no associated volume"
    match = _SIZE.match(str(call.params["size"]))
    if match is None:
        return "invalid size string"
    grow, number, unit = match.groups()
    current = next((size_bytes(p[5:]) for p in rest.split(",") if p.startswith("size=")), 0)
    new = int(float(number) * _UNITS[unit]) + (current if grow else 0)
    if new < current:
        return "shrinking disks is not supported" if kind == "qemu" else "unable to shrink disk size"
    if new == current:
        return None if kind == "qemu" else "disk is already at specified size"
    opts = [p for p in rest.split(",") if p and not p.startswith("size=")]
    guest.config[disk] = ",".join([volume, *opts, f"size={format_size(new)}"])
    return None


def resize(call: Call, kind: GuestKind) -> str:
    """Grow a disk (``+size`` or an absolute size) in a ``resize`` task; refusals fail the task."""
    guest = guest_of(call, kind)
    before = guest.config.get(call.params["disk"])
    error = _resize_error(call, guest)
    disk, size = call.params["disk"], call.params["size"]
    if error:
        log = [f"TASK ERROR: {error}"]
    else:
        log = [f"update VM {guest.vmid}: resize --disk {disk} --size {size}", "TASK OK"]
        if kind == "lxc":
            log = [f"resize volume {str(before).split(',', 1)[0]} of {disk} to {size}", "TASK OK"]
    call.state.bump()
    return call.state.add_task(
        guest.node, "resize", str(guest.vmid), call.identity.subject, log=log, exitstatus=error or "OK"
    ).upid
