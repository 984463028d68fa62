"""Cluster-wide views (status, resources, next id, tasks), nodes, node tasks, backup and replication jobs."""

from __future__ import annotations

import re
import time
from typing import Any

from pve_emulator.errors import ApiError, bad_param, not_found
from pve_emulator.mock.access import can_audit_vm, privileges
from pve_emulator.mock.guests import disk_entries, guest_usage
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import ClusterState, Task, digest
from pve_emulator.mock.storage import storage_status
from pve_emulator.validation import decimal

PVE_VERSION = {"version": "9.1.2", "release": "9.1", "repoid": "c3d8f7b1a2e4d5f6"}


@route("GET", "/version")
def version(call: Call) -> dict[str, Any]:
    return dict(PVE_VERSION)


@route("GET", "/cluster/status")
def cluster_status(call: Call) -> list[dict[str, Any]]:
    state = call.state
    online = [n for n in state.nodes.values() if n.online]
    out: list[dict[str, Any]] = [
        {
            "type": "cluster",
            "id": "cluster",
            "name": state.cluster_name,
            "nodes": len(state.nodes),
            "quorate": int(len(online) * 2 > len(state.nodes)),
            "version": 3 + len(state.nodes),
        }
    ]
    local = next(iter(state.nodes), None)
    for node in state.nodes.values():
        out.append(
            {
                "type": "node",
                "id": f"node/{node.name}",
                "name": node.name,
                "nodeid": node.nodeid,
                "ip": node.ip,
                "online": int(node.online),
                "local": int(node.name == local),
                "level": "",
            }
        )
    return out


def node_usage(state: ClusterState, name: str) -> dict[str, Any]:
    node = state.nodes[name]
    running = [g for g in state.guests.values() if g.node == name and g.status == "running"]
    mem = 2 * 1024**3 + sum(guest_usage(g, 0)["mem"] for g in running)
    return {
        "cpu": round(0.02 + 0.01 * len(running) / max(node.maxcpu, 1), 4),
        "maxcpu": node.maxcpu,
        "mem": min(mem, node.maxmem),
        "maxmem": node.maxmem,
        "disk": 12 * 1024**3,
        "maxdisk": 100 * 1024**3,
        "uptime": int(time.time() - node.started) if node.online else 0,
    }


@route("GET", "/nodes")
def list_nodes(call: Call) -> list[dict[str, Any]]:
    out = []
    for node in call.state.nodes.values():
        entry: dict[str, Any] = {
            "node": node.name,
            "id": f"node/{node.name}",
            "type": "node",
            "status": "online" if node.online else "offline",
            "level": "",
            "ssl_fingerprint": _fingerprint(node.name),
        }
        if node.online:
            entry.update(node_usage(call.state, node.name))
        out.append(entry)
    return out


def _fingerprint(name: str) -> str:
    d = digest({"node": name})[:64].upper().ljust(64, "0")
    return ":".join(d[i : i + 2] for i in range(0, 64, 2))


def _node(call: Call) -> str:
    node = call.params["node"]
    if node not in call.state.nodes:
        raise not_found(f"node '{node}'")
    return node


@route("GET", "/nodes/{node}/status")
def node_status(call: Call) -> dict[str, Any]:
    name = _node(call)
    node = call.state.nodes[name]
    usage = node_usage(call.state, name)
    return {
        "cpu": usage["cpu"],
        "uptime": usage["uptime"],
        "loadavg": ["0.42", "0.38", "0.35"],
        "wait": 0.001,
        "idle": 0,
        "kversion": "Linux 6.14.11-4-pve #1 SMP PREEMPT_DYNAMIC",
        "pveversion": "pve-manager/9.1.2/c3d8f7b1",
        "cpuinfo": {
            "cores": node.maxcpu // 2,
            "cpus": node.maxcpu,
            "sockets": 1,
            "model": "AMD EPYC 7302P 16-Core Processor",
            "mhz": "3000.000",
            "hvm": "1",
            "user_hz": 100,
            "flags": "fpu vme de pse",
        },
        "memory": {
            "total": node.maxmem,
            "used": usage["mem"],
            "free": node.maxmem - usage["mem"],
            "available": node.maxmem - usage["mem"],
        },
        "swap": {"total": 8 * 1024**3, "used": 0, "free": 8 * 1024**3},
        "rootfs": {"total": 100 * 1024**3, "used": 12 * 1024**3, "free": 88 * 1024**3, "avail": 83 * 1024**3},
        "ksm": {"shared": 0},
        "boot-info": {"mode": "efi", "secureboot": 0},
        "current-kernel": {
            "sysname": "Linux",
            "release": "6.14.11-4-pve",
            "machine": "x86_64",
            "version": "#1 SMP PREEMPT_DYNAMIC",
        },
    }


