"""Storage replication as a node's pvesr sees it: per-job run state, the computed job status, a run.

Proxmox keeps the job definitions cluster-wide (``replication.cfg``, ``state.replication_jobs``) and each
run's outcome in a node-local state file keyed by guest and target (``pve-replication-state.json``,
``state.replication_state[vmid]['local/<target>']``). Everything the node views report — next_sync,
fail_count, error, vmtype — is derived here from those two, as pve-guest-common's
``PVE::ReplicationState::job_status`` does. The emulator has no background scheduler: a run happens when
``schedule_now`` asks for one (Proxmox's pvescheduler would start it within the minute) or a scenario
records one.
"""

from __future__ import annotations

import time
from typing import Any

from pve_emulator.mock.calendar import next_event, parse
from pve_emulator.mock.guests.common import disk_entries
from pve_emulator.mock.state import ClusterState, Guest

DEFAULT_SCHEDULE = "*/15"
# the keys of a job's state that the API copies into a status entry (pve-manager's extract_job_status)
REPORTED = ("last_sync", "last_try", "fail_count", "error", "duration")


def target_id(job: dict[str, Any]) -> str:
    """The state key of a job: one job per guest and target (``get_unique_target_id``)."""
    return f"local/{job['target']}"


def job_state(state: ClusterState, job: dict[str, Any]) -> dict[str, Any]:
    """A job's run state with Proxmox's defaults (``extract_job_state``); a copy, never stored."""
    found = dict(state.replication_state.get(int(job["guest"]), {}).get(target_id(job), {}))
    for key in ("last_iteration", "last_try", "last_sync", "fail_count"):
        found.setdefault(key, 0)
    return found


def _write_state(state: ClusterState, job: dict[str, Any], value: dict[str, Any] | None) -> None:
    vmid = int(job["guest"])
    if value is not None:
        state.replication_state.setdefault(vmid, {})[target_id(job)] = value
        return
    per_guest = state.replication_state.get(vmid, {})
    per_guest.pop(target_id(job), None)
    if not per_guest:
        state.replication_state.pop(vmid, None)


def forget_job(state: ClusterState, job: dict[str, Any]) -> None:
    """Drop a removed job's run state and log."""
    _write_state(state, job, None)
    state.replication_logs.pop(str(job["id"]), None)


def _switch_stolen(state: ClusterState, guest: Guest, source: str) -> None:
    """A guest now on another node: its jobs' source becomes this node, a job to this node turns back
    to the old source, and that job's state moves with it (``switch_replication_job_target_nolock``
    plus the state transfer a migration does)."""
    local = guest.node
    per_guest = state.replication_state.get(guest.vmid, {})
    moved = per_guest.pop(f"local/{local}", None)
    for job in state.replication_jobs.values():
        if int(job["guest"]) != guest.vmid or job.get("type", "local") != "local":
            continue
        if job["target"] == local:
            job["target"] = source
        job["source"] = local
    if moved is not None:
        per_guest[f"local/{source}"] = moved
    state.bump()


def next_sync(state: ClusterState, job: dict[str, Any], run: dict[str, Any]) -> int:
    """When pvesr runs the job next: soon after a removal mark, a back-off after failures (5, 10, 15
    then every 30 minutes, and not while the target is offline), else the schedule after last_try."""
    if job.get("remove_job"):
        return 1
    if fail_count := int(run["fail_count"]):
        target = state.nodes.get(str(job["target"]))
        if target is None or not target.online:
            return 0
        return int(run["last_try"]) + 60 * (5 * fail_count if fail_count <= 3 else 30)
    try:
        return next_event(parse(str(job.get("schedule") or DEFAULT_SCHEDULE)), run["last_try"])
    except ValueError:
        return 0


def job_status(state: ClusterState, node: str) -> dict[str, dict[str, Any]]:
    """Every job whose guest lives on ``node`` with its computed status, disabled jobs included."""
    out: dict[str, dict[str, Any]] = {}
    for job_id in sorted(state.replication_jobs):
        job = state.replication_jobs.get(job_id)
        guest = state.guests.get(int(job["guest"])) if job else None
        if job is None or guest is None or guest.node != node:
            continue
        job.setdefault("source", node)
        if job["source"] != node:
            _switch_stolen(state, guest, str(job["source"]))
        if not job.get("remove_job") and job["target"] == node:
            continue  # never sync to the local node
        run = job_state(state, job)
        entry = {k: v for k, v in job.items() if k != "state"}
        entry.update(id=job_id, vmtype=guest.kind, next_sync=next_sync(state, job, run))
        entry.update({k: run[k] for k in REPORTED if run.get(k) is not None})
        out[job_id] = entry
    return out


