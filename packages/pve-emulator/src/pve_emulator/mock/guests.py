"""QEMU VMs and LXC containers: lists, create, config, power state, snapshots, agent data, delete."""

from __future__ import annotations

import re
import time
import uuid
import zlib
from typing import Any

from pve_emulator.errors import ApiError, bad_param, not_found
from pve_emulator.mock.access import can_audit_vm
from pve_emulator.mock.locks import (
    CHECKSUM,
    LABEL,
    MODIFIED,
    active_lock,
    check_digest,
    check_lock,
    config_digest,
    hold_lock,
    lock_error,
)
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import ClusterState, Guest, GuestKind, Snapshot, digest
from pve_emulator.validation import size_in_bytes

QEMU_DISK = re.compile(r"^(ide|sata|scsi|virtio)\d+$|^(efidisk0|tpmstate0)$")
LXC_DISK = re.compile(r"^(rootfs|mp\d+)$")
UNUSED = re.compile(r"^unused\d+$")
NET = re.compile(r"^net\d+$")
NIC_MODELS = ("virtio", "e1000", "e1000e", "rtl8139", "vmxnet3")
# Create-time parameters that steer the creation and are not stored in the guest config.
QEMU_CREATE_ONLY = {
    "node",
    "vmid",
    "start",
    "storage",
    "archive",
    "force",
    "unique",
    "pool",
    "bwlimit",
    "live-restore",
    "import-working-storage",
}
LXC_CREATE_ONLY = {
    "node",
    "vmid",
    "start",
    "storage",
    "ostemplate",
    "force",
    "unique",
    "pool",
    "bwlimit",
    "restore",
    "ignore-unpack-errors",
    "password",
    "ssh-public-keys",
    "ha-managed",
}


def size_bytes(text: str) -> int:
    """Bytes of a ``size=`` value (validated as ``disk-size`` on the way in); 0 if it is not one."""
    return size_in_bytes(text) or 0


def mac_for(vmid: int, index: int) -> str:
    """Deterministic, unique-per-guest MAC in Proxmox's BC:24:11 prefix."""
    h = zlib.crc32(f"{vmid}/{index}".encode())
    return f"BC:24:11:{(h >> 16) & 255:02X}:{(h >> 8) & 255:02X}:{h & 255:02X}"


def is_disk_key(kind: GuestKind, key: str) -> bool:
    return bool((QEMU_DISK if kind == "qemu" else LXC_DISK).match(key))


def disk_entries(guest: Guest) -> list[tuple[str, str, str, int]]:
    """(config key, storage, volume name, size in bytes) for every disk volume of a guest."""
    out = []
    for key, value in guest.config.items():
        if not (is_disk_key(guest.kind, key) or UNUSED.match(key)):
            continue
        text = str(value)
        volume = text.split(",", 1)[0]
        if ":" not in volume or "media=cdrom" in text:
            continue
        storage, name = volume.split(":", 1)
        size = next((size_bytes(p[5:]) for p in text.split(",") if p.startswith("size=")), None)
        out.append((key, storage, name, guest.volume_sizes.get(volume, 0) if size is None else size))
    return out


def _guest(call: Call, kind: GuestKind) -> Guest:
    guest = call.state.guest(int(call.params["vmid"]), kind, call.params.get("node"))
    if guest is None:
        label = "VM" if kind == "qemu" else "CT"
        raise not_found(f"{label} {call.params['vmid']} on node '{call.params.get('node')}'")
    active_lock(call.state, guest)
    return guest


def _node(call: Call) -> str:
    node = call.params["node"]
    if node not in call.state.nodes:
        raise not_found(f"node '{node}'")
    return node


_BOOT_KEYS = ("scsi0", "virtio0", "sata0", "ide0", "rootfs")


def _boot_disk_size(guest: Guest) -> int:
    """Size of the first boot-capable disk; cheap because list views call it for every guest."""
    for key in _BOOT_KEYS:
        value = guest.config.get(key)
        if value is None:
            continue
        text = str(value)
        at = text.find("size=")
        if at < 0 or "media=cdrom" in text:
            continue
        return size_bytes(text[at + 5 :].split(",", 1)[0])
    return 0


