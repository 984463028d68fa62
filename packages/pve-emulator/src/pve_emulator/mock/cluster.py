"""Cluster-wide views (status, resources, next id, tasks), nodes, node tasks and backup jobs."""

from __future__ import annotations

import re
import time
from typing import Any

from pve_emulator.errors import Forbidden, bad_param, not_found
from pve_emulator.mock import calendar
from pve_emulator.mock.access import can_audit_vm, privileges
from pve_emulator.mock.backup_scope import backup_volumes, covered_vmids, included_guests
from pve_emulator.mock.guests.common import guest_usage
from pve_emulator.mock.locks import active_lock
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.release_info import release_info
from pve_emulator.mock.state import ClusterState, Task, digest
from pve_emulator.mock.storage import content_string, storage_usage
from pve_emulator.mock.task_views import active_list, node_task_order, sees_task, status_type, task_entry
from pve_emulator.paging import Counted


@route("GET", "/version")
def version(call: Call) -> dict[str, Any]:
    """The served release's version info plus, as PVE's API2.pm adds it, datacenter.cfg's ``console``."""
    out: dict[str, Any] = {}
    datacenter = call.state.generic.get("/cluster/options", {}).get(".", {})
    if "console" in datacenter:
        out["console"] = datacenter["console"]
    return {**out, **release_info(call.state.release).version_info()}


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


def node_usage(state: ClusterState, name: str, guest_mem: list[int] | None = None) -> dict[str, Any]:
    """A node's figures from its running guests; ``guest_mem`` (their ``mem``, when the caller has
    them already) spares reading every guest again."""
    node = state.nodes[name]
    if guest_mem is None:
        running = [g for g in state.guests.values() if g.node == name and g.status == "running"]
        guest_mem = [guest_usage(g, 0)["mem"] for g in running]
    mem = 2 * 1024**3 + sum(guest_mem)
    running_count = len(guest_mem)
    return {
        "cpu": round(0.02 + 0.01 * running_count / max(node.maxcpu, 1), 4),
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
        "kversion": f"Linux {release_info(call.state.release).kernel} #1 SMP PREEMPT_DYNAMIC",
        "pveversion": release_info(call.state.release).pveversion,
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
            "release": release_info(call.state.release).kernel,
            "machine": "x86_64",
            "version": "#1 SMP PREEMPT_DYNAMIC",
        },
    }


@route("GET", "/nodes/{node}/version")
def node_version(call: Call) -> dict[str, Any]:
    _node(call)
    return release_info(call.state.release).version_info()


def _node_online(state: Any, name: str) -> bool:
    node = state.nodes.get(name)
    return node is None or node.online


GUEST_STATS = ("uptime", "cpu", "maxcpu", "mem", "maxmem", "disk", "maxdisk")
GUEST_IO = ("netin", "netout", "diskread", "diskwrite")
HA_TYPE = {"qemu": "vm", "lxc": "ct"}


def ha_states(state: ClusterState) -> dict[str, str]:
    """Each HA resource's requested state by service id (``vm:100``); a resource without one is
    ``started``, the legacy ``enabled`` reads as ``started`` (PVE::HA::Config)."""
    out = {}
    for key, item in state.generic.get("/cluster/ha/resources", {}).items():
        sid = str(item.get("sid", key))
        if ":" not in sid:
            guest = state.guests.get(int(sid)) if sid.isdigit() else None
            sid = f"{HA_TYPE[guest.kind]}:{sid}" if guest else sid
        wanted = str(item.get("state") or "started")
        out[sid] = "started" if wanted == "enabled" else wanted
    return out


def _guest_resource(state: ClusterState, guest: Any, usage: dict[str, Any]) -> dict[str, Any]:
    """extract_vm_stats plus the config's ``lock``/``tags``: what pvestatd broadcast for the guest."""
    entry: dict[str, Any] = {
        "id": f"{guest.kind}/{guest.vmid}",
        "vmid": guest.vmid,
        "node": guest.node,
        "type": guest.kind,
        # a guest of a node that is down: the cluster knows it exists, not what it is doing
        "status": guest.status if _node_online(state, guest.node) else "unknown",
        "name": guest.name,
        "template": int(guest.is_template),
    }
    entry.update({k: usage[k] for k in (*GUEST_STATS, *GUEST_IO)})
    if not str(state.release).startswith("8"):
        entry["memhost"] = usage["mem"]  # PVE 9's pve-vm-9.0 RRD also reports the host-side memory
    lock = active_lock(state, guest)
    if lock:
        entry["lock"] = lock
    if guest.config.get("tags"):
        entry["tags"] = guest.config["tags"]
    return entry


