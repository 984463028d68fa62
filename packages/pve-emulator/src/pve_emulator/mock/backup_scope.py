"""What a backup job covers: its guests (by node) and, per guest, which volumes vzdump would include.

These are the rules of pve-manager's ``PVE::VZDump::get_included_guests`` and of the guests'
``get_backup_volumes`` (qemu-server ``PVE::QemuConfig``, pve-container ``PVE::LXC::Config``); the
backup-info and included-volumes views are built from them, so they agree with each other and with
what a ``vzdump`` run of the job would touch.
"""

from __future__ import annotations

import re
from typing import Any

from pve_emulator.errors import ApiError
from pve_emulator.mock.state import ClusterState, Guest

# qemu-server's valid_drive_names order (also the order the volumes are listed in)
QEMU_DRIVES = (
    *(f"ide{i}" for i in range(4)),
    *(f"scsi{i}" for i in range(31)),
    *(f"virtio{i}" for i in range(16)),
    *(f"sata{i}" for i in range(6)),
    "efidisk0",
    "tpmstate0",
)
LXC_MOUNTS = ("rootfs", *(f"mp{i}" for i in range(256)))

UNKNOWN_NODE = ""  # where get_included_guests files a listed vmid that no longer exists


def split_vmids(text: Any) -> list[int]:
    """A job's ``vmid``/``exclude`` list (PVE::Tools::split_list: commas, semicolons, spaces)."""
    return [int(v) for v in re.split(r"[,;\s]+", str(text or "")) if v.strip().isdigit()]


def included_guests(state: ClusterState, job: dict[str, Any]) -> dict[str, list[int]]:
    """vmids a job backs up, per node: ``pool`` wins over ``vmid``, which wins over ``all`` (minus
    ``exclude``); a ``node`` restriction drops guests elsewhere. ``enabled`` is not looked at, nor is
    ``template``: a disabled job still covers its guests, and templates are backed up like any guest."""
    if job.get("pool"):
        if job["pool"] not in state.pools:
            raise ApiError(500, f"pool '{job['pool']}' does not exist")
        vmids = [g.vmid for g in state.guests.values() if g.pool == job["pool"]]
    elif job.get("vmid"):
        vmids = split_vmids(job["vmid"])
    elif job.get("all"):
        excluded = set(split_vmids(job.get("exclude")))
        vmids = [v for v in state.guests if v not in excluded]
    else:
        return {}
    per_node: dict[str, list[int]] = {}
    for vmid in vmids:
        guest = state.guests.get(vmid)
        if guest is None:
            per_node.setdefault(UNKNOWN_NODE, []).append(vmid)
        elif not job.get("node") or job["node"] == guest.node:
            per_node.setdefault(guest.node, []).append(vmid)
    return per_node


def covered_vmids(state: ClusterState) -> set[int]:
    """BackupInfo.pm get_included_vmids: every vmid any vzdump job includes, enabled or not."""
    return {
        vmid
        for job in state.backup_jobs.values()
        if job.get("type", "vzdump") == "vzdump"
        for vmids in included_guests(state, job).values()
        for vmid in vmids
    }


def _options(text: str) -> tuple[str, dict[str, str]]:
    """The volume (first, unnamed part or ``file=``/``volume=``) and the options of a drive string."""
    parts = [p for p in text.split(",") if p]
    options = dict(p.split("=", 1) for p in parts if "=" in p)
    first = parts[0] if parts and "=" not in parts[0] else options.get("file", options.get("volume", ""))
    return first, options


def _flag(value: str | None) -> int | None:
    if value is None:
        return None
    return int(value.lower() in ("1", "yes", "on", "true"))


def backup_volumes(guest: Guest) -> list[dict[str, Any]]:
    """Each volume vzdump would see, with ``included`` and Proxmox's ``reason`` for it.

    QEMU: every drive but CD-ROMs, in by default (``backup=yes``), out with ``backup=0`` (the reason then
    reads ``backup=no`` whenever the option is set at all, as qemu-server words it), and an EFI disk is
    out unless ``bios`` is ``ovmf``. LXC: the root file system always; a mount point only when it is a
    volume (not a bind mount or device) with ``backup=1``."""
    out = []
    if guest.kind == "qemu":
        for key in QEMU_DRIVES:
            if key not in guest.config:
                continue
            volume, options = _options(str(guest.config[key]))
            if options.get("media") == "cdrom":
                continue
            flag = _flag(options.get("backup"))
            included, reason = (1 if flag is None else flag), "backup=" + ("yes" if flag is None else "no")
            if key.startswith("efidisk") and guest.config.get("bios") != "ovmf":
                included, reason = 0, "efidisk but no OVMF BIOS"
            out.append({"key": key, "volume": volume, "included": included, "reason": reason})
        return out
    for key in LXC_MOUNTS:
        if key not in guest.config:
            continue
        volume, options = _options(str(guest.config[key]))
        if key == "rootfs":
            included, reason = 1, "rootfs"
        elif volume.startswith("/"):
            included, reason = 0, "not a volume"
        elif _flag(options.get("backup")):
            included, reason = 1, "enabled"
        else:
            included, reason = 0, "disabled"
        out.append({"key": key, "volume": volume, "included": included, "reason": reason})
    return out