def guest_usage(guest: Guest, now: float) -> dict[str, Any]:
    """Status numbers of a guest; deterministic per vmid so repeated reads agree."""
    running = guest.status == "running"
    cores = int(guest.config.get("cores", 1) or 1) * int(guest.config.get("sockets", 1) or 1)
    maxmem = int(str(guest.config.get("memory", 512)).split(",")[0].removeprefix("current=")) * 1024**2
    maxdisk = _boot_disk_size(guest)
    seed = guest.vmid % 97
    return {
        "cpu": round(0.01 + seed / 400, 4) if running else 0,
        "cpus": cores,
        "maxcpu": cores,
        "mem": int(maxmem * (0.25 + seed / 200)) if running else 0,
        "maxmem": maxmem,
        "disk": int(maxdisk * 0.3) if guest.kind == "lxc" else 0,
        "maxdisk": maxdisk,
        "uptime": int(now - guest.started) if running and guest.started else 0,
        "netin": seed * 1_000_003 if running else 0,
        "netout": seed * 700_001 if running else 0,
        "diskread": seed * 3_000_017 if running else 0,
        "diskwrite": seed * 1_500_007 if running else 0,
    }


def list_entry(guest: Guest, now: float) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "vmid": guest.vmid,
        "name": guest.name,
        "status": guest.status,
        "type": guest.kind,
    }
    entry.update(guest_usage(guest, now))
    if guest.status == "running":
        entry["pid"] = 10_000 + guest.vmid
    if guest.config.get("tags"):
        entry["tags"] = guest.config["tags"]
    if guest.is_template:
        entry["template"] = 1
    if guest.lock:
        entry["lock"] = guest.lock
    return entry


def _list(call: Call, kind: GuestKind) -> list[dict[str, Any]]:
    node = _node(call)
    now = time.time()
    out = []
    for g in sorted(call.state.guests.values(), key=lambda g: g.vmid):
        if g.kind == kind and g.node == node and can_audit_vm(call.state, call.identity, g.vmid):
            active_lock(call.state, g)
            out.append(list_entry(g, now))
    return out


@route("GET", "/nodes/{node}/qemu")
def list_qemu(call: Call) -> list[dict[str, Any]]:
    return _list(call, "qemu")


@route("GET", "/nodes/{node}/lxc")
def list_lxc(call: Call) -> list[dict[str, Any]]:
    return _list(call, "lxc")


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
    skip = QEMU_CREATE_ONLY if kind == "qemu" else LXC_CREATE_ONLY
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
    if kind == "qemu":
        config.setdefault("memory", "2048")
        config.setdefault("cores", 1)
        config.setdefault("sockets", 1)
        config.setdefault("ostype", "other")
        config.setdefault("smbios1", f"uuid={_uuid_for(vmid)}")
        config.setdefault("vmgenid", _uuid_for(vmid + 7))
        config.setdefault("meta", f"creation-qemu=9.2.0,ctime={int(time.time())}")
        boot_disk = next((k for k in ("scsi0", "virtio0", "sata0", "ide0") if k in config), None)
        if boot_disk and "boot" not in config:
            config["boot"] = f"order={boot_disk}" + (";net0" if "net0" in config else "")
    else:
        config.setdefault("memory", 512)
        config.setdefault("swap", 512)
        config.setdefault("cores", 1)
        config.setdefault("arch", "amd64")
        config.setdefault("ostype", "debian")
        config.setdefault("hostname", f"CT{vmid}")
    return config


def _uuid_for(vmid: int) -> str:
    h = f"{zlib.crc32(str(vmid).encode()):08x}{zlib.crc32(str(vmid * 31).encode()):08x}" * 2
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _create(call: Call, kind: GuestKind) -> str:
    node = _node(call)
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
        _set_running(guest, True)
        call.state.add_task(
            node, "qmstart" if kind == "qemu" else "vzstart", str(vmid), call.identity.subject
        )
    return task.upid


@route("POST", "/nodes/{node}/qemu")
def create_qemu(call: Call) -> str:
    return _create(call, "qemu")


@route("POST", "/nodes/{node}/lxc")
def create_lxc(call: Call) -> str:
    return _create(call, "lxc")


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