@route("GET", "/nodes/{node}/version")
def node_version(call: Call) -> dict[str, Any]:
    _node(call)
    return dict(PVE_VERSION)


def _node_online(state: Any, name: str) -> bool:
    node = state.nodes.get(name)
    return node is None or node.online


@route("GET", "/cluster/resources")
def cluster_resources(call: Call) -> list[dict[str, Any]]:
    state, kind = call.state, call.get("type")
    now = time.time()
    out: list[dict[str, Any]] = []
    if kind in (None, "node"):
        for node in state.nodes.values():
            entry: dict[str, Any] = {
                "id": f"node/{node.name}",
                "type": "node",
                "node": node.name,
                "status": "online" if node.online else "offline",
                "level": "",
                "cgroup-mode": 2,
            }
            entry.update(node_usage(state, node.name))
            out.append(entry)
    if kind in (None, "vm"):
        for guest in sorted(state.guests.values(), key=lambda g: g.vmid):
            if not can_audit_vm(state, call.identity, guest.vmid):
                continue
            usage = guest_usage(guest, now)
            entry = {
                "id": f"{guest.kind}/{guest.vmid}",
                "type": guest.kind,
                "vmid": guest.vmid,
                "node": guest.node,
                "name": guest.name,
                # a guest of a node that is down: the cluster knows it exists, not what it is doing
                "status": guest.status if _node_online(state, guest.node) else "unknown",
                "template": int(guest.is_template),
                "hastate": None,
                **{
                    k: usage[k]
                    for k in (
                        "cpu",
                        "maxcpu",
                        "mem",
                        "maxmem",
                        "disk",
                        "maxdisk",
                        "uptime",
                        "netin",
                        "netout",
                        "diskread",
                        "diskwrite",
                    )
                },
            }
            if guest.pool:
                entry["pool"] = guest.pool
            if guest.config.get("tags"):
                entry["tags"] = guest.config["tags"]
            out.append({k: v for k, v in entry.items() if v is not None})
    if kind in (None, "storage"):
        for node_name in state.nodes:
            for storage, cfg in state.storages.items():
                if cfg.get("nodes") and node_name not in str(cfg["nodes"]).split(","):
                    continue
                st = storage_status(state, node_name, storage)
                out.append(
                    {
                        "id": f"storage/{node_name}/{storage}",
                        "type": "storage",
                        "node": node_name,
                        "storage": storage,
                        "status": "available",
                        "plugintype": cfg["type"],
                        "content": cfg.get("content", ""),
                        "shared": int(cfg.get("shared", 0)),
                        "disk": st["used"],
                        "maxdisk": st["total"],
                    }
                )
    if kind in (None, "pool"):
        for poolid in sorted(state.pools):
            out.append({"id": f"pool/{poolid}", "type": "pool", "pool": poolid})
    if kind in (None, "sdn"):
        for node_name in state.nodes:
            for zone in state.sdn_zones:
                out.append(
                    {
                        "id": f"sdn/{node_name}/{zone}",
                        "type": "sdn",
                        "sdn": zone,
                        "node": node_name,
                        "status": "ok",
                        "zone-type": state.sdn_zones[zone].get("type"),
                    }
                )
    return out


