"""Storage: cluster storage configuration, per-node status and content (guest disks, backups, ISOs)."""

from __future__ import annotations

import re
import time
from typing import Any

from pve_emulator.errors import bad_param, not_found
from pve_emulator.mock.access import check_any, privileges
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import ClusterState, Volume
from pve_emulator.validation import INT64_MAX

STORAGE_SEE = {"Datastore.Audit", "Datastore.AllocateSpace"}
_CAPACITY = {
    "dir": 100,
    "lvmthin": 800,
    "lvm": 800,
    "zfspool": 1800,
    "rbd": 6000,
    "cephfs": 6000,
    "nfs": 4000,
    "cifs": 4000,
    "pbs": 8000,
}


# Storage types that allocate a guest disk's full size up front; on the others (thin pools, sparse
# files, Ceph) a disk occupies only what the guest has written, modelled as a third of its size.
THICK_TYPES = {"lvm", "iscsi", "iscsidirect"}


def storage_enabled_on(cfg: dict[str, Any], node: str) -> bool:
    """PVE::Storage::storage_check_enabled: not ``disable``d and, with a ``nodes`` list, on it."""
    nodes = [n for n in str(cfg.get("nodes") or "").split(",") if n]
    return not int(cfg.get("disable", 0) or 0) and (not nodes or node in nodes)


def content_string(cfg: dict[str, Any]) -> str:
    """content_hash_to_string: the content types, sorted, comma-separated."""
    return ",".join(sorted({c for c in str(cfg.get("content", "")).split(",") if c}))


def volume_used(cfg: dict[str, Any], size: int) -> int:
    """Bytes a guest disk of ``size`` takes on its storage (the whole size only where it is thick)."""
    thick = cfg["type"] in THICK_TYPES or (cfg["type"] == "zfspool" and not int(cfg.get("sparse", 0) or 0))
    return size if thick else size // 3


def _guest_volumes(state: ClusterState, node: str, storage: str) -> list[dict[str, Any]]:
    """Every guest volume on the storage as seen from ``node`` (all nodes' guests on shared storage):
    attached disks, detached ``unusedN`` ones (still on the storage), linked clones and template bases."""
    from pve_emulator.mock.guests.common import disk_entries

    cfg = state.storages[storage]
    shared = bool(cfg.get("shared"))
    out = []
    for guest in state.guests.values():
        if not shared and guest.node != node:
            continue
        for _key, st, name, size in disk_entries(guest):
            if st != storage:
                continue
            out.append(
                {
                    "volid": f"{st}:{name}",
                    "content": "rootdir" if guest.kind == "lxc" else "images",  # by the owner's type
                    "format": "raw" if not name.endswith(".qcow2") else "qcow2",
                    "size": size,
                    "used": volume_used(cfg, size),
                    "vmid": guest.vmid,
                    "ctime": 1_735_689_600 + guest.vmid,
                }
            )
    return out


def _visible(volume: Volume, node: str) -> bool:
    return volume.node is None or volume.node == node


def volume_entry(v: Volume) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "volid": v.volid,
        "content": v.content,
        "format": v.format,
        "size": v.size,
        "ctime": v.ctime,
    }
    if v.vmid is not None:
        entry["vmid"] = v.vmid
    if v.content == "backup":
        entry["notes"] = v.notes or ""
        entry["protected"] = v.protected
        if v.verification:
            entry["verification"] = v.verification
        entry["subtype"] = "qemu" if "-qemu-" in v.volid else "lxc"
    return entry


def storage_status(state: ClusterState, node: str, storage: str) -> dict[str, Any]:
    """total/used/avail of a storage on a node: ``used`` is what its content takes there (each guest
    volume's ``used``, each backup, ISO or template's ``size``), so it moves with every disk change."""
    cfg = state.storages[storage]
    total = _CAPACITY.get(cfg["type"], 500) * 1024**3
    used = sum(v["used"] for v in _guest_volumes(state, node, storage))
    used += sum(v.size for v in state.volumes.values() if v.storage == storage and _visible(v, node))
    used = min(used, total)
    return {"total": total, "used": used, "avail": total - used}