def _read_config(call: Call, kind: GuestKind) -> dict[str, Any]:
    guest = _guest(call, kind)
    snapname = call.get("snapshot")
    if snapname:
        snap = guest.snapshots.get(snapname)
        if snap is None:
            raise bad_param("snapshot", f"snapshot '{snapname}' does not exist")
        return {**snap.config, "digest": digest(snap.config)}
    return config_view(guest, current=bool(call.get("current")))


@route("GET", "/nodes/{node}/qemu/{vmid}/config")
def read_qemu_config(call: Call) -> dict[str, Any]:
    return _read_config(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/config")
def read_lxc_config(call: Call) -> dict[str, Any]:
    return _read_config(call, "lxc")


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


@route("GET", "/nodes/{node}/qemu/{vmid}/pending")
def read_qemu_pending(call: Call) -> list[dict[str, Any]]:
    return pending_view(_guest(call, "qemu"))


@route("GET", "/nodes/{node}/lxc/{vmid}/pending")
def read_lxc_pending(call: Call) -> list[dict[str, Any]]:
    return pending_view(_guest(call, "lxc"))


UPDATE_CONTROL = {"node", "vmid", "delete", "revert", "digest", "force", "skiplock", "background_delay"}
# Options applied at once even to a running guest (qemu-server's $fast_plug_option, LXC's FASTPLUG list).
QEMU_FAST_PLUG = {
    "description",
    "hookscript",
    "lock",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "protection",
    "shares",
    "startup",
    "tags",
    "vmstatestorage",
    "cpuunits",
    "cpulimit",
    "ciuser",
    "cipassword",
    "citype",
    "ciupgrade",
    "cicustom",
    "ipconfig",
    "nameserver",
    "searchdomain",
    "sshkeys",
}
LXC_FAST_PLUG = {
    "description",
    "onboot",
    "startup",
    "protection",
    "hostname",
    "hookscript",
    "cores",
    "tags",
    "lock",
    "cpulimit",
    "cpuunits",
    "memory",
    "swap",
}
QEMU_COLD_DISK = re.compile(r"^(ide|sata)\d+$|^(efidisk0|tpmstate0)$")


def _hotplug_features(guest: Guest) -> set[str]:
    value = str(guest.config.get("hotplug", "network,disk,usb"))
    if value == "1":
        return {"network", "disk", "usb"}
    return set() if value == "0" else set(value.split(","))


def hot_pluggable(guest: Guest, key: str, deleting: bool = False) -> bool:
    """Whether a change of ``key`` reaches a running guest now or waits in ``pending`` for its restart."""
    if guest.kind == "lxc":
        if key in LXC_FAST_PLUG or NET.match(key):
            return True
        # a new mount point is hot-plugged; replacing or removing one waits
        return bool(re.match(r"^mp\d+$", key)) and not deleting and key not in guest.config
    if key in QEMU_FAST_PLUG or re.match(r"^ipconfig\d+$", key):
        return True
    features = _hotplug_features(guest)
    if NET.match(key):
        return "network" in features
    if is_disk_key("qemu", key):
        return "disk" in features and not QEMU_COLD_DISK.match(key)
    if key == "memory":
        return "memory" in features and not deleting
    if key == "vcpus":
        return "cpu" in features
    return False


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


def _update_config(call: Call, kind: GuestKind) -> None:
    guest = _guest(call, kind)
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


@route("PUT", "/nodes/{node}/qemu/{vmid}/config")
def update_qemu_config(call: Call) -> None:
    _update_config(call, "qemu")


@route("POST", "/nodes/{node}/qemu/{vmid}/config")
def update_qemu_config_async(call: Call) -> str:
    _update_config(call, "qemu")
    return call.state.add_task(
        call.params["node"], "qmconfig", str(call.params["vmid"]), call.identity.subject
    ).upid


@route("PUT", "/nodes/{node}/lxc/{vmid}/config")
def update_lxc_config(call: Call) -> None:
    _update_config(call, "lxc")


def _linked_clones_of(state: ClusterState, guest: Guest) -> list[str]:
    """Base volumes of a template that a linked clone still uses (``base-100-disk-0/vm-123-disk-0``)."""
    bases = {f"{s}:{n}" for _, s, n, _ in disk_entries(guest) if n.startswith("base-")}
    used = set()
    for other in state.guests.values():
        for _, s, n, _ in disk_entries(other):
            if "/" in n and f"{s}:{n.split('/', 1)[0]}" in bases:
                used.add(f"{s}:{n.split('/', 1)[0]}")
    return sorted(used)


def _delete(call: Call, kind: GuestKind) -> str:
    guest = _guest(call, kind)
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


@route("DELETE", "/nodes/{node}/qemu/{vmid}")
def delete_qemu(call: Call) -> str:
    return _delete(call, "qemu")


@route("DELETE", "/nodes/{node}/lxc/{vmid}")
def delete_lxc(call: Call) -> str:
    return _delete(call, "lxc")


# --- power state ---------------------------------------------------------------------------------


def _set_running(guest: Guest, running: bool) -> None:
    guest.status = "running" if running else "stopped"
    guest.started = time.time() if running else None


def _status(call: Call, kind: GuestKind) -> dict[str, Any]:
    guest = _guest(call, kind)
    out = list_entry(guest, time.time())
    out.pop("type", None)
    out["qmpstatus" if kind == "qemu" else "type"] = guest.status if kind == "qemu" else "lxc"
    out["ha"] = {"managed": 0}
    if kind == "qemu":
        out["agent"] = 1 if _agent_enabled(guest) else 0
        out["running-machine"] = "pc-i440fx-9.2+pve1" if guest.status == "running" else None
        out = {k: v for k, v in out.items() if v is not None}
    return out


@route("GET", "/nodes/{node}/qemu/{vmid}/status/current")
def qemu_status(call: Call) -> dict[str, Any]:
    return _status(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/status/current")
def lxc_status(call: Call) -> dict[str, Any]:
    return _status(call, "lxc")


_ACTIONS: dict[str, tuple[str, bool | None]] = {
    "start": ("start", True),
    "stop": ("stop", False),
    "shutdown": ("shutdown", False),
    "reboot": ("reboot", True),
    "reset": ("reset", True),
    "suspend": ("suspend", None),
    "resume": ("resume", True),
}


def _power(call: Call, kind: GuestKind, action: str) -> str:
    """Power actions run as tasks: a template or a locked guest makes the task fail, not the call."""
    guest = _guest(call, kind)
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
            _set_running(guest, running)
    prefix = "qm" if kind == "qemu" else "vz"
    log = [f"{verb} {guest.vmid}", "TASK OK" if exitstatus == "OK" else f"TASK ERROR: {exitstatus}"]
    call.state.bump()
    return call.state.add_task(
        guest.node, f"{prefix}{verb}", str(guest.vmid), call.identity.subject, log=log, exitstatus=exitstatus
    ).upid


def _power_route(kind: GuestKind, action: str) -> None:
    route("POST", f"/nodes/{{node}}/{kind}/{{vmid}}/status/{action}")(lambda call: _power(call, kind, action))


for _kind in ("qemu", "lxc"):
    for _action in ("start", "stop", "shutdown", "reboot", "suspend", "resume") + (
        ("reset",) if _kind == "qemu" else ()
    ):
        _power_route(_kind, _action)  # type: ignore[arg-type]


# --- snapshots -----------------------------------------------------------------------------------


def _snapshot_list(call: Call, kind: GuestKind) -> list[dict[str, Any]]:
    guest = _guest(call, kind)
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


def _snapshot_create(call: Call, kind: GuestKind) -> str:
    guest = _guest(call, kind)
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
    guest = _guest(call, kind)
    snap = guest.snapshots.get(call.params["snapname"])
    if snap is None:
        raise not_found(f"snapshot '{call.params['snapname']}'")
    return guest, snap


def _snapshot_delete(call: Call, kind: GuestKind) -> str:
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


def _snapshot_rollback(call: Call, kind: GuestKind) -> str:
    guest, snap = _snap(call, kind)
    check_lock(call.state, guest, call.identity, call.params)
    guest.config = dict(snap.config)
    guest.pending, guest.pending_delete = {}, []
    guest.parent_snapshot = snap.name
    if call.get("start"):
        _set_running(guest, True)
    elif kind == "qemu" and not snap.vmstate:
        _set_running(guest, False)
    task = call.state.add_task(
        guest.node, "qmrollback" if kind == "qemu" else "vzrollback", str(guest.vmid), call.identity.subject
    )
    hold_lock(call.state, guest, "rollback", task)
    return task.upid


def _snapshot_config(call: Call, kind: GuestKind) -> dict[str, Any]:
    _, snap = _snap(call, kind)
    return {
        **snap.config,
        "snaptime": snap.snaptime,
        "description": snap.description,
        **({"parent": snap.parent} if snap.parent else {}),
    }


def _snapshot_update(call: Call, kind: GuestKind) -> None:
    _, snap = _snap(call, kind)
    if "description" in call.params:
        snap.description = call.params["description"]
    call.state.bump()


def _snapshot_index(call: Call, kind: GuestKind) -> list[dict[str, Any]]:
    _snap(call, kind)
    return [{"cmd": "config"}, {"cmd": "rollback"}]


for _kind in ("qemu", "lxc"):
    _base = f"/nodes/{{node}}/{_kind}/{{vmid}}/snapshot"

    def _bind(kind: GuestKind, base: str) -> None:
        route("GET", base)(lambda call: _snapshot_list(call, kind))
        route("POST", base)(lambda call: _snapshot_create(call, kind))
        route("GET", base + "/{snapname}")(lambda call: _snapshot_index(call, kind))
        route("DELETE", base + "/{snapname}")(lambda call: _snapshot_delete(call, kind))
        route("GET", base + "/{snapname}/config")(lambda call: _snapshot_config(call, kind))
        route("PUT", base + "/{snapname}/config")(lambda call: _snapshot_update(call, kind))
        route("POST", base + "/{snapname}/rollback")(lambda call: _snapshot_rollback(call, kind))

    _bind(_kind, _base)  # type: ignore[arg-type]


# --- guest networking as seen from inside ---------------------------------------------------------


def _agent_enabled(guest: Guest) -> bool:
    value = str(guest.config.get("agent", "0"))
    first = value.split(",")[0]
    return first in ("1", "enabled=1") or "enabled=1" in value


def guest_nics(guest: Guest) -> list[tuple[str, dict[str, str]]]:
    """(config key, parsed NIC properties) in index order."""
    out = []
    for key in sorted((k for k in guest.config if NET.match(k)), key=lambda k: int(k[3:])):
        parts: dict[str, str] = {}
        for piece in str(guest.config[key]).split(","):
            k, _, v = piece.partition("=")
            if guest.kind == "qemu" and k in NIC_MODELS:
                parts["model"], parts["macaddr"] = k, v
            else:
                parts[k] = v
        out.append((key, parts))
    return out


@route("GET", "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces")
def agent_interfaces(call: Call) -> dict[str, Any]:
    guest = _guest(call, "qemu")
    if guest.status != "running":
        raise ApiError(500, f"VM {guest.vmid} is not running")
    if not _agent_enabled(guest):
        raise ApiError(500, "No QEMU guest agent configured")
    result: list[dict[str, Any]] = [
        {
            "name": "lo",
            "hardware-address": "00:00:00:00:00:00",
            "ip-addresses": [
                {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
                {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128},
            ],
        }
    ]
    for index, (_, nic) in enumerate(guest_nics(guest)):
        iface = f"eth{index}"
        addrs = [
            {"ip-address": ip, "ip-address-type": "ipv6" if ":" in ip else "ipv4", "prefix": prefix}
            for name, ip, prefix in guest.guest_ips
            if name == iface
        ]
        result.append(
            {
                "name": iface,
                "hardware-address": nic.get("macaddr", "").lower(),
                "ip-addresses": addrs,
                "statistics": {
                    "rx-bytes": guest.vmid * 1000,
                    "tx-bytes": guest.vmid * 700,
                    "rx-packets": guest.vmid,
                    "tx-packets": guest.vmid,
                    "rx-errs": 0,
                    "tx-errs": 0,
                    "rx-dropped": 0,
                    "tx-dropped": 0,
                },
            }
        )
    return {"result": result}


@route("GET", "/nodes/{node}/lxc/{vmid}/interfaces")
def lxc_interfaces(call: Call) -> list[dict[str, Any]]:
    guest = _guest(call, "lxc")
    if guest.status != "running":
        raise ApiError(500, f"CT {guest.vmid} not running")
    lo = _lxc_iface("lo", "00:00:00:00:00:00", "127.0.0.1/8", "::1/128")
    out = [lo]
    for _, nic in guest_nics(guest):
        ip, ip6 = nic.get("ip", ""), nic.get("ip6", "")
        out.append(
            _lxc_iface(
                nic.get("name", "eth0"),
                nic.get("hwaddr", "").lower(),
                ip if ip and ip not in ("dhcp", "manual") else None,
                ip6 if ip6 and ip6 not in ("dhcp", "auto", "manual") else None,
            )
        )
    return out


def _lxc_iface(name: str, hwaddr: str, inet: str | None, inet6: str | None) -> dict[str, Any]:
    """PVE 9 reports both the classic (hwaddr/inet/inet6) and the agent-style keys."""
    addrs = []
    for cidr, family in ((inet, "inet"), (inet6, "inet6")):
        if cidr:
            address, _, prefix = cidr.partition("/")
            addrs.append({"ip-address": address, "ip-address-type": family, "prefix": int(prefix or 0)})
    entry: dict[str, Any] = {
        "name": name,
        "hwaddr": hwaddr,
        "hardware-address": hwaddr,
        "ip-addresses": addrs,
    }
    if inet:
        entry["inet"] = inet
    if inet6:
        entry["inet6"] = inet6
    return entry


# --- migration -----------------------------------------------------------------------------------


@route("POST", "/nodes/{node}/qemu/{vmid}/migrate")
def migrate_qemu(call: Call) -> str:
    return _migrate(call, "qemu")


@route("POST", "/nodes/{node}/lxc/{vmid}/migrate")
def migrate_lxc(call: Call) -> str:
    return _migrate(call, "lxc")


def _migrate(call: Call, kind: GuestKind) -> str:
    """Move a guest to another node: a task on the source node, ``lock: migrate`` while it runs."""
    guest = _guest(call, kind)
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


# --- templates and clones ------------------------------------------------------------------------


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


def _clone(call: Call, kind: GuestKind) -> str:
    """Copy a guest (or one of its snapshots) to ``newid`` the way qemu-server / pve-container do:
    full by default unless the source is a template, new MACs, a new SMBIOS uuid and vmgenid."""
    source = _guest(call, kind)
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


@route("POST", "/nodes/{node}/qemu/{vmid}/clone")
def clone_qemu(call: Call) -> str:
    return _clone(call, "qemu")


@route("POST", "/nodes/{node}/lxc/{vmid}/clone")
def clone_lxc(call: Call) -> str:
    return _clone(call, "lxc")


def to_base_volumes(guest: Guest) -> None:
    """A template's disks are read-only base volumes: ``vm-100-disk-0`` becomes ``base-100-disk-0``."""
    for key, storage, name, _ in disk_entries(guest):
        for old, new in (("vm-", "base-"), ("subvol-", "basevol-")):
            if name.startswith(old) and "/" not in name:
                text = str(guest.config[key])
                guest.config[key] = text.replace(f"{storage}:{name}", f"{storage}:{new}{name[len(old) :]}", 1)


def _make_template(call: Call, kind: GuestKind) -> Any:
    """Convert a stopped guest without snapshots: its disks become read-only ``base-`` volumes."""
    guest = _guest(call, kind)
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


@route("POST", "/nodes/{node}/qemu/{vmid}/template")
def template_qemu(call: Call) -> Any:
    return _make_template(call, "qemu")


@route("POST", "/nodes/{node}/lxc/{vmid}/template")
def template_lxc(call: Call) -> Any:
    return _make_template(call, "lxc")


# --- disk resize ---------------------------------------------------------------------------------

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


def _resize(call: Call, kind: GuestKind) -> str:
    """Grow a disk (``+size`` or an absolute size) in a ``resize`` task; refusals fail the task."""
    guest = _guest(call, kind)
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


@route("PUT", "/nodes/{node}/qemu/{vmid}/resize")
def resize_qemu(call: Call) -> str:
    return _resize(call, "qemu")


@route("PUT", "/nodes/{node}/lxc/{vmid}/resize")
def resize_lxc(call: Call) -> str:
    return _resize(call, "lxc")
