"""How tasks look in Proxmox's task views: list entries, status types, who may see a task, and the order
and cut of a node's task list and of the "active" list it broadcasts (``cluster.py`` serves them)."""

from __future__ import annotations

import re
from typing import Any

from pve_emulator.mock.registry import Call
from pve_emulator.mock.state import ClusterState, Task

__all__ = [
    "MAX_ACTIVE_LIST",
    "active_list",
    "node_task_order",
    "sees_task",
    "split_user",
    "status_type",
    "task_entry",
]

# A node keeps its running tasks and at most this many tasks in all in its "active" list, the list it
# broadcasts to the cluster (pve-common RESTEnvironment::active_workers, $MAX_FINISHED).
MAX_ACTIVE_LIST = 25


def split_user(user: str) -> tuple[str, str | None]:
    """A UPID's user field as the task views show it: ``root@pam!hvsync`` is user root@pam, token hvsync."""
    userid, sep, token = user.partition("!")
    return (userid, token) if sep else (user, None)


def task_entry(task: Task, now: float) -> dict[str, Any]:
    """A node task list entry: the UPID's fields, plus endtime and status once the task has ended.

    A running task has no status of its own; ``source=active``/``all`` shows it as ``RUNNING``."""
    userid, token = split_user(task.user)
    entry: dict[str, Any] = {
        "upid": task.upid,
        "node": task.node,
        "pid": int(task.upid.split(":")[2], 16),
        "pstart": int(task.upid.split(":")[3], 16),
        "starttime": int(task.starttime),
        "type": task.type,
        "id": task.id,
        "user": userid,
    }
    if token is not None:
        entry["tokenid"] = token
    if task.finished(now):
        entry["endtime"] = task.endtime
        entry["status"] = task.exitstatus
    return entry


def status_type(status: str | None) -> str:
    """PVE::UPID::normalize_status_type: what ``statusfilter`` and ``errors`` match a task status by."""
    if not status:
        return "unknown"
    if status == "OK":
        return "ok"
    if re.fullmatch(r"WARNINGS: \d+", status):
        return "warning"
    return "unknown" if status == "unexpected status" else "error"


def sees_task(call: Call, task: Task) -> bool:
    """Tasks.pm check_task_user: a user sees its own and its tokens' tasks, a token only its own."""
    userid, token = split_user(task.user)
    return call.identity.subject in (userid, task.user) if token else call.identity.subject == userid


def node_task_order(tasks: list[Task], now: float) -> tuple[list[Task], list[Task]]:
    """A node's running tasks in the order they started (the "active" file appends new ones) and its
    ended tasks newest-ended first (the task index is appended as tasks end and read backwards)."""
    running = sorted((t for t in tasks if not t.finished(now)), key=lambda t: (t.starttime, t.upid))
    ended = sorted(
        (t for t in tasks if t.finished(now)), key=lambda t: (t.endtime, t.starttime, t.upid), reverse=True
    )
    return running, ended


def active_list(state: ClusterState, node: str, now: float) -> list[dict[str, Any]]:
    """What a node broadcasts as its task list: every running task, then the most recently started
    ended ones until the list holds ``MAX_ACTIVE_LIST`` (fields as in the "active" file: no pstart,
    no pid once ended, no status while running)."""
    running, ended = node_task_order([t for t in state.tasks.values() if t.node == node], now)
    ended.sort(key=lambda t: (t.starttime, t.upid), reverse=True)
    out = []
    for task in running + ended[: max(0, MAX_ACTIVE_LIST - len(running))]:
        entry = task_entry(task, now)
        entry.pop("pstart")
        if "endtime" in entry:
            entry.pop("pid")
        out.append(entry)
    return out
