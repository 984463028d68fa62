"""Selected-object syncs (`POST /sync/individual/{kind}`): the kinds that run for one object, the query
each kind needs, and when the object counts as not found.

Every run is partial (never deletes, never marks jobs stale) and writes the object and what it depends
on: its cluster, the nodes it lives on, the plugin records its links point at, its guest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hvsync_backend import wire
from hvsync_backend.errors import FieldError
from hvsync_backend.sync.focus import Focus, parse_upid, volid_storage, volid_vmid
from hvsync_backend.sync.framework import Kind, Stage
from hvsync_backend.sync.registry import BY_SLUG
from hvsync_backend.sync.stages.backups_tasks import BackupKind, TaskKind
from hvsync_backend.sync.stages.devices import ClusterKind, DeviceKind
from hvsync_backend.sync.stages.network_interfaces import NodeInterfaceKind, NodeInterfaceLinkKind
from hvsync_backend.sync.stages.plugin_records import PluginClusterKind, PluginNodeKind, PluginStorageKind
from hvsync_backend.sync.stages.vm_snapshots import SnapshotKind
from hvsync_backend.wire.numbers import decimal

#: the selected-object kinds of `/sync/individual/<kind>` (wire data shared with the plugin)
KINDS = tuple(wire.SELECTED_KINDS)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class Selection:
    kind: str
    stages: list[Stage]
    only_vmids: frozenset[int] | None
    focus: Focus | None
    #: (kind name, detail): the run found nothing when that kind had no object in Proxmox (404)
    must_find: tuple[str, str]


def _stage(slug: str, kinds: Iterable[Kind]) -> Stage:
    base = BY_SLUG[slug]
    return Stage(base.slug, base.route, kinds, base.title)


def _vmid(query: Mapping[str, str], required: bool = True) -> int | None:
    text = (query.get("vmid") or "").strip()
    if not text:
        if required:
            raise FieldError("vmid", "vmid (integer) is required")
        return None
    vmid = decimal(text, low=100, high=999_999_999)
    if vmid is None:
        raise FieldError("vmid", f"expected a Proxmox VMID (integer 100-999999999), got {text!r}")
    return vmid


def _name(query: Mapping[str, str], field: str, what: str, required: bool = True) -> str | None:
    text = (query.get(field) or "").strip()
    if not text:
        if required:
            raise FieldError(field, f"{field} ({what}) is required")
        return None
    if not _NAME.match(text):
        raise FieldError(field, f"expected a {what} (letters, digits, '.', '_', '-'), got {text!r}")
    return text


def _devices(nodes: bool = True) -> Stage:
    return _stage("devices", [ClusterKind(), DeviceKind()] if nodes else [ClusterKind()])


def select(kind: str, query: Mapping[str, str]) -> Selection:
    """The stages and filters of one object's sync; raises FieldError naming a bad query field."""
    if kind == "cluster":
        return Selection(
            kind,
            [_devices(nodes=False), _stage("storage", [PluginClusterKind()])],
            None,
            None,
            ("cluster", "no Proxmox cluster could be read in scope"),
        )
    if kind == "node":
        node = _name(query, "node", "Proxmox node name")
        assert node is not None
        return Selection(
            kind,
            [
                _devices(),
                _stage("storage", [PluginClusterKind(), PluginNodeKind()]),
                _stage("network-interfaces", [NodeInterfaceKind(), NodeInterfaceLinkKind()]),
            ],
            None,
            Focus(nodes=frozenset({node})),
            ("device", f"node {node!r} not found in scope"),
        )
    if kind == "storage":
        storage = _name(query, "storage", "Proxmox storage id")
        return Selection(
            kind,
            [_devices(), _stage("storage", [PluginClusterKind(), PluginNodeKind(), PluginStorageKind()])],
            None,
            Focus(storages=frozenset({storage or ""})),
            ("storage", f"storage {storage!r} not found in scope"),
        )
    if kind == "vm":
        vmid = _vmid(query)
        stages = ["devices", "virtual-machines", "vm-disks", "vm-interfaces", "ip-addresses"]
        return Selection(
            kind,
            [BY_SLUG[s] for s in stages],
            frozenset({vmid or 0}),
            None,
            ("virtual machine", f"vmid {vmid} not found in scope"),
        )
    if kind == "backup":
        return _backup(query)
    if kind == "snapshot":
        vmid = _vmid(query)
        name = _name(query, "name", "snapshot name", required=False)
        return Selection(
            kind,
            [_devices(), BY_SLUG["virtual-machines"], _stage("vm-snapshots", [SnapshotKind()])],
            frozenset({vmid or 0}),
            Focus(snapshots=frozenset({name})) if name else None,
            ("snapshot", f"snapshot {name!r} of vmid {vmid} not found in scope")
            if name
            else ("virtual machine", f"vmid {vmid} not found in scope"),
        )
    if kind == "task-history":
        return _task(query)
    raise KeyError(kind)


