"""The in-memory cluster model of mock mode: plain records and one container that owns them.

Everything a handler reads or writes lives in ``ClusterState``; every mutation bumps ``revision`` so
the HTTP layer can cache hot list responses until something changes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Literal

GuestKind = Literal["qemu", "lxc"]
TASK_DURATION_DEFAULT = 0.2


@dataclass(slots=True)
class NodeRecord:
    name: str
    nodeid: int
    ip: str
    maxcpu: int = 16
    maxmem: int = 128 * 1024**3
    online: bool = True
    started: float = field(default_factory=time.time)


@dataclass(slots=True)
class Snapshot:
    name: str
    description: str
    snaptime: int
    parent: str | None
    vmstate: int = 0
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Guest:
    vmid: int
    kind: GuestKind
    node: str
    config: dict[str, Any]
    status: str = "stopped"
    started: float | None = None
    guest_ips: list[tuple[str, str, int]] = field(default_factory=list)  # (iface, ip, prefix)
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    parent_snapshot: str | None = None
    pool: str | None = None
    lock: str | None = None
    lock_task: str | None = None  # UPID of the task holding ``lock``; the lock ends with the task
    pending: dict[str, Any] = field(default_factory=dict)  # changes waiting for the next start
    pending_delete: list[str] = field(default_factory=list)
    # sizes of volumes whose config entry no longer says (a detached disk is just ``unusedN: volid``)
    volume_sizes: dict[str, int] = field(default_factory=dict)
    # what the QEMU guest agent sees inside the guest: files written, processes, fsfreeze (``guests.agent``)
    agent: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.config.get("name") or self.config.get("hostname") or f"{self.kind}-{self.vmid}")

    @property
    def is_template(self) -> bool:
        return int(self.config.get("template", 0) or 0) == 1


@dataclass(slots=True)
class Volume:
    """A storage volume that is not a guest disk: backups, ISO images, container templates."""

    volid: str
    storage: str
    node: str | None  # None on shared storage
    content: str
    format: str
    size: int
    ctime: int
    vmid: int | None = None
    notes: str | None = None
    protected: int = 0
    verification: dict[str, str] | None = None


@dataclass(slots=True)
class Task:
    upid: str
    node: str
    type: str
    id: str
    user: str
    starttime: float
    duration: float
    exitstatus: str = "OK"
    log: list[str] = field(default_factory=list)

    def finished(self, now: float | None = None) -> bool:
        return (now if now is not None else time.time()) >= self.starttime + self.duration

    @property
    def endtime(self) -> int:
        return int(self.starttime + self.duration)


@dataclass(slots=True)
class Acl:
    path: str
    ugid: str
    type: Literal["user", "group", "token"]
    roleid: str
    propagate: int = 1


@dataclass(slots=True)
class ApiToken:
    tokenid: str  # the name part after '!'
    secret: str
    privsep: int = 1
    expire: int = 0
    comment: str = ""


@dataclass(slots=True)
class User:
    userid: str
    password: str | None = None
    enable: int = 1
    expire: int = 0
    firstname: str = ""
    lastname: str = ""
    email: str = ""
    comment: str = ""
    groups: list[str] = field(default_factory=list)
    tokens: dict[str, ApiToken] = field(default_factory=dict)


@dataclass
class ClusterState:
    """Everything mock mode knows. A restart (a new instance) resets it."""

    cluster_name: str = "hvsync-demo"
    release: str = "9.1"  # the API release served (set from the schema); /version reports it
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    guests: dict[int, Guest] = field(default_factory=dict)
    storages: dict[str, dict[str, Any]] = field(default_factory=dict)
    volumes: dict[str, Volume] = field(default_factory=dict)
    tasks: dict[str, Task] = field(default_factory=dict)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    acls: list[Acl] = field(default_factory=list)
    backup_jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    replication_jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # pvesr's state file (vmid -> 'local/<target>' -> last_try/last_sync/fail_count/...) and each job's last log
    replication_state: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)
    replication_logs: dict[str, list[str]] = field(default_factory=dict)
    networks: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    sdn_zones: dict[str, dict[str, Any]] = field(default_factory=dict)
    sdn_vnets: dict[str, dict[str, Any]] = field(default_factory=dict)
    sdn_subnets: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    generic: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    task_duration: float = TASK_DURATION_DEFAULT
    seed: int = 0  # steers generated figures (time series, ``mock.rrd``): same seed and clock, same answers
    revision: int = 0
    _pid: int = 4000

    def bump(self) -> None:
        self.revision += 1

    def set_node_online(self, name: str, online: bool) -> None:
        """Power a node off or on (tests): its own calls then answer 595 and its guests show `unknown`."""
        self.nodes[name].online = online
        if online:
            self.nodes[name].started = time.time()
        self.bump()

    def next_pid(self) -> int:
        self._pid += 1
        return self._pid

    def add_task(
        self,
        node: str,
        kind: str,
        ident: str,
        user: str,
        *,
        log: list[str] | None = None,
        exitstatus: str = "OK",
        starttime: float | None = None,
        duration: float | None = None,
    ) -> Task:
        """Record a task with a real UPID string; it reports ``running`` until its duration passes."""
        start = time.time() if starttime is None else starttime
        pid = self.next_pid()
        upid = f"UPID:{node}:{pid:08X}:{pid * 7919 % 0xFFFFFFF:08X}:{int(start):08X}:{kind}:{ident}:{user}:"
        task = Task(
            upid=upid,
            node=node,
            type=kind,
            id=ident,
            user=user,
            starttime=start,
            duration=self.task_duration if duration is None else duration,
            exitstatus=exitstatus,
            log=log if log is not None else [f"starting {kind} {ident}".strip(), f"TASK {exitstatus}"],
        )
        self.tasks[upid] = task
        self.bump()
        return task

    def guest(self, vmid: int, kind: GuestKind | None = None, node: str | None = None) -> Guest | None:
        found = self.guests.get(vmid)
        if (
            found is None
            or (kind is not None and found.kind != kind)
            or (node is not None and found.node != node)
        ):
            return None
        return found


def digest(data: Any) -> str:
    """A config digest like PVE's (SHA-1 of the serialised config) for optimistic locking."""
    return hashlib.sha1(repr(sorted(data.items()) if isinstance(data, dict) else data).encode()).hexdigest()