def _add_to_pool(pool: dict[str, Any], guest: dict[str, Any]) -> None:
    """Cluster.pm: a pool entry sums its running members' memory and CPUs (cpu weighted by maxcpu) and
    carries the longest uptime."""
    pool["uptime"] = max(pool.get("uptime", 0), guest["uptime"])
    pool["mem"] = pool.get("mem", 0) + guest["mem"]
    pool["maxmem"] = pool.get("maxmem", 0) + guest["maxmem"]
    cpu, maxcpu = pool.get("cpu", 0), pool.get("maxcpu", 0)
    total = maxcpu + guest["maxcpu"]
    pool["cpu"] = (cpu * maxcpu + guest["cpu"] * guest["maxcpu"]) / total if total else 0
    pool["maxcpu"] = total


def _node_resource(state: ClusterState, node: Any, audit: bool, guest_mem: list[int]) -> dict[str, Any]:
    """extract_node_stats: an offline node keeps its last capacities but no live numbers; a caller without
    Sys.Audit on the node sees neither."""
    entry: dict[str, Any] = {
        "id": f"node/{node.name}",
        "node": node.name,
        "type": "node",
        "status": "online" if node.online else "offline",
        "level": "",
    }
    if audit:
        usage = node_usage(state, node.name, guest_mem)
        keys = ("maxcpu", "maxmem", "maxdisk") + (("uptime", "cpu", "mem", "disk") if node.online else ())
        entry.update({k: usage[k] for k in keys})
    entry["cgroup-mode"] = 2
    return entry


@route("GET", "/cluster/resources")
def cluster_resources(call: Call) -> list[dict[str, Any]]:
    """Cluster.pm resources: pools, guests (by vmid as text), nodes, storages per node, SDN zones.

    A guest's numbers are its status view's, a storage's ``disk``/``maxdisk`` its status ``used``/
    ``total`` on that node; a storage is listed only on the nodes where it is enabled."""
    state, kind, who = call.state, call.get("type"), call.identity
    now = time.time()
    out: list[dict[str, Any]] = []
    pools: dict[str, dict[str, Any]] = {}
    if kind in (None, "pool"):
        for poolid in sorted(state.pools):
            if "Pool.Audit" in privileges(state, who, f"/pool/{poolid}"):
                pools[poolid] = {"id": f"/pool/{poolid}", "pool": poolid, "type": "pool"}
                out.append(pools[poolid])
    # every guest's figures once: its own entry and its node's sums both use them
    usages = {vmid: guest_usage(guest, now) for vmid, guest in state.guests.items()}
    if kind in (None, "vm"):
        hastate = ha_states(state)
        for guest in sorted(state.guests.values(), key=lambda g: str(g.vmid)):
            entry = _guest_resource(state, guest, usages[guest.vmid])
            if guest.pool:
                entry["pool"] = guest.pool
                if guest.pool in pools and entry["uptime"]:
                    _add_to_pool(pools[guest.pool], entry)
            if not can_audit_vm(state, who, guest.vmid):
                continue
            if guest.pool and "Pool.Audit" not in privileges(state, who, f"/pool/{guest.pool}"):
                del entry["pool"]
            sid = f"{HA_TYPE[guest.kind]}:{guest.vmid}"
            if sid in hastate:
                entry["hastate"] = hastate[sid]
            out.append(entry)
    if kind in (None, "node"):
        running_mem: dict[str, list[int]] = {name: [] for name in state.nodes}
        for guest in state.guests.values():
            if guest.status == "running" and guest.node in running_mem:
                running_mem[guest.node].append(usages[guest.vmid]["mem"])
        for node in state.nodes.values():
            audit = "Sys.Audit" in privileges(state, who, f"/nodes/{node.name}")
            out.append(_node_resource(state, node, audit, running_mem[node.name]))
    if kind in (None, "storage"):
        usage = storage_usage(state)
        for storage, cfg in sorted(state.storages.items()):
            if "Datastore.Audit" not in privileges(state, who, f"/storage/{storage}"):
                continue
            for node_name in state.nodes:
                st = usage.get((node_name, storage))
                if st is None:  # not enabled on that node
                    continue
                out.append(
                    {
                        "id": f"storage/{node_name}/{storage}",
                        "storage": storage,
                        "node": node_name,
                        "type": "storage",
                        "plugintype": cfg["type"],
                        "status": "available",
                        "shared": int(cfg.get("shared", 0) or 0),
                        "content": content_string(cfg),
                        "maxdisk": st["total"],
                        "disk": st["used"],
                    }
                )
    if kind in (None, "sdn"):
        for node_name in sorted(state.nodes):
            for zone in sorted(state.sdn_zones):
                sdn = {"id": f"sdn/{node_name}/{zone}", "sdn": zone, "node": node_name, "type": "sdn"}
                zone_type = state.sdn_zones[zone].get("type")
                out.append({**sdn, "status": "ok", **({"zone-type": zone_type} if zone_type else {})})
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