def storage_usage(state: ClusterState) -> dict[tuple[str, str], dict[str, Any]]:
    """``storage_status`` of every (node, storage) where the storage is enabled, in one pass over the
    guests: what ``/cluster/resources`` lists, without reading every guest's disks once per pair."""
    from pve_emulator.mock.guests.common import disk_entries

    local: dict[tuple[str, str], int] = {}
    shared: dict[str, int] = {}
    for guest in state.guests.values():
        for _key, st, _name, size in disk_entries(guest):
            cfg = state.storages.get(st)
            if cfg is None:
                continue
            if cfg.get("shared"):
                shared[st] = shared.get(st, 0) + volume_used(cfg, size)
            else:
                local[(guest.node, st)] = local.get((guest.node, st), 0) + volume_used(cfg, size)
    other: dict[tuple[str | None, str], int] = {}
    for v in state.volumes.values():
        other[(v.node, v.storage)] = other.get((v.node, v.storage), 0) + v.size
    out = {}
    for storage, cfg in state.storages.items():
        total = _CAPACITY.get(cfg["type"], 500) * 1024**3
        for node in state.nodes:
            if not storage_enabled_on(cfg, node):
                continue
            used = shared.get(storage, 0) if cfg.get("shared") else local.get((node, storage), 0)
            used += other.get((None, storage), 0) + other.get((node, storage), 0)
            used = min(used, total)
            out[(node, storage)] = {"total": total, "used": used, "avail": total - used}
    return out


def _storage_info(state: ClusterState, node: str, storage: str) -> dict[str, Any]:
    """PVE::Storage::storage_info for one storage: zeros, inactive, when it is not enabled on the node."""
    cfg = state.storages[storage]
    enabled = storage_enabled_on(cfg, node)
    info: dict[str, Any] = {
        "type": cfg["type"],
        "content": content_string(cfg),
        "shared": int(cfg.get("shared", 0) or 0),
        "enabled": int(enabled),
        "active": int(enabled),
        "total": 0,
        "used": 0,
        "avail": 0,
    }
    if enabled:
        info.update(storage_status(state, node, storage))
    return info


def _node(call: Call) -> str:
    node = call.params["node"]
    if node not in call.state.nodes:
        raise not_found(f"node '{node}'")
    return node


def _storage_on(call: Call) -> tuple[str, str]:
    node = _node(call)
    storage = call.params["storage"]
    cfg = call.state.storages.get(storage)
    if cfg is None or (cfg.get("nodes") and node not in str(cfg["nodes"]).split(",")):
        raise not_found(f"storage '{storage}' on node '{node}'")
    return node, storage


@route("GET", "/storage")
def list_storage_config(call: Call) -> list[dict[str, Any]]:
    """Only storages with Datastore.Audit or Datastore.AllocateSpace on /storage/<id> (pve-storage)."""
    kind = call.get("type")
    wanted = ["Datastore.Audit", "Datastore.AllocateSpace"]
    return [
        {"storage": s, **cfg, "digest": "0" * 40}
        for s, cfg in call.state.storages.items()
        if (kind is None or cfg["type"] == kind)
        and check_any(call.state, call.identity, f"/storage/{s}", wanted)
    ]


@route("POST", "/storage")
def create_storage(call: Call) -> dict[str, Any]:
    storage = call.params["storage"]
    if storage in call.state.storages:
        raise bad_param("storage", f"storage ID '{storage}' already defined")
    cfg = {
        k: v for k, v in call.params.items() if k not in ("storage", "password", "encryption-key", "keyring")
    }
    call.state.storages[storage] = cfg
    call.state.bump()
    return {"storage": storage, "type": cfg["type"]}


@route("GET", "/storage/{storage}")
def read_storage_config(call: Call) -> dict[str, Any]:
    cfg = call.state.storages.get(call.params["storage"])
    if cfg is None:
        raise not_found(f"storage '{call.params['storage']}'")
    return {"storage": call.params["storage"], **cfg, "digest": "0" * 40}


