"""Parsing Proxmox config strings (netN, disks) into plain values. Pure functions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hvsync_backend.wire.numbers import decimal

_QEMU_NIC_MODELS = {
    "virtio",
    "e1000",
    "e1000e",
    "rtl8139",
    "vmxnet3",
    "ne2k_pci",
    "pcnet",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
}
_QEMU_DISK = re.compile(r"^(scsi|virtio|sata|ide|efidisk|tpmstate)\d+$")
_LXC_DISK = re.compile(r"^(rootfs|mp\d+)$")
_NET = re.compile(r"^net([0-9]+)$")
_UNITS = {"": 1 / (1024 * 1024), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def split_props(value: str) -> dict[str, str]:
    """'virtio=AA:BB,bridge=vmbr0,tag=10' -> {'virtio': 'AA:BB', 'bridge': 'vmbr0', 'tag': '10'}.
    A leading bare value (a disk volume) lands under '_'."""
    out: dict[str, str] = {}
    for part in str(value).split(","):
        if not part:
            continue
        name, sep, val = part.partition("=")
        if sep:
            out[name.strip()] = val.strip()
        else:
            out["_"] = name.strip()
    return out


@dataclass(frozen=True)
class Nic:
    slot: str  # net0
    name: str  # interface name in NetBox (LXC: eth0, QEMU: net0)
    mac: str | None
    model: str | None
    bridge: str | None
    tag: int | None
    trunks: tuple[int, ...]
    enabled: bool
    mtu: int | None
    static_ips: tuple[str, ...]


def nics(kind: str, config: dict[str, Any]) -> list[Nic]:
    out: list[Nic] = []
    for key in sorted((k for k in config if _NET.match(k)), key=lambda k: int(_NET.match(k).group(1))):  # type: ignore[union-attr]
        props = split_props(config[key])
        if kind == "qemu":
            model = next((m for m in props if m in _QEMU_NIC_MODELS), None)
            mac = props.get(model) if model else props.get("macaddr")
            name = key
            ips: tuple[str, ...] = ()
        else:
            model = "veth"
            mac = props.get("hwaddr")
            name = props.get("name") or key
            ips = tuple(v for v in (props.get("ip"), props.get("ip6")) if v and "/" in v)
        trunks = tuple(t for t in (decimal(v) for v in props.get("trunks", "").split(";")) if t is not None)
        tag = decimal(props.get("tag"))
        mtu = decimal(props.get("mtu"))
        out.append(
            Nic(
                slot=key,
                name=name,
                mac=mac.upper() if mac else None,
                model=model,
                bridge=props.get("bridge"),
                tag=tag,
                trunks=trunks,
                enabled=props.get("link_down", "0") not in ("1", "true"),
                mtu=mtu,
                static_ips=ips,
            )
        )
    return out


def size_mb(text: str | None) -> int:
    """'32G' -> 32768; '512M' -> 512; bare bytes -> MB (rounded)."""
    if not text:
        return 0
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*", str(text), re.IGNORECASE)
    if not match:
        return 0
    return round(float(match.group(1)) * _UNITS[match.group(2).upper()])


@dataclass(frozen=True)
class Disk:
    slot: str
    volume: str
    size_mb: int


def disks(kind: str, config: dict[str, Any]) -> list[Disk]:
    pattern = _QEMU_DISK if kind == "qemu" else _LXC_DISK
    out: list[Disk] = []
    for key in sorted(config):
        if not pattern.match(key):
            continue
        props = split_props(config[key])
        if props.get("media") == "cdrom" or props.get("_", "") in ("none", "cdrom"):
            continue
        size = size_mb(props.get("size"))
        if size <= 0:
            continue
        out.append(Disk(key, props.get("_", ""), size))
    return out


@dataclass(frozen=True)
class Sighting:
    """One address seen on one guest NIC."""

    address: str  # normalised 'ip/prefix'
    vm: str  # VM key
    iface: str  # interface key
    order: tuple[int, int]  # (vmid, nic slot) for deterministic ownership