@route("GET", "/cluster/config/nodes")
def cluster_config_nodes(call: Call) -> list[dict[str, Any]]:
    return [
        {"node": n.name, "nodeid": n.nodeid, "name": n.name, "ring0_addr": n.ip, "quorum_votes": 1}
        for n in call.state.nodes.values()
    ]


@route("GET", "/cluster/nextid")
def next_id(call: Call) -> int:
    wanted = call.get("vmid")
    if wanted is not None:
        if int(wanted) in call.state.guests:
            raise bad_param("vmid", f"VM {wanted} already exists")
        return int(wanted)
    vmid = 100
    while vmid in call.state.guests:
        vmid += 1
    return vmid


# --- tasks ---------------------------------------------------------------------------------------


def task_entry(task: Task, now: float) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "upid": task.upid,
        "node": task.node,
        "type": task.type,
        "id": task.id,
        "user": task.user,
        "starttime": int(task.starttime),
        "pid": int(task.upid.split(":")[2], 16),
        "pstart": int(task.upid.split(":")[3], 16),
    }
    if task.finished(now):
        entry["status"] = task.exitstatus
        entry["endtime"] = task.endtime
    else:
        entry["status"] = "running"
    return entry


@route("GET", "/nodes/{node}/tasks")
def list_tasks(call: Call) -> list[dict[str, Any]]:
    node = _node(call)
    now = time.time()
    tasks = [t for t in call.state.tasks.values() if t.node == node]
    tasks.sort(key=lambda t: t.starttime, reverse=True)
    source = call.get("source", "archive")
    if source == "active":
        tasks = [t for t in tasks if not t.finished(now)]
    elif source == "archive":
        tasks = [t for t in tasks if t.finished(now)]
    if call.get("errors"):
        tasks = [t for t in tasks if t.finished(now) and t.exitstatus != "OK"]
    if call.get("vmid") is not None:
        tasks = [t for t in tasks if t.id == str(call.params["vmid"])]
    if call.get("typefilter"):
        tasks = [t for t in tasks if t.type == call.params["typefilter"]]
    if call.get("userfilter"):
        tasks = [t for t in tasks if call.params["userfilter"] in t.user]
    if call.get("since") is not None:
        tasks = [t for t in tasks if t.starttime >= call.params["since"]]
    if call.get("until") is not None:
        tasks = [t for t in tasks if t.starttime <= call.params["until"]]
    entries = [task_entry(t, now) for t in tasks]
    if call.get("statusfilter"):
        wanted = set(call.params["statusfilter"].split(","))
        entries = [
            e
            for e in entries
            if ("ok" if e["status"] == "OK" else "running" if e["status"] == "running" else "error") in wanted
        ]
    start, limit = call.get("start", 0), call.get("limit", 50)
    return entries[start : start + limit]


@route("GET", "/cluster/tasks")
def cluster_tasks(call: Call) -> list[dict[str, Any]]:
    now = time.time()
    return [
        task_entry(t, now) for t in sorted(call.state.tasks.values(), key=lambda t: t.starttime, reverse=True)
    ]


def _task(call: Call) -> Task:
    _node(call)
    task = call.state.tasks.get(call.params["upid"])
    if task is None or task.node != call.params["node"]:
        raise not_found(f"task '{call.params['upid']}'")
    return task


@route("GET", "/nodes/{node}/tasks/{upid}")
def task_index(call: Call) -> list[dict[str, Any]]:
    _task(call)
    return [{"name": "log"}, {"name": "status"}]


@route("GET", "/nodes/{node}/tasks/{upid}/status")
def task_status(call: Call) -> dict[str, Any]:
    """Unlike the list, the status view says running|stopped and carries the exit status apart."""
    task = _task(call)
    entry = task_entry(task, time.time())
    if entry["status"] != "running":
        entry["exitstatus"] = entry["status"]
        entry["status"] = "stopped"
    return entry