@route("PUT", "/storage/{storage}")
def update_storage_config(call: Call) -> dict[str, Any]:
    cfg = call.state.storages.get(call.params["storage"])
    if cfg is None:
        raise not_found(f"storage '{call.params['storage']}'")
    for key in (k for k in re.split(r"[,;\s]+", call.get("delete") or "") if k):
        cfg.pop(key, None)
    cfg.update({k: v for k, v in call.params.items() if k not in ("storage", "delete", "digest", "password")})
    call.state.bump()
    return {"storage": call.params["storage"], "type": cfg["type"]}


@route("DELETE", "/storage/{storage}")
def delete_storage_config(call: Call) -> None:
    if call.state.storages.pop(call.params["storage"], None) is None:
        raise not_found(f"storage '{call.params['storage']}'")
    call.state.bump()


@route("GET", "/nodes/{node}/storage")
def list_node_storage(call: Call) -> list[dict[str, Any]]:
    """Status.pm index: every storage, disabled ones and ones not on this node too (``enabled``/``active``
    0, no numbers) unless ``content`` is asked for; ``enabled=1`` drops only ``disable``d ones."""
    node = _node(call)
    wanted_content = set((call.get("content") or "").split(",")) - {""}
    out = []
    for storage, cfg in call.state.storages.items():
        if not privileges(call.state, call.identity, f"/storage/{storage}") & STORAGE_SEE:
            continue
        if call.get("storage") and storage != call.params["storage"]:
            continue
        info = _storage_info(call.state, node, storage)
        if wanted_content and not (info["enabled"] and wanted_content & set(info["content"].split(","))):
            continue
        if call.get("enabled") and int(cfg.get("disable", 0) or 0):
            continue
        if info["total"]:
            info["used_fraction"] = info["used"] / info["total"]
        out.append({"storage": storage, **info})
    return out


@route("GET", "/nodes/{node}/storage/{storage}/status")
def node_storage_status(call: Call) -> dict[str, Any]:
    """Status.pm read_status: the storage's info on this node (inactive zeros where it is not enabled)."""
    node = _node(call)
    storage = call.params["storage"]
    if storage not in call.state.storages:
        raise bad_param("storage", "No such storage.")
    return _storage_info(call.state, node, storage)


def _content(state: ClusterState, node: str, storage: str) -> list[dict[str, Any]]:
    items = _guest_volumes(state, node, storage)
    items += [volume_entry(v) for v in state.volumes.values() if v.storage == storage and _visible(v, node)]
    return sorted(items, key=lambda e: e["volid"])


@route("GET", "/nodes/{node}/storage/{storage}/content")
def list_content(call: Call) -> list[dict[str, Any]]:
    node, storage = _storage_on(call)
    items = _content(call.state, node, storage)
    if call.get("content"):
        items = [i for i in items if i["content"] == call.params["content"]]
    if call.get("vmid") is not None:
        items = [i for i in items if i.get("vmid") == call.params["vmid"]]
    return items


def _volume(call: Call) -> tuple[str, str, str]:
    node, storage = _storage_on(call)
    volid = call.params["volume"]
    if ":" not in volid:
        volid = f"{storage}:{volid}"
    if not any(i["volid"] == volid for i in _content(call.state, node, storage)):
        raise not_found(f"volume '{volid}'")
    return node, storage, volid


@route("GET", "/nodes/{node}/storage/{storage}/content/{volume}")
def read_volume(call: Call) -> dict[str, Any]:
    node, storage, volid = _volume(call)
    entry = next(i for i in _content(call.state, node, storage) if i["volid"] == volid)
    out = {
        "path": f"/var/lib/vz/{volid.split(':', 1)[1]}",
        "size": entry["size"],
        "used": entry.get("used", entry["size"]),
        "format": entry["format"],
    }
    for key in ("notes", "protected"):
        if key in entry:
            out[key] = entry[key]
    return out


