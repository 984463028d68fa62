"""Clones of a guest or of one of its snapshots: full copies or linked clones of a template's base volumes."""

from __future__ import annotations

import re
import uuid
from typing import Any

from pve_emulator.errors import ApiError, bad_param
from pve_emulator.mock.guests.common import NET, UNUSED, disk_entries, guest_of, is_disk_key, mac_for
from pve_emulator.mock.locks import LABEL, check_lock, hold_lock
from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import ClusterState, Guest, GuestKind


def _fresh_volume(state: ClusterState, storage: str, prefix: str, vmid: int, taken: set[str]) -> str:
    index = 0
    while f"{storage}:{prefix}-{vmid}-disk-{index}" in taken:
        index += 1
    taken.add(f"{storage}:{prefix}-{vmid}-disk-{index}")
    return f"{prefix}-{vmid}-disk-{index}"


def _clone_disk(
    call: Call, kind: GuestKind, key: str, text: str, newid: int, full: bool, taken: set[str], log: list[str]
) -> str:
    """One disk of a clone: a full copy (new volume, optionally on ``storage``) or a linked clone of a
    base volume (``local-lvm:base-100-disk-0/vm-123-disk-0``)."""
    volume, _, rest = text.partition(",")
    storage, name = volume.split(":", 1)
    snapname = call.get("snapname")
    what = "drive " if kind == "qemu" else "mountpoint "
    if full:
        target = call.get("storage") or storage
        prefix = "subvol" if name.startswith(("subvol-", "basevol-")) else "vm"
        new = f"{target}:{_fresh_volume(call.state, target, prefix, newid, taken)}"
        log.append(f"create full clone of {what}{key} ({volume})")
    else:
        base = name.split("/", 1)[0]
        if not base.startswith(("base-", "basevol-")):
            if kind == "lxc":
                raise ApiError(500, f"Linked clone feature for '{volume}' is not available")
            of = " a snapshot of" if snapname else ""
            raise ApiError(500, f"Linked clone feature is not supported for{of} '{volume}' ({key})")
        prefix = "subvol" if base.startswith("basevol-") else "vm"
        new = f"{storage}:{base}/{_fresh_volume(call.state, storage, prefix, newid, taken)}"
        log.append(f"create linked clone of {what if kind == 'qemu' else 'mount point '}{key} ({volume})")
    return ",".join(p for p in (new, rest) if p)


# Snapshot bookkeeping a clone never copies (qemu-server's clone_vm skip list).
CLONE_SKIP = {"parent", "snaptime", "vmstate", "snapstate", "runningcpu", "runningmachine", "template"}


def clone(call: Call, kind: GuestKind) -> str:
    """Copy a guest (or one of its snapshots) to ``newid`` the way qemu-server / pve-container do:
    full by default unless the source is a template, new MACs, a new SMBIOS uuid and vmgenid."""
    source = guest_of(call, kind)
    label = LABEL[kind]
    newid = int(call.params["newid"])
    if newid in call.state.guests:
        raise bad_param("newid", f"{label} {newid} already exists")
    target = call.get("target", source.node)
    if target not in call.state.nodes:
        raise bad_param("target", f"no such node '{target}'")
    storage = call.get("storage")
    if storage is not None and storage not in call.state.storages:
        raise bad_param("storage", f"storage '{storage}' does not exist")
    pool = call.get("pool")
    if pool is not None and pool not in call.state.pools:
        raise bad_param("pool", f"pool '{pool}' does not exist")
    check_lock(call.state, source, call.identity, {})
    snapname = call.get("snapname")
    if snapname and snapname not in source.snapshots:
        raise ApiError(500, f"snapshot '{snapname}' does not exist")
    full = bool(call.params["full"]) if call.get("full") is not None else not source.is_template
    if not full and storage is not None:
        raise ApiError(500, "parameter 'storage' not allowed for linked clones")
    if not full and call.get("format") is not None:
        raise ApiError(500, "parameter 'format' not allowed for linked clones")
    if kind == "lxc" and full and source.status == "running" and not snapname:
        raise ApiError(500, "Full clone of a running container is only possible from a snapshot")
    base = source.snapshots[snapname].config if snapname else source.config
    if target != source.node:
        used = {storage} if storage else {s for _, s, _, _ in disk_entries(Guest(0, kind, "", dict(base)))}
        if not all(int(call.state.storages.get(s, {}).get("shared", 0) or 0) for s in used):
            raise ApiError(500, f"can't clone {label} to node '{target}' ({label} uses local storage)")
    log = [f"creating a clone of {label} {source.vmid} with ID {newid}"] if kind == "qemu" else []
    taken = {f"{s}:{n}" for g in call.state.guests.values() for _, s, n, _ in disk_entries(g)}
    config: dict[str, Any] = {}
    for key, value in base.items():
        if key in CLONE_SKIP or UNUSED.match(key):
            continue
        text = str(value)
        if is_disk_key(kind, key) and ":" in text.split(",")[0] and "media=cdrom" not in text:
            config[key] = _clone_disk(call, kind, key, text, newid, full, taken, log)
        elif NET.match(key):
            mac = mac_for(newid, int(key[3:]))
            if kind == "qemu":
                model, _, rest = text.partition(",")
                config[key] = ",".join(p for p in (f"{model.split('=', 1)[0]}={mac}", rest) if p)
            else:
                config[key] = re.sub(r"hwaddr=[0-9A-Fa-f:]+", f"hwaddr={mac}", text)
        else:
            config[key] = value
    if kind == "qemu":
        smbios = [p for p in str(config.get("smbios1", "")).split(",") if p and not p.startswith("uuid=")]
        config["smbios1"] = ",".join([f"uuid={uuid.uuid4()}", *smbios])
        if config.get("vmgenid"):
            config["vmgenid"] = str(uuid.uuid4())
        config["name"] = call.get("name") or f"Copy-of-VM-{source.config.get('name') or source.vmid}"
    elif call.get("hostname"):
        config["hostname"] = call.params["hostname"]
    if call.get("description"):
        config["description"] = call.params["description"]
    log.append("TASK OK")
    clone = Guest(vmid=newid, kind=kind, node=target, config=config, pool=pool)
    call.state.guests[newid] = clone
    task = call.state.add_task(
        source.node,
        "qmclone" if kind == "qemu" else "vzclone",
        str(source.vmid),
        call.identity.subject,
        log=log,
    )
    # qemu-server writes the new config with `lock: clone`; pve-container locks the source (`disk`)
    # and the new container (`create`) until the copy is done
    hold_lock(call.state, clone, "clone" if kind == "qemu" else "create", task)
    if kind == "lxc":
        hold_lock(call.state, source, "disk", task)
    return task.upid