@route("GET", "/nodes/{node}/tasks")
def list_tasks(call: Call) -> Counted:
    """Tasks.pm node_tasks: filters, then ``start`` matching tasks skipped and ``limit`` kept;
    ``total`` counts every match, so ``limit=0`` answers no tasks and just the count."""
    node = _node(call)
    now = time.time()
    source = call.get("source", "archive")
    running, ended = node_task_order([t for t in call.state.tasks.values() if t.node == node], now)
    chosen = (running if source in ("active", "all") else []) + (ended if source != "active" else [])
    wanted = {"ok", "warning", "error", "unknown"}
    if call.get("statusfilter") is not None and not call.get("errors"):
        wanted = {s.strip().lower() for s in re.split(r"[,;\s]+", call.params["statusfilter"]) if s}
    elif call.get("errors"):
        wanted.discard("ok")
    auditor = "Sys.Audit" in privileges(call.state, call.identity, f"/nodes/{node}")
    userfilter = (call.get("userfilter") or "").lower()
    vmid, since, until = call.get("vmid"), call.get("since"), call.get("until")
    matches = []
    for task in chosen:
        entry = task_entry(task, now)
        if userfilter and userfilter not in entry["user"].lower():
            continue
        if not (auditor or sees_task(call, task)):
            continue
        if call.get("typefilter") and task.type != call.params["typefilter"]:
            continue
        if vmid and task.id != str(vmid):
            continue
        if since is not None and entry["starttime"] < since:
            continue
        if until is not None and entry["starttime"] > until:
            continue
        if status_type(entry.get("status")) not in wanted:
            continue
        entry.setdefault("status", "RUNNING")
        matches.append(entry)
    start, limit = call.get("start", 0), call.get("limit", 50)
    return Counted(matches[start : start + limit], total=len(matches))


@route("GET", "/cluster/tasks")
def cluster_tasks(call: Call) -> list[dict[str, Any]]:
    """Cluster.pm tasks (PVE::Cluster::get_tasklist): each node's broadcast list, node after node; a
    caller without Sys.Audit on / sees only the tasks whose user is itself."""
    now = time.time()
    everything = "Sys.Audit" in privileges(call.state, call.identity, "/")
    return [
        entry
        for node in call.state.nodes
        for entry in active_list(call.state, node, now)
        if everything or entry["user"] == call.identity.subject
    ]


def _task(call: Call) -> Task:
    _node(call)
    task = call.state.tasks.get(call.params["upid"])
    if task is None or task.node != call.params["node"]:
        raise not_found(f"task '{call.params['upid']}'")
    return task


def _readable_task(call: Call) -> Task:
    """Tasks.pm: a task's owner reads its status and log; anyone else needs Sys.Audit on the node."""
    task = _task(call)
    node = call.params["node"]
    auditor = "Sys.Audit" in privileges(call.state, call.identity, f"/nodes/{node}")
    if not (auditor or sees_task(call, task)):
        raise Forbidden(f"Permission check failed (/nodes/{node}, Sys.Audit)")
    return task