@route("GET", "/nodes/{node}/tasks/{upid}/log")
def task_log(call: Call) -> list[dict[str, Any]]:
    task = _task(call)
    lines = task.log if task.finished() else task.log[:-1]
    start, limit = call.get("start", 0), call.get("limit", 50)
    return [{"n": i + 1, "t": line} for i, line in enumerate(lines)][start : start + limit]


@route("DELETE", "/nodes/{node}/tasks/{upid}")
def stop_task(call: Call) -> None:
    task = _task(call)
    if not task.finished():
        task.duration = max(0.0, time.time() - task.starttime)
        task.exitstatus = "unexpected status"
        task.log = [*task.log[:-1], "received interrupt", "TASK ERROR: interrupted by signal"]
        call.state.bump()


# --- backup jobs ---------------------------------------------------------------------------------

JOB_CONTROL = {"delete", "digest", "id"}


def _next_run(schedule: str) -> int:
    """Next run of a calendar event; a plain 'HH:MM' or anything else is treated as the next hour."""
    now = int(time.time())
    m = re.search(r"(\d{1,2}):(\d{2})", schedule)
    if m:
        day = now - now % 86400
        at = day + int(m.group(1)) * 3600 + int(m.group(2)) * 60
        return at if at > now else at + 86400
    return now - now % 3600 + 3600


def backup_job_view(job: dict[str, Any]) -> dict[str, Any]:
    view = dict(job)
    if view.get("enabled", 1):
        view["next-run"] = _next_run(str(view.get("schedule", "")))
    return view


@route("GET", "/cluster/backup")
def list_backup_jobs(call: Call) -> list[dict[str, Any]]:
    return [backup_job_view(j) for j in call.state.backup_jobs.values()]


@route("POST", "/cluster/backup")
def create_backup_job(call: Call) -> None:
    params = {k: v for k, v in call.params.items() if k not in JOB_CONTROL}
    job_id = call.get("id") or f"backup-{digest(params)[:8]}-{digest({'n': len(call.state.backup_jobs)})[:4]}"
    if job_id in call.state.backup_jobs:
        raise bad_param("id", f"Job '{job_id}' already exists")
    if not any(k in params for k in ("vmid", "all", "pool")):
        raise bad_param("vmid", "one of 'vmid', 'all' or 'pool' is required")
    if "storage" in params and params["storage"] not in call.state.storages:
        raise bad_param("storage", f"storage '{params['storage']}' does not exist")
    params.setdefault("schedule", params.pop("starttime", "00:00"))
    params.setdefault("enabled", 1)
    params.setdefault("type", "vzdump")
    call.state.backup_jobs[job_id] = {"id": job_id, **params}
    call.state.bump()


def _backup_job(call: Call) -> dict[str, Any]:
    job = call.state.backup_jobs.get(call.params["id"])
    if job is None:
        raise not_found(f"job '{call.params['id']}'")
    return job


@route("GET", "/cluster/backup/{id}")
def read_backup_job(call: Call) -> dict[str, Any]:
    return backup_job_view(_backup_job(call))


@route("PUT", "/cluster/backup/{id}")
def update_backup_job(call: Call) -> None:
    job = _backup_job(call)
    for key in (k for k in re.split(r"[,;\s]+", call.get("delete") or "") if k):
        job.pop(key, None)
    job.update({k: v for k, v in call.params.items() if k not in JOB_CONTROL})
    call.state.bump()


@route("DELETE", "/cluster/backup/{id}")
def delete_backup_job(call: Call) -> None:
    _backup_job(call)
    del call.state.backup_jobs[call.params["id"]]
    call.state.bump()