@route("PUT", "/nodes/{node}/storage/{storage}/content/{volume}")
def update_volume(call: Call) -> None:
    _, _, volid = _volume(call)
    volume = call.state.volumes.get(volid)
    if volume is None:
        raise bad_param("volume", "only backup, ISO and template volumes carry notes and protection here")
    if "notes" in call.params:
        volume.notes = call.params["notes"]
    if "protected" in call.params:
        volume.protected = call.params["protected"]
    call.state.bump()


@route("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}")
def delete_volume(call: Call) -> str:
    node, _, volid = _volume(call)
    volume = call.state.volumes.get(volid)
    if volume is None:
        raise bad_param("volume", f"volume '{volid}' is in use by a guest")
    if volume.protected:
        raise bad_param("volume", "backup is protected - unprotect it first")
    del call.state.volumes[volid]
    call.state.bump()
    return call.state.add_task(node, "imgdel", volid, call.identity.subject).upid


@route("POST", "/nodes/{node}/storage/{storage}/content")
def allocate_volume(call: Call) -> str:
    node, storage = _storage_on(call)
    volid = f"{storage}:{call.params['filename']}"
    if volid in call.state.volumes:
        raise bad_param("filename", f"volume '{volid}' already exists")
    size_text = str(call.params["size"])
    m = re.fullmatch(r"([0-9]{1,30})([KMG]?)", size_text)
    if not m:
        raise bad_param("size", "size must be a number with an optional K, M or G suffix")
    size = int(m.group(1)) * {"": 1024, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]
    if size > INT64_MAX:
        raise bad_param("size", "size does not fit in 64 bits")
    shared = bool(call.state.storages[storage].get("shared"))
    call.state.volumes[volid] = Volume(
        volid=volid,
        storage=storage,
        node=None if shared else node,
        content="images",
        format=call.get("format", "raw"),
        size=size,
        ctime=int(time.time()),
        vmid=call.params["vmid"],
    )
    call.state.bump()
    return volid


@route("POST", "/nodes/{node}/vzdump")
def vzdump(call: Call) -> str:
    """Back up guests now: writes ``vzdump`` archives to the storage and returns the task."""
    node = _node(call)
    storage = call.get("storage") or next(
        (s for s, c in call.state.storages.items() if "backup" in str(c.get("content"))), None
    )
    if storage is None or storage not in call.state.storages:
        raise bad_param("storage", f"storage '{storage}' does not exist")
    if "backup" not in str(call.state.storages[storage].get("content", "")):
        raise bad_param("storage", f"storage '{storage}' does not support backups")
    vmids = [int(v) for v in re.split(r"[,;\s]+", str(call.get("vmid") or "")) if v]
    guests = [
        g for g in call.state.guests.values() if g.node == node and (call.get("all") or g.vmid in vmids)
    ]
    now = int(time.time())
    stamp = time.strftime("%Y_%m_%d-%H_%M_%S", time.gmtime(now))
    shared = bool(call.state.storages[storage].get("shared"))
    log = []
    for guest in guests:
        ext = "vma.zst" if guest.kind == "qemu" else "tar.zst"
        volid = f"{storage}:backup/vzdump-{guest.kind}-{guest.vmid}-{stamp}.{ext}"
        call.state.volumes[volid] = Volume(
            volid=volid,
            storage=storage,
            node=None if shared else node,
            content="backup",
            format=ext,
            size=1024**3 + guest.vmid * 1024**2,
            ctime=now,
            vmid=guest.vmid,
            notes=call.get("notes-template", guest.name),
            protected=int(call.get("protected", 0) or 0),
        )
        log.append(f"INFO: Finished Backup of VM {guest.vmid}")
    call.state.bump()
    return call.state.add_task(
        node,
        "vzdump",
        ",".join(str(g.vmid) for g in guests),
        call.identity.subject,
        log=[*log, "INFO: Backup job finished successfully", "TASK OK"],
    ).upid
