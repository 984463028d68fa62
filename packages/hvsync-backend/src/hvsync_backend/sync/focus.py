"""What a selected-object run (`POST /sync/individual/{kind}`) may write beyond its guests.

A focus narrows kinds to one object and what it depends on: named nodes, storages, backup volumes,
snapshots or tasks. `None` in a field means "not narrowed by this field"; a run without a focus (every
stage stream, the full update) is never narrowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hvsync_backend.wire.numbers import decimal

_VZDUMP_VMID = re.compile(r"vzdump-(?:qemu|lxc|openvz)-(\d+)-|backup/(?:vm|ct)/(\d+)/")


@dataclass(frozen=True)
class Focus:
    nodes: frozenset[str] | None = None
    storages: frozenset[str] | None = None
    volids: frozenset[str] | None = None
    snapshots: frozenset[str] | None = None
    upids: frozenset[str] | None = None

    @staticmethod
    def allows(names: frozenset[str] | None, name: str) -> bool:
        return names is None or name in names


@dataclass(frozen=True)
class Upid:
    """The parts of a Proxmox UPID hvsync uses: `UPID:<node>:<pid>:<pstart>:<start>:<type>:<id>:<user>:`."""

    node: str
    task_type: str
    target: str

    @property
    def vmid(self) -> int | None:
        return decimal(self.target)


def parse_upid(text: str) -> Upid | None:
    parts = text.split(":")
    if len(parts) < 9 or parts[0] != "UPID" or not parts[1]:
        return None
    return Upid(node=parts[1], task_type=parts[5], target=parts[6])


def volid_storage(volid: str) -> str | None:
    """`<storage>:<volume>` -> the storage id (None when the volid has no storage prefix)."""
    storage, sep, rest = volid.partition(":")
    return storage if sep and storage and rest else None


def volid_vmid(volid: str) -> int | None:
    """The guest a vzdump / PBS backup volume belongs to, read from its name."""
    match = _VZDUMP_VMID.search(volid)
    return int(match.group(1) or match.group(2)) if match else None
