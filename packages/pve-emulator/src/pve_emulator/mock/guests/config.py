"""A guest's configuration: creation, reading (current or with pending values), updates and hot-plug."""

from __future__ import annotations

import re
from typing import Any

from pve_emulator.errors import bad_param
from pve_emulator.mock.guests import lxc, qemu
from pve_emulator.mock.guests.common import (
    NET,
    NIC_MODELS,
    disk_entries,
    guest_of,
    is_disk_key,
    mac_for,
    node_of,
    set_running,
    size_bytes,
    to_base_volumes,
)
from pve_emulator.mock.locks import CHECKSUM, MODIFIED, check_digest, check_lock, config_digest
from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import ClusterState, Guest, GuestKind, digest
from pve_emulator.validation import size_in_bytes


def _allocate_disk(
    state: ClusterState, vmid: int, key: str, value: str, kind: GuestKind, taken: set[str]
) -> str:
    """Turn ``storage:SIZE`` (PVE's allocate syntax, size in GiB) into a named volume with size."""
    volume, _, rest = str(value).partition(",")
    storage, sep, name = volume.partition(":")
    if not sep or "media=cdrom" in rest or storage == "none":
        return str(value)
    if storage not in state.storages:
        raise bad_param(key, f"storage '{storage}' does not exist")
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", name):
        size = f"{name}G"
        if size_in_bytes(size) is None:  # a float would make it infinity, and every later read a 500
            raise bad_param(key, "disk size in GiB does not fit in 64 bits")
        index = 0
        prefix = (
            "vm"
            if kind == "qemu"
            else "subvol"
            if state.storages[storage].get("type") in ("zfspool", "dir")
            else "vm"
        )
        while f"{storage}:{prefix}-{vmid}-disk-{index}" in taken:
            index += 1
        volname = f"{prefix}-{vmid}-disk-{index}"
        taken.add(f"{storage}:{volname}")
        opts = [p for p in rest.split(",") if p and not p.startswith("size=")]
        return ",".join([f"{storage}:{volname}", *opts, f"size={size}"])
    return str(value)


def _normalise_net(kind: GuestKind, vmid: int, key: str, value: str) -> str:
    """Give a NIC a MAC address (QEMU ``model=MAC``, LXC ``hwaddr=``) when the caller left it out."""
    index = int(key[3:])
    parts = [p for p in str(value).split(",") if p]
    if kind == "qemu":
        first = parts[0] if parts else "virtio"
        name, _, mac = first.partition("=")
        if name == "model":
            name, mac = mac, ""
        if name in NIC_MODELS and not mac:
            parts[0] = f"{name}={mac_for(vmid, index)}"
        elif name not in NIC_MODELS:
            parts.insert(0, f"virtio={mac_for(vmid, index)}")
    elif not any(p.startswith("hwaddr=") for p in parts):
        parts.append(f"hwaddr={mac_for(vmid, index)}")
    return ",".join(parts)


def build_config(state: ClusterState, kind: GuestKind, vmid: int, params: dict[str, Any]) -> dict[str, Any]:
    skip = qemu.CREATE_ONLY if kind == "qemu" else lxc.CREATE_ONLY
    config: dict[str, Any] = {}
    taken = {f"{s}:{n}" for g in state.guests.values() for _, s, n, _ in disk_entries(g)}
    for key, value in params.items():
        if key in skip:
            continue
        if is_disk_key(kind, key):
            value = _allocate_disk(state, vmid, key, value, kind, taken)
        elif NET.match(key):
            value = _normalise_net(kind, vmid, key, value)
        config[key] = value
    (qemu.default_config if kind == "qemu" else lxc.default_config)(config, vmid)
    return config


def create_guest(call: Call, kind: GuestKind) -> str:
    node = node_of(call)
    vmid = int(call.params["vmid"])
    if vmid in call.state.guests:
        raise bad_param("vmid", f"{'VM' if kind == 'qemu' else 'CT'} {vmid} already exists")
    if kind == "lxc" and "ostemplate" not in call.params:
        raise bad_param("ostemplate", "property is missing and it is not optional")
    pool = call.get("pool")
    if pool is not None and pool not in call.state.pools:
        raise bad_param("pool", f"pool '{pool}' does not exist")
    config = build_config(call.state, kind, vmid, call.params)
    guest = Guest(vmid=vmid, kind=kind, node=node, config=config, pool=pool)
    if guest.is_template:
        to_base_volumes(guest)  # qemu-server turns the disks it creates for a template into base volumes
    call.state.guests[vmid] = guest
    task = call.state.add_task(
        node,
        "qmcreate" if kind == "qemu" else "vzcreate",
        str(vmid),
        call.identity.subject,
        log=[f"creating {kind} {vmid} on {node}", "TASK OK"],
    )
    if call.get("start"):
        set_running(guest, True)
        call.state.add_task(
            node, "qmstart" if kind == "qemu" else "vzstart", str(vmid), call.identity.subject
        )
    return task.upid


def config_view(guest: Guest, current: bool = True) -> dict[str, Any]:
    """GET config: the pending values taken in unless ``current`` (Proxmox's ``load_current_config``)."""
    config = dict(guest.config)
    if not current:
        config.update(guest.pending)
        for key in guest.pending_delete:
            config.pop(key, None)
    config["digest"] = config_digest(guest)
    if guest.parent_snapshot:
        config["parent"] = guest.parent_snapshot
    if guest.lock:
        config["lock"] = guest.lock
    return config


