"""Replication endpoints: the cluster-wide job config (``/cluster/replication``) and a node's pvesr view
(``/nodes/{node}/replication``: status, log, schedule_now), following pve-manager's ReplicationConfig.pm
and Replication.pm. The status fields come from ``mock.replication``."""

from __future__ import annotations

import re
from typing import Any

from pve_emulator.errors import Forbidden, bad_param, not_found
from pve_emulator.mock import replication
from pve_emulator.mock.access import can_audit_vm, privileges
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import digest

JOB_CONTROL = {"delete", "digest", "id"}
# options an update may remove (``delete``); target and type are fixed once created
DELETABLE = {"disable", "comment", "rate", "schedule", "remove_job", "source"}


# --- cluster-wide configuration --------------------------------------------------------------------


@route("GET", "/cluster/replication")
def list_replication(call: Call) -> list[dict[str, Any]]:
    """Every job the caller may audit, sorted by id, as written in replication.cfg."""
    jobs = call.state.replication_jobs
    return [
        dict(jobs[k]) for k in sorted(jobs) if can_audit_vm(call.state, call.identity, int(jobs[k]["guest"]))
    ]


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
    if call.get("source") not in (None, guest.node):
        raise bad_param("source", f"does not match current node of guest '{guest.vmid}' ({guest.node})")
    if target == guest.node:
        raise bad_param("target", "target is local node")
    if not replication.replicated_volumes(call.state, guest):
        raise bad_param("id", "No replicatable volumes found")  # shared storage needs no replication
    if any(
        int(j["guest"]) == guest.vmid and j["target"] == target for j in call.state.replication_jobs.values()
    ):
        raise bad_param(
            "target", f"replication job for guest '{guest.vmid}' to target '{target}' already exists"
        )
    job = {
        "id": job_id,
        "type": call.params["type"],
        "target": target,
        "guest": guest.vmid,
        "jobnum": int(m.group(2)),
        "source": guest.node,
    }
    job.update({k: v for k, v in call.params.items() if k not in ("id", "type", "target", "source")})
    call.state.replication_jobs[job_id] = job
    call.state.bump()


def _replication(call: Call) -> dict[str, Any]:
    job = call.state.replication_jobs.get(call.params["id"])
    if job is None:
        raise not_found(f"replication job '{call.params['id']}'")
    return job


@route("GET", "/cluster/replication/{id}")
def read_replication(call: Call) -> dict[str, Any]:
    job = _replication(call)
    return {**job, "digest": digest(job)}


@route("PUT", "/cluster/replication/{id}")
def update_replication(call: Call) -> None:
    job = _replication(call)
    if call.get("digest") not in (None, digest(job)):
        raise bad_param("digest", "detected modified configuration - file changed by other user? Try again.")
    for key in (k for k in re.split(r"[,;\s]+", call.get("delete") or "") if k):
        if key not in DELETABLE:
            raise bad_param("delete", f"unable to delete option '{key}'")
        job.pop(key, None)
    job.update({k: v for k, v in call.params.items() if k not in JOB_CONTROL})
    call.state.bump()


@route("DELETE", "/cluster/replication/{id}")
def delete_replication(call: Call) -> None:
    """Proxmox marks the job (``remove_job``) and pvesr removes it on its next run, within the minute;
    the emulator runs that removal at once (``force`` drops the entry without the clean-up run)."""
    if call.get("force") and call.get("keep"):
        raise bad_param("keep", "conflicts with parameter 'force'")
    job = _replication(call)
    if not call.get("force"):
        job["remove_job"] = "local" if call.get("keep") else "full"
        if replication.run_job(call.state, str(job["id"])):
            return
    call.state.replication_jobs.pop(str(job["id"]), None)
    replication.forget_job(call.state, job)
    call.state.bump()


# --- a node's replication status -------------------------------------------------------------------


def _node_job(call: Call) -> dict[str, Any]:
    entry = replication.job_status(call.state, call.params["node"]).get(call.params["id"])
    if entry is None:
        raise not_found(f"replication job '{call.params['id']}'")
    return entry


@route("GET", "/nodes/{node}/replication")
def node_replication(call: Call) -> list[dict[str, Any]]:
    """The jobs of the guests on this node, with their run state (pvesr status)."""
    guest = call.get("guest")
    return [
        entry
        for entry in replication.job_status(call.state, call.params["node"]).values()
        if (guest is None or int(entry["guest"]) == int(guest))
        and can_audit_vm(call.state, call.identity, int(entry["guest"]))
    ]


@route("GET", "/nodes/{node}/replication/{id}")
def node_replication_index(call: Call) -> list[dict[str, str]]:
    return [{"name": "schedule_now"}, {"name": "log"}, {"name": "status"}]


@route("GET", "/nodes/{node}/replication/{id}/status")
def node_replication_status(call: Call) -> dict[str, Any]:
    entry = _node_job(call)
    if not can_audit_vm(call.state, call.identity, int(entry["guest"])):
        raise Forbidden(f"Permission check failed (/vms/{entry['guest']}, VM.Audit)")
    return entry


@route("GET", "/nodes/{node}/replication/{id}/log")
def node_replication_log(call: Call) -> list[dict[str, Any]]:
    """The last run's log (a job that never ran has none); ``start``/``limit`` page it."""
    job = _replication(call)
    if not can_audit_vm(call.state, call.identity, int(job["guest"])):
        raise Forbidden(f"Permission check failed (/vms/{job['guest']}, VM.Audit)")
    lines = call.state.replication_logs.get(str(job["id"]), [])
    start, limit = int(call.get("start", 0) or 0), call.get("limit")
    page = lines[start : start + int(limit)] if limit is not None else lines[start:]
    return [{"n": start + i + 1, "t": line} for i, line in enumerate(page)]


@route("POST", "/nodes/{node}/replication/{id}/schedule_now")
def node_replication_schedule_now(call: Call) -> None:
    job = _replication(call)
    if "VM.Replicate" not in privileges(call.state, call.identity, f"/vms/{job['guest']}"):
        raise Forbidden(f"Permission check failed (/vms/{job['guest']}, VM.Replicate)")
    replication.schedule_now(call.state, str(job["id"]), call.params["node"])