@route("GET", "/nodes/{node}/tasks/{upid}")
def task_index(call: Call) -> list[dict[str, Any]]:
    _task(call)
    return [{"name": "log"}, {"name": "status"}]


@route("GET", "/nodes/{node}/tasks/{upid}/status")
def task_status(call: Call) -> dict[str, Any]:
    """Unlike the list, the status view says running|stopped and carries the exit status apart
    (and no endtime: Tasks.pm read_task_status returns the decoded UPID)."""
    task = _readable_task(call)
    entry = task_entry(task, time.time())
    entry.pop("endtime", None)
    if "status" in entry:
        entry["exitstatus"] = entry["status"]
        entry["status"] = "stopped"
    else:
        entry["status"] = "running"
    return entry


@route("GET", "/nodes/{node}/tasks/{upid}/log")
def task_log(call: Call) -> Counted:
    """PVE::Tools::dump_logfile: lines numbered from 1, ``start`` lines skipped, then ``limit`` lines, where
    ``limit=0`` means read to the end; ``total`` counts every line (an empty log reads as one line,
    "no content")."""
    task = _readable_task(call)
    lines = task.log if task.finished() else task.log[:-1]
    numbered = [{"n": i + 1, "t": line} for i, line in enumerate(lines)] or [{"n": 1, "t": "no content"}]
    start, limit = call.get("start", 0), call.get("limit", 50)
    page = numbered[start:] if limit == 0 else numbered[start : start + limit]
    return Counted(page, total=len(numbered))


@route("DELETE", "/nodes/{node}/tasks/{upid}")
def stop_task(call: Call) -> None:
    """Stopping a running task kills its worker: the log ends in the error, which is its exit status."""
    task = _task(call)
    if not task.finished():
        task.duration = max(0.0, time.time() - task.starttime)
        task.exitstatus = "interrupted by signal"
        task.log = [*task.log[:-1], "received interrupt", "TASK ERROR: interrupted by signal"]
        call.state.bump()


# --- backup jobs ---------------------------------------------------------------------------------

JOB_CONTROL = {"delete", "digest", "id"}


def _next_run(schedule: str) -> int:
    """The job's next start: its calendar event's first time after now (UTC, as ``calendar`` models it);
    an event the model cannot parse falls back to the next full hour."""
    now = int(time.time())
    try:
        return calendar.next_event(calendar.parse(schedule), now)
    except ValueError:
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
    """Backup.pm get_volume_backup_included: the job's guests (those the caller may audit), each with
    its volumes and whether vzdump includes them; a listed vmid without a guest is ``unknown``."""
    job = _backup_job(call)
    out = []
    for vmid in sorted(v for vmids in included_guests(call.state, job).values() for v in vmids):
        if not can_audit_vm(call.state, call.identity, vmid):
            continue
        guest = call.state.guests.get(vmid)
        if guest is None:
            out.append({"id": vmid, "type": "unknown", "leaf": 1})
            continue
        children = [
            {
                "id": f"{vmid}:{v['key']}",
                "name": v["volume"],
                "included": v["included"],
                "reason": v["reason"],
                "leaf": 1,
            }
            for v in backup_volumes(guest)
        ]
        entry: dict[str, Any] = {"id": vmid, "type": guest.kind}
        name = guest.config.get("name" if guest.kind == "qemu" else "hostname")
        if name is not None:
            entry["name"] = str(name)
        out.append({**entry, "children": children, "leaf": int(not children)})
    return {"children": out}


@route("GET", "/cluster/backup-info/not-backed-up")
def not_backed_up(call: Call) -> list[dict[str, Any]]:
    """BackupInfo.pm: guests (that the caller may audit) no vzdump job includes. Disabled jobs count as
    covering their guests, and templates are guests like any other."""
    covered = covered_vmids(call.state)
    out = []
    for guest in sorted(call.state.guests.values(), key=lambda g: g.vmid):
        if guest.vmid in covered or not can_audit_vm(call.state, call.identity, guest.vmid):
            continue
        entry: dict[str, Any] = {"vmid": guest.vmid, "type": guest.kind}
        name = guest.config.get("name" if guest.kind == "qemu" else "hostname")
        if name is not None:
            entry["name"] = str(name)
        out.append(entry)
    return out