def read_config(call: Call, kind: GuestKind) -> dict[str, Any]:
    guest = guest_of(call, kind)
    snapname = call.get("snapshot")
    if snapname:
        snap = guest.snapshots.get(snapname)
        if snap is None:
            raise bad_param("snapshot", f"snapshot '{snapname}' does not exist")
        return {**snap.config, "digest": digest(snap.config)}
    return config_view(guest, current=bool(call.get("current")))


def pending_view(guest: Guest) -> list[dict[str, Any]]:
    """GET pending as PVE's ``config_with_pending_array``: value, then ``pending`` / ``delete`` markers."""
    out: list[dict[str, Any]] = []
    config = {**guest.config, **({"lock": guest.lock} if guest.lock else {})}
    for key, value in sorted(config.items()):
        item: dict[str, Any] = {"key": key, "value": str(value)}
        if key in guest.pending:
            item["pending"] = str(guest.pending[key])
        if key in guest.pending_delete:
            item["delete"] = 1
        out.append(item)
    out += [{"key": k, "pending": str(v)} for k, v in sorted(guest.pending.items()) if k not in config]
    out += [{"key": k, "delete": 1} for k in guest.pending_delete if k not in config]
    return out


def read_pending(call: Call, kind: GuestKind) -> list[dict[str, Any]]:
    return pending_view(guest_of(call, kind))


UPDATE_CONTROL = {"node", "vmid", "delete", "revert", "digest", "force", "skiplock", "background_delay"}


def hot_pluggable(guest: Guest, key: str, deleting: bool = False) -> bool:
    """Whether a change of ``key`` reaches a running guest now or waits in ``pending`` for its restart."""
    return (qemu.hot_pluggable if guest.kind == "qemu" else lxc.hot_pluggable)(guest, key, deleting)


def _remove_key(guest: Guest, key: str) -> None:
    """Delete a config key; a disk volume is kept as ``unusedN`` as Proxmox does."""
    value = str(guest.config.get(key, ""))
    if is_disk_key(guest.kind, key) and ":" in value.split(",")[0] and "media=cdrom" not in value:
        n = 0
        while f"unused{n}" in guest.config:
            n += 1
        volume = value.split(",")[0]
        size = next((size_bytes(p[5:]) for p in value.split(",") if p.startswith("size=")), None)
        if size is not None:  # the volume stays on its storage at this size
            guest.volume_sizes[volume] = size
        guest.config[f"unused{n}"] = volume
    guest.config.pop(key, None)


def apply_pending(guest: Guest) -> None:
    """Write the pending section into the config (at start, as ``vmconfig_apply_pending``)."""
    for key in guest.pending_delete:
        _remove_key(guest, key)
    guest.config.update(guest.pending)
    guest.pending, guest.pending_delete = {}, []


def update_config(call: Call, kind: GuestKind) -> None:
    guest = guest_of(call, kind)
    removals = [k for k in re.split(r"[,;\s]+", call.get("delete") or "") if k]
    # qemu-server checks the digest first, then the lock; clearing a lock (`delete=lock`) needs skiplock
    check_digest(guest, call.params, CHECKSUM if kind == "qemu" else MODIFIED)
    check_lock(call.state, guest, call.identity, call.params)
    for key in removals:
        if key in call.params:
            raise bad_param("delete", f"cannot set and delete '{key}' at the same time")
    reverts = [k for k in re.split(r"[,;\s]+", call.get("revert") or "") if k]
    for key in reverts:
        guest.pending.pop(key, None)
        if key in guest.pending_delete:
            guest.pending_delete.remove(key)
    changes = {k: v for k, v in call.params.items() if k not in UPDATE_CONTROL}
    taken = {f"{s}:{n}" for g in call.state.guests.values() for _, s, n, _ in disk_entries(g)}
    for key, value in list(changes.items()):
        if is_disk_key(kind, key):
            changes[key] = _allocate_disk(call.state, guest.vmid, key, value, kind, taken)
        elif NET.match(key):
            changes[key] = _normalise_net(kind, guest.vmid, key, value)
    running = guest.status in ("running", "paused", "frozen")
    if "lock" in removals:
        removals.remove("lock")
        guest.lock, guest.lock_task = None, None
    if "lock" in changes:  # `lock` is a config option (`qm set --lock backup`), kept on the guest record
        guest.lock, guest.lock_task = str(changes.pop("lock")), None
    for key in removals:
        guest.pending.pop(key, None)
        if key not in guest.config:
            continue
        if running and not hot_pluggable(guest, key, deleting=True):
            if key not in guest.pending_delete:
                guest.pending_delete.append(key)
        else:
            _remove_key(guest, key)
    for key, value in changes.items():
        if key in guest.pending_delete:
            guest.pending_delete.remove(key)
        if running and not hot_pluggable(guest, key):
            guest.pending[key] = value
        else:
            guest.pending.pop(key, None)
            guest.config[key] = value
    call.state.bump()


def update_config_task(call: Call, kind: GuestKind) -> str:
    """QEMU's asynchronous ``POST .../config``: the same update, answered with a ``qmconfig`` task."""
    update_config(call, kind)
    return call.state.add_task(
        call.params["node"], "qmconfig", str(call.params["vmid"]), call.identity.subject
    ).upid