def _backup(query: Mapping[str, str]) -> Selection:
    vmid = _vmid(query)
    volid = (query.get("volid") or "").strip() or None
    focus = None
    if volid is not None:
        storage = volid_storage(volid)
        if storage is None or len(volid) > 255:
            raise FieldError("volid", f"expected a Proxmox volume id '<storage>:<volume>', got {volid!r}")
        owner = volid_vmid(volid)
        if owner is not None and owner != vmid:
            raise FieldError("volid", f"volume {volid!r} belongs to vmid {owner}, not {vmid}")
        focus = Focus(storages=frozenset({storage}), volids=frozenset({volid}))
    plugin = [PluginClusterKind(), PluginNodeKind(), PluginStorageKind()]
    return Selection(
        "backup",
        [
            _devices(),
            _stage("storage", plugin),
            BY_SLUG["virtual-machines"],
            _stage("vm-backups", [BackupKind()]),
        ],
        frozenset({vmid or 0}),
        focus,
        ("backup", f"backup {volid!r} not found in scope")
        if volid
        else ("virtual machine", f"vmid {vmid} not found in scope"),
    )


#: Proxmox's node names (its `pve-node` format: a DNS label); a UPID naming anything else is refused
#: before any read, rather than read partly and answered 404
_NODE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _task(query: Mapping[str, str]) -> Selection:
    text = (query.get("upid") or "").strip()
    vmid = _vmid(query, required=False)
    if not text and vmid is None:
        raise FieldError("upid", "upid (a Proxmox task UPID) or vmid is required")
    upid = parse_upid(text) if text else None
    if text and (upid is None or len(text) > 255 or not _NODE_NAME.fullmatch(upid.node)):
        raise FieldError("upid", f"expected a Proxmox UPID 'UPID:<node>:...', got {text!r}")
    if upid is not None and upid.vmid is not None:
        if vmid is not None and vmid != upid.vmid:
            raise FieldError("vmid", f"task {text!r} belongs to vmid {upid.vmid}, not {vmid}")
        vmid = upid.vmid
    stages = [_devices(), _stage("storage", [PluginClusterKind(), PluginNodeKind()])]
    if vmid is not None:
        stages.append(BY_SLUG["virtual-machines"])
    stages.append(_stage("task-history", [TaskKind()]))
    return Selection(
        "task-history",
        stages,
        frozenset({vmid}) if vmid is not None else None,
        Focus(upids=frozenset({text})) if upid else None,
        ("task", f"task {text!r} not found in scope (Proxmox lists the last 500 tasks per node)")
        if upid
        else ("virtual machine", f"vmid {vmid} not found in scope"),
    )


def found_totals(frames: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Kind name -> objects Proxmox had for it in this run, from the `diff` steps (`<kind>: ...`)."""
    totals: dict[str, int] = {}
    for frame in frames:
        data = frame.get("data") or {}
        if frame.get("event") == "step" and data.get("phase") == "diff":
            name = str(data.get("message") or "").split(":", 1)[0]
            totals[name] = totals.get(name, 0) + int((data.get("counts") or {}).get("total") or 0)
    return totals
