"""Guest config locks and digests, as Proxmox's AbstractConfig keeps them.

A lock taken by an operation that runs as a task (``clone``, ``migrate``, ``snapshot``...) carries the
task's UPID and ends when the task ends; a lock without a task (set through the config, or planted by a
scenario) stays until ``delete=lock``. Every config-changing call checks the lock and, when given, the
``digest`` the caller read.
"""

from __future__ import annotations

from typing import Any

from pve_emulator.errors import ApiError, bad_param
from pve_emulator.identity import Identity
from pve_emulator.mock.state import ClusterState, Guest, Task, digest

LABEL = {"qemu": "VM", "lxc": "CT"}


def active_lock(state: ClusterState, guest: Guest) -> str | None:
    """The guest's lock, released first if the task that held it has finished."""
    if guest.lock_task is not None:
        task = state.tasks.get(guest.lock_task)
        if task is None or task.finished():
            guest.lock, guest.lock_task = None, None
            state.bump()
    return guest.lock


def hold_lock(state: ClusterState, guest: Guest, lock: str, task: Task) -> None:
    """Lock the guest for as long as ``task`` runs."""
    guest.lock, guest.lock_task = lock, task.upid
    state.bump()


def skiplock(identity: Identity, params: dict[str, Any]) -> bool:
    """``skiplock`` is honoured for root@pam only (not even its tokens), as in qemu-server."""
    if not params.get("skiplock"):
        return False
    if identity.subject != "root@pam":
        raise bad_param("skiplock", "Only root may use this option.")
    return True


def lock_error(state: ClusterState, guest: Guest, identity: Identity, params: dict[str, Any]) -> str | None:
    """PVE's ``check_lock`` text (``VM is locked (backup)``), or None when the call may go ahead."""
    lock = active_lock(state, guest)
    if lock is None or skiplock(identity, params):
        return None
    return f"{LABEL[guest.kind]} is locked ({lock})"


def check_lock(state: ClusterState, guest: Guest, identity: Identity, params: dict[str, Any]) -> None:
    """Refuse a synchronous call on a locked guest the way the API does (HTTP 500, the die text)."""
    error = lock_error(state, guest, identity, params)
    if error:
        raise ApiError(500, error)


def config_digest(guest: Guest) -> str:
    """SHA-1 over everything in the guest's config file: settings, pending section and lock."""
    return digest(
        {
            **guest.config,
            "[pending]": sorted(guest.pending.items()),
            "[delete]": list(guest.pending_delete),
            "[lock]": guest.lock,
        }
    )


def check_digest(guest: Guest, params: dict[str, Any], message: str) -> None:
    """Refuse a change made against a config the caller did not read (optimistic locking)."""
    given = params.get("digest")
    if given and given != config_digest(guest):
        raise ApiError(500, message)


MODIFIED = "detected modified configuration - file changed by other user? Try again."
CHECKSUM = "checksum mismatch (file change by other user?)"