@route("GET", "/cluster/backup/{id}/included_volumes")
def backup_job_volumes(call: Call) -> dict[str, Any]:
    job = _backup_job(call)
    vmids = {n for n in (decimal(v) for v in str(job.get("vmid", "")).split(",")) if n is not None}
    children = []
    for guest in sorted(call.state.guests.values(), key=lambda g: g.vmid):
        if job.get("all") or guest.vmid in vmids or (job.get("pool") and guest.pool == job.get("pool")):
            children.append(
                {
                    "id": guest.vmid,
                    "name": guest.name,
                    "type": guest.kind,
                    "children": [
                        {"id": key, "name": f"{s}:{n}", "included": 1, "reason": "default"}
                        for key, s, n, _ in disk_entries(guest)
                    ],
                }
            )
    return {"children": children}


@route("GET", "/cluster/backup-info/not-backed-up")
def not_backed_up(call: Call) -> list[dict[str, Any]]:
    covered: set[int] = set()
    for job in call.state.backup_jobs.values():
        if job.get("all"):
            return []
        covered |= {n for n in (decimal(v) for v in str(job.get("vmid", "")).split(",")) if n is not None}
        covered |= {
            g.vmid for g in call.state.guests.values() if job.get("pool") and g.pool == job.get("pool")
        }
    return [
        {"vmid": g.vmid, "name": g.name, "type": g.kind}
        for g in sorted(call.state.guests.values(), key=lambda g: g.vmid)
        if g.vmid not in covered
    ]


# --- replication ---------------------------------------------------------------------------------


def replication_view(job: dict[str, Any]) -> dict[str, Any]:
    view = dict(job)
    view.setdefault("schedule", "*/15")
    return view


@route("GET", "/cluster/replication")
def list_replication(call: Call) -> list[dict[str, Any]]:
    return [replication_view(j) for j in call.state.replication_jobs.values()]


@route("POST", "/cluster/replication")
def create_replication(call: Call) -> None:
    job_id = call.params["id"]
    m = re.fullmatch(r"(\d+)-(\d+)", job_id)
    if not m:
        raise bad_param("id", "replication job id must look like '<vmid>-<number>'")
    if job_id in call.state.replication_jobs:
        raise bad_param("id", f"replication job '{job_id}' already exists")
    guest = call.state.guests.get(int(m.group(1)))
    if guest is None:
        raise bad_param("id", f"guest {m.group(1)} does not exist")
    target = call.params["target"]
    if target not in call.state.nodes:
        raise bad_param("target", f"no such node '{target}'")
    if target == guest.node:
        raise bad_param("target", "target is local node")
    job = {
        "id": job_id,
        "type": call.params["type"],
        "target": target,
        "guest": guest.vmid,
        "jobnum": int(m.group(2)),
        "source": guest.node,
    }
    job.update({k: v for k, v in call.params.items() if k not in ("id", "type", "target")})
    call.state.replication_jobs[job_id] = job
    call.state.bump()


def _replication(call: Call) -> dict[str, Any]:
    job = call.state.replication_jobs.get(call.params["id"])
    if job is None:
        raise not_found(f"replication job '{call.params['id']}'")
    return job


@route("GET", "/cluster/replication/{id}")
def read_replication(call: Call) -> dict[str, Any]:
    return {**replication_view(_replication(call)), "digest": digest(_replication(call))}


@route("PUT", "/cluster/replication/{id}")
def update_replication(call: Call) -> None:
    job = _replication(call)
    for key in (k for k in re.split(r"[,;\s]+", call.get("delete") or "") if k):
        job.pop(key, None)
    job.update({k: v for k, v in call.params.items() if k not in JOB_CONTROL})
    call.state.bump()


@route("DELETE", "/cluster/replication/{id}")
def delete_replication(call: Call) -> None:
    job = _replication(call)
    if call.get("force"):
        del call.state.replication_jobs[job["id"]]
    else:
        job["remove_job"] = "full" if not call.get("keep") else "local"
        del call.state.replication_jobs[job["id"]]
    call.state.bump()


def require_sys_audit(call: Call) -> None:
    if "Sys.Audit" not in privileges(call.state, call.identity, "/"):
        raise ApiError(403, "Permission check failed (/, Sys.Audit)")
