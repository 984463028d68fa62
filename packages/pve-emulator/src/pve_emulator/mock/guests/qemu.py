"""What only QEMU VMs have: their create-only and hot-plug options, default config, and the guest agent."""

from __future__ import annotations

import re
import time
import zlib
from typing import Any

from pve_emulator.mock.guests.common import NET, is_disk_key
from pve_emulator.mock.state import Guest

# Create-time parameters that steer the creation and are not stored in the guest config.
CREATE_ONLY = {
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


def _uuid_for(vmid: int) -> str:
    h = f"{zlib.crc32(str(vmid).encode()):08x}{zlib.crc32(str(vmid * 31).encode()):08x}" * 2
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


# Options applied at once even to a running VM (qemu-server's $fast_plug_option).
FAST_PLUG = {
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


COLD_DISK = re.compile(r"^(ide|sata)\d+$|^(efidisk0|tpmstate0)$")


def _hotplug_features(guest: Guest) -> set[str]:
    value = str(guest.config.get("hotplug", "network,disk,usb"))
    if value == "1":
        return {"network", "disk", "usb"}
    return set() if value == "0" else set(value.split(","))


def agent_enabled(guest: Guest) -> bool:
    value = str(guest.config.get("agent", "0"))
    first = value.split(",")[0]
    return first in ("1", "enabled=1") or "enabled=1" in value


def default_config(config: dict[str, Any], vmid: int) -> None:
    """What qemu-server fills in when the create call leaves it out (and ``boot`` from the first disk)."""
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


def hot_pluggable(guest: Guest, key: str, deleting: bool = False) -> bool:
    """qemu-server: fast-plug options at once; NICs, disks (not IDE/SATA/EFI/TPM), memory and vcpus as
    the guest's ``hotplug`` option allows."""
    if key in FAST_PLUG or re.match(r"^ipconfig\d+$", key):
        return True
    features = _hotplug_features(guest)
    if NET.match(key):
        return "network" in features
    if is_disk_key("qemu", key):
        return "disk" in features and not COLD_DISK.match(key)
    if key == "memory":
        return "memory" in features and not deleting
    if key == "vcpus":
        return "cpu" in features
    return False