def replicated_volumes(state: ClusterState, guest: Guest) -> list[str]:
    """The guest's volume ids that replication copies: not on shared storage, not ``replicate=0``."""
    volumes = []
    for key, storage, name, _size in disk_entries(guest):
        shared = int(state.storages.get(storage, {}).get("shared", 0) or 0)
        if not shared and "replicate=0" not in str(guest.config.get(key, "")).split(","):
            volumes.append(f"{storage}:{name}")
    return sorted(volumes)


def unreachable(state: ClusterState, job: dict[str, Any], volumes: list[str], last_sync: int) -> str:
    """pvesr's error when the ssh connection to the target fails (node down, network cut)."""
    target = state.nodes.get(str(job["target"]))
    address = target.ip if target is not None else job["target"]
    stores = " ".join(sorted({v.split(":", 1)[0] for v in volumes}))
    return (
        f"command '/usr/bin/ssh -e none -o 'BatchMode=yes' -o 'HostKeyAlias={job['target']}' "
        f"root@{address} -- pvesr prepare-local-job {job['id']} --scan {stores} {' '.join(volumes)} "
        f"--last_sync {last_sync}' failed: exit code 255"
    )


def run_job(
    state: ClusterState, job_id: str, now: float | None = None, *, unreachable_target: bool = False
) -> bool:
    """One pvesr run of a job on its guest's node (``run_replication``): state, log, removal.

    The copy fails when the target node is offline, or when ``unreachable_target`` says the network to
    it was cut (scenarios record past failures that way). Returns whether the job ran (a disabled job,
    or one whose guest is gone, does not).
    """
    job = state.replication_jobs.get(job_id)
    guest = state.guests.get(int(job["guest"])) if job else None
    if job is None or guest is None or job.get("disable"):
        return False
    if job_id not in job_status(state, guest.node):
        return False
    start = int(time.time() if now is None else now)
    run = job_state(state, job)
    run.update(last_try=start, last_iteration=start, last_node=guest.node)
    volumes = replicated_volumes(state, guest)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start))
    log = [f"{stamp} {job_id}: start replication job"]

    def say(message: str) -> None:
        log.append(f"{stamp} {job_id}: {message}")

    kind = "VM" if guest.kind == "qemu" else "CT"
    say(f"guest => {kind} {guest.vmid}, running => {int(guest.status == 'running')}")
    say(f"volumes => {','.join(volumes)}")
    error: str | None = None
    if job.get("remove_job"):
        say(f"start job removal - mode '{job['remove_job']}'")
        say("job removed")
        state.replication_jobs.pop(job_id, None)
        say("end replication job")
        forget_job(state, job)
        state.replication_logs[job_id] = log
        state.bump()
        return True
    last_sync = int(run["last_sync"])
    if error is None and start <= last_sync:
        error = f"start time before last sync ({start} <= {last_sync}) - abort sync"
    target = state.nodes.get(str(job["target"]))
    if error is None and (unreachable_target or target is None or not target.online):
        error = unreachable(state, job, volumes, last_sync)
    snapshot = f"__replicate_{job_id}_{start}__"
    if error is None:
        for volid in volumes:
            say(f"create snapshot '{snapshot}' on {volid}")
        rate = job.get("rate")
        say(f"using secure transmission, rate limit: {f'{rate} MByte/s' if rate else 'none'}")
        for volid in volumes:
            if last_sync:
                say(f"incremental sync '{volid}' (__replicate_{job_id}_{last_sync}__ => {snapshot})")
            else:
                say(f"full sync '{volid}' ({snapshot})")
        if last_sync:
            for volid in volumes:
                say(f"delete previous replication snapshot '__replicate_{job_id}_{last_sync}__' on {volid}")
        say("end replication job")
        run.update(last_sync=start, fail_count=0)
        run.pop("error", None)
    else:
        say(f"end replication job with error: {error}")
        run.update(fail_count=int(run["fail_count"]) + 1, error=error)
    run["duration"] = round(1.5 + 0.25 * len(volumes), 6)
    _write_state(state, job, run)
    state.replication_logs[job_id] = log
    state.bump()
    return True


def schedule_now(state: ClusterState, job_id: str, node: str) -> None:
    """``schedule_job_now`` clears last_try so the job is due; the scheduler then runs it at once."""
    job = state.replication_jobs[job_id]
    vmid = int(job["guest"])
    if target_id(job) in state.replication_state.get(vmid, {}):
        state.replication_state[vmid][target_id(job)]["last_try"] = 0
        state.bump()
    guest = state.guests.get(vmid)
    if guest is not None and guest.node == node:
        run_job(state, job_id)
