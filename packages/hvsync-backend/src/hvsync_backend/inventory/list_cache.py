"""NetBox list reads kept for reuse until a write may have changed them.

A sync run reads the same lists from several kinds (the VM list and its sidecars serve every stage that
links to VMs), and reads start ahead of the kind that needs them. The plugin's sync job runs each stage as
a stream of its own; a job's streams pass one cache on (sync/job_reads.py), so a later stream sees NetBox
as one full-update run sees it: as first read, plus what the job itself wrote.

A read is stale once a client using the cache writes to its list, or writes anything whose effects reach
other lists (deletes cascade; support objects, tags, custom fields, MAC objects and plugin records with
their signals change what other lists show): then every read is.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

#: Lists whose creates and updates change no field the sync reads from any other list (nested objects
#: are compared by id only; a VM's disk total is not read): a POST/PATCH there makes only that list stale.
SELF_CONTAINED_WRITES = frozenset(
    {
        "virtualization/clusters",
        "virtualization/virtual-machines",
        "virtualization/virtual-disks",
        "virtualization/interfaces",
        "dcim/devices",
        "dcim/interfaces",
        "ipam/ip-addresses",
        "ipam/vlan-groups",
        "ipam/vlans",
        "ipam/prefixes",
    }
)

#: A read's identity: path, query, fields, brief, flat.
Key = tuple[Any, ...]
Rows = list[dict[str, Any]]


@dataclass
class _Entry:
    generation: int
    task: asyncio.Task[Rows]
    #: The client reading it while unfinished; None once it answered and its client is gone.
    owner: object | None


class ListCache:
    """List reads by key, each with the write generation it was read at."""

    def __init__(self) -> None:
        self._generation = 0
        self._path_generation: dict[str, int] = {}
        self._entries: dict[Key, _Entry] = {}

    def generation(self, path: str) -> int:
        return self._generation + self._path_generation.get(path, 0)

    def wrote(self, method: str, path: str) -> None:
        """A write to `path` started or ended: make stale what it may change."""
        path = path.strip("/").split("?")[0]
        if method in ("POST", "PATCH") and path in SELF_CONTAINED_WRITES:
            self._path_generation[path] = self._path_generation.get(path, 0) + 1
        else:
            self._generation += 1

    def lookup(self, key: Key, owner: object) -> asyncio.Task[Rows] | None:
        """The current read of `key`, if any. Another client's read counts only once it has answered:
        awaiting a read its own client may cancel on closing would cancel the caller."""
        entry = self._entries.get(key)
        if entry is None or entry.generation != self.generation(key[0]):
            return None
        if entry.owner is not owner and not _answered(entry.task):
            return None
        return entry.task

    def store(self, key: Key, task: asyncio.Task[Rows], owner: object) -> None:
        self._entries[key] = _Entry(self.generation(key[0]), task, owner)

    def drop(self, key: Key, task: asyncio.Task[Rows]) -> None:
        """Forget `task` (a failed read) unless a newer read of `key` replaced it."""
        entry = self._entries.get(key)
        if entry is not None and entry.task is task:
            del self._entries[key]

    def release(self, owner: object) -> None:
        """`owner` is closing: its unfinished reads are cancelled and forgotten, as are failed and stale
        reads; its answers stay for the next client."""
        for key, entry in list(self._entries.items()):
            mine = entry.owner is owner
            if mine and not entry.task.done():
                entry.task.cancel()
                del self._entries[key]
            elif entry.task.done() and (
                not _answered(entry.task) or entry.generation != self.generation(key[0])
            ):
                del self._entries[key]
            elif mine:
                entry.owner = None


def _answered(task: asyncio.Task[Rows]) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None
