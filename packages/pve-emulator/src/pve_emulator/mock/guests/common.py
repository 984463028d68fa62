"""What every guest operation of both kinds needs: disk and NIC keys, lookups, usage numbers, list entries.

Shared by the QEMU and LXC halves of the package (``qemu``, ``lxc``) and by the operation modules
beside them; other mock modules read disks (``disk_entries``) and usage (``guest_usage``) from here.
"""

from __future__ import annotations

import functools
import re
import time
import zlib
from typing import Any

from pve_emulator.errors import not_found
from pve_emulator.mock.access import can_audit_vm
from pve_emulator.mock.locks import active_lock
from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import Guest, GuestKind
from pve_emulator.validation import size_in_bytes

QEMU_DISK = re.compile(r"^(ide|sata|scsi|virtio)\d+$|^(efidisk0|tpmstate0)$")
LXC_DISK = re.compile(r"^(rootfs|mp\d+)$")
UNUSED = re.compile(r"^unused\d+$")
NET = re.compile(r"^net\d+$")
NIC_MODELS = ("virtio", "e1000", "e1000e", "rtl8139", "vmxnet3")


@functools.lru_cache(maxsize=4096)
def size_bytes(text: str) -> int:
    """Bytes of a ``size=`` value (validated as ``disk-size`` on the way in); 0 if it is not one."""
    return size_in_bytes(text) or 0


def mac_for(vmid: int, index: int) -> str:
    """Deterministic, unique-per-guest MAC in Proxmox's BC:24:11 prefix."""
    h = zlib.crc32(f"{vmid}/{index}".encode())
    return f"BC:24:11:{(h >> 16) & 255:02X}:{(h >> 8) & 255:02X}:{h & 255:02X}"


def is_disk_key(kind: GuestKind, key: str) -> bool:
    return bool((QEMU_DISK if kind == "qemu" else LXC_DISK).match(key))


@functools.lru_cache(maxsize=4096)
def _volume_key(kind: GuestKind, key: str) -> bool:
    """Whether a config key names a disk volume (attached or ``unusedN``); memoised, as list views
    (``/cluster/resources``, storage status) ask it for every key of every guest."""
    return is_disk_key(kind, key) or bool(UNUSED.match(key))


@functools.lru_cache(maxsize=65536)
def _parse_volume(text: str) -> tuple[str, str, str, int | None] | None:
    """(volume id, storage, name, ``size=`` in bytes or None) of a disk value; None for no volume or a
    CD-ROM. Memoised on the value text, which only changes when the config does."""
    volume = text.split(",", 1)[0]
    if ":" not in volume or "media=cdrom" in text:
        return None
    storage, name = volume.split(":", 1)
    size = next((size_bytes(p[5:]) for p in text.split(",") if p.startswith("size=")), None)
    return volume, storage, name, size


def disk_entries(guest: Guest) -> list[tuple[str, str, str, int]]:
    """(config key, storage, volume name, size in bytes) for every disk volume of a guest."""
    out = []
    kind = guest.kind
    for key, value in guest.config.items():
        if not _volume_key(kind, key):
            continue
        parsed = _parse_volume(str(value))
        if parsed is None:
            continue
        volume, storage, name, size = parsed
        out.append((key, storage, name, guest.volume_sizes.get(volume, 0) if size is None else size))
    return out


def guest_of(call: Call, kind: GuestKind) -> Guest:
    guest = call.state.guest(int(call.params["vmid"]), kind, call.params.get("node"))
    if guest is None:
        label = "VM" if kind == "qemu" else "CT"
        raise not_found(f"{label} {call.params['vmid']} on node '{call.params.get('node')}'")
    active_lock(call.state, guest)
    return guest


def node_of(call: Call) -> str:
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


def list_guests(call: Call, kind: GuestKind) -> list[dict[str, Any]]:
    node = node_of(call)
    now = time.time()
    out = []
    for g in sorted(call.state.guests.values(), key=lambda g: g.vmid):
        if g.kind == kind and g.node == node and can_audit_vm(call.state, call.identity, g.vmid):
            active_lock(call.state, g)
            out.append(list_entry(g, now))
    return out


def set_running(guest: Guest, running: bool) -> None:
    guest.status = "running" if running else "stopped"
    guest.started = time.time() if running else None


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


def to_base_volumes(guest: Guest) -> None:
    """A template's disks are read-only base volumes: ``vm-100-disk-0`` becomes ``base-100-disk-0``."""
    for key, storage, name, _ in disk_entries(guest):
        for old, new in (("vm-", "base-"), ("subvol-", "basevol-")):
            if name.startswith(old) and "/" not in name:
                text = str(guest.config[key])
                guest.config[key] = text.replace(f"{storage}:{name}", f"{storage}:{new}{name[len(old) :]}", 1)
