"""The state of one sync run, shared by its stages: sources, options, counts and what was read.

Everything a stage hands to a later one is a typed field here (`reads`, `lookups`, `ip`), so the data
flow between stages is visible to the type checker. The stage framework (`framework.py`) and the stages
build on this module; it imports none of them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hvsync_backend.inventory.client import NetBoxClient
from hvsync_backend.metrics import Metrics
from hvsync_backend.sync.options import SyncOptions
from hvsync_backend.sync.parse import Sighting
from hvsync_backend.sync.plan import Current, Desired
from hvsync_backend.sync.proxmox import ClusterInfo, Guest, HvSource, ProxmoxReader, ProxmoxReadError
from hvsync_backend.wire.keys import KEY_FIELD, endpoint_of

__all__ = [
    "KEY_FIELD",
    "MANAGED_TAG",
    "Counts",
    "Emit",
    "GonePolicy",
    "IPAddressState",
    "NetBoxLookups",
    "Prefetcher",
    "ProxmoxReads",
    "SidecarState",
    "StageAborted",
    "SyncContext",
]

#: Every managed NetBox object carries this tag; untagged objects are never read as managed.
MANAGED_TAG = "hvsync"
MAX_OBJECT_FRAMES = 200
MAX_ERRORS = 50
#: the mass-vanish guard's defaults (sync/gone.py): more than this share of an endpoint's objects of one
#: kind, and at least so many objects
GUARD_SHARE = 0.30
GUARD_MIN_OBJECTS = 10

Emit = Callable[[str, dict[str, Any]], Awaitable[None]]


class StageAborted(Exception):
    """A failure that stops the stage (NetBox unreachable or refusing the token)."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem.get("detail"))
        self.problem = problem


@dataclass
class Counts:
    total: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    skipped: int = 0
    #: managed objects this run marked gone from Proxmox, and gone ones it saw again (sync/gone.py)
    gone: int = 0
    returned: int = 0
    #: of the marked ones, those whose endpoint policy (or `delete_stale`) asks the plugin for a deletion request
    deletion_requests: int = 0

    def add(self, other: Counts) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class GonePolicy:
    """An endpoint's gone settings, as the plugin's hv endpoint record holds them (defaults without one)."""

    guard_share: float = GUARD_SHARE
    policy: str = "keep"
    auto_approve: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GonePolicy:
        share = row.get("gone_guard_share")
        try:
            value = float(share) if share is not None else GUARD_SHARE
        except (TypeError, ValueError):
            value = GUARD_SHARE
        policy = row.get("gone_policy")
        if isinstance(policy, Mapping):
            policy = policy.get("value")
        return cls(
            guard_share=min(max(value, 0.0), 1.0),
            policy=str(policy or "keep"),
            auto_approve=bool(row.get("auto_approve_deletions")),
        )


class Prefetcher(Protocol):
    """A kind whose NetBox reads the run starts up front (`framework.Kind`)."""

    def prefetch(self, ctx: SyncContext) -> None: ...


#: Node names per endpoint a focused run may write (None: every node).
NodeScope = dict[int, frozenset[str]] | None


@dataclass
class ProxmoxReads:
    """Proxmox data several stages share within one run; None until first read."""

    clusters: dict[int, ClusterInfo] | None = None
    #: endpoint -> guests in scope, with their configs
    guests: dict[int, list[Guest]] | None = None
    #: endpoint -> {"config": [...], "per_node": {node: [...]}}
    storage: dict[int, dict[str, Any]] | None = None
    #: endpoint -> vmid -> snapshots
    snapshots: dict[int, dict[int, list[dict[str, Any]]]] | None = None
    #: endpoint -> node -> interfaces
    node_networks: dict[int, dict[str, list[dict[str, Any]]]] | None = None
    #: endpoint -> {"zones": [...], "vnets": [...], "subnets": {vnet: [...]}}
    sdn: dict[int, dict[str, Any]] | None = None
    #: the node scope of a focused run, once resolved (`focus_resolved`)
    focus_nodes: NodeScope = None
    focus_resolved: bool = False
    #: background guest reads already started ("guests", "addresses")
    warmed: set[str] = field(default_factory=set)
    #: source identity -> VMIDs Proxmox lists but this run leaves alone (sync mode disabled, not selected)
    skipped_guests: dict[str, set[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class SidecarState:
    """One sidecar as read: its id, the core object it names, and its fields for comparison."""

    id: int
    link_id: int
    data: Mapping[str, Any]


@dataclass
class NetBoxLookups:
    """NetBox data a run looks up once and reuses."""

    #: "<path>:<slug>" and "tag:<slug>" -> id of a support object (None: a dry run would create it)
    support_ids: dict[str, int | None] = field(default_factory=dict)
    #: the identity custom field and the managed tag were made sure of
    prepared: bool = False
    #: every upcoming kind's NetBox reads were started
    prefetched: bool = False
    #: backend endpoint id -> the plugin's hv endpoint pk (None until resolved)
    plugin_endpoints: dict[int, int] | None = None
    plugin_endpoints_task: asyncio.Task[dict[int, int]] | None = None
    #: the missing plugin was reported once
    no_plugin_reported: bool = False
    #: source identity -> its gone settings (from the plugin's hv endpoint records)
    gone_policies: dict[str, GonePolicy] = field(default_factory=dict)
    #: kind name -> its sidecars by identity key, as read this run
    sidecars: dict[str, dict[str, SidecarState]] = field(default_factory=dict)
    #: kind name -> managed objects already in NetBox (focused runs keep links to nodes they do not write)
    existing_ids: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class IPAddressState:
    """The ip-addresses stage's working set, shared by its kinds (primary IPs, addresses)."""

    #: IP key -> every sighting of that address in scope
    sightings: dict[str, list[Sighting]] | None = None
    desired: dict[str, Desired] | None = None
    current: dict[str, Current] | None = None
    #: IP key -> the sighting that owns the address
    owners: dict[str, Sighting] = field(default_factory=dict)


@dataclass
class SyncContext:
    """Everything one run shares across its stages."""

    netbox: NetBoxClient
    sources: list[HvSource]
    options: SyncOptions
    emit: Emit
    stage: str = ""
    readers: dict[int, ProxmoxReader] = field(default_factory=dict)
    ids: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Proxmox data several stages share, read once per run
    reads: ProxmoxReads = field(default_factory=ProxmoxReads)
    #: NetBox data looked up once per run
    lookups: NetBoxLookups = field(default_factory=NetBoxLookups)
    #: the ip-addresses stage's working set, shared by its kinds
    ip: IPAddressState = field(default_factory=IPAddressState)
    failed_endpoints: set[str] = field(default_factory=set)
    #: source identities the mass-vanish guard stopped this run: nothing of theirs is marked gone
    gone_guarded: set[str] = field(default_factory=set)
    #: the guard's problems (stamped `failure_kind: mass_vanish`), each failing the stage that raised it
    guard_problems: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    object_frames: int = 0
    plans: list[dict[str, Any]] = field(default_factory=list)
    #: every kind this run will reconcile, in order (their NetBox reads are started up front)
    upcoming: list[Prefetcher] = field(default_factory=list)
    #: read-ahead work started for later stages; cancelled when the run ends
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    #: recorded as the sidecars' `last_run_id` when this run creates or changes them
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: the backend's metrics, told each kind's written objects (None: runs outside the service)
    metrics: Metrics | None = None

    def tally(self, kind: str, counts: Counts, part: Counts) -> None:
        """Add one kind's counts to its stage's, and report them unless this is a dry run (nothing written)."""
        counts.add(part)
        if self.metrics is not None and not self.options.dry_run:
            self.metrics.objects_handled(kind, part.as_dict())

    def background(self, work: Awaitable[Any]) -> None:
        """Run read-ahead work alongside the stages; it must handle its own errors."""
        self.tasks.append(asyncio.ensure_future(work))

    def cancel_background(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.tasks.clear()

    def reader(self, source: HvSource) -> ProxmoxReader:
        if source.backend_id not in self.readers:
            self.readers[source.backend_id] = ProxmoxReader(source)
        return self.readers[source.backend_id]

    @property
    def identities(self) -> set[str]:
        return {s.identity for s in self.sources}

    async def step(self, phase: str, message: str, **extra: Any) -> None:
        data: dict[str, Any] = {"stage": self.stage, "phase": phase, "message": message}
        data.update({k: v for k, v in extra.items() if v is not None})
        await self.emit("step", data)

    async def problem(self, problem: dict[str, Any], message: str) -> None:
        self.problems.append(problem)
        if problem.get("source") == "proxmox" or self.object_frames < MAX_OBJECT_FRAMES:
            self.object_frames += 1
            await self.step(
                "object",
                message,
                object=problem.get("object"),
                endpoint_id=problem.get("endpoint_id"),
                problem=problem,
            )

    async def per_endpoint[T](self, work: Callable[[HvSource, ProxmoxReader], Awaitable[T]]) -> dict[int, T]:
        """Run `work` for every source concurrently; a failing endpoint is reported, the others go on."""

        async def one(source: HvSource) -> tuple[int, T | None]:
            if source.identity in self.failed_endpoints:
                return source.backend_id, None
            try:
                return source.backend_id, await work(source, self.reader(source))
            except ProxmoxReadError as exc:
                self.failed_endpoints.add(source.identity)
                await self.problem(
                    exc.as_problem(), f"Proxmox endpoint {source.backend_id} failed: {exc.detail}"
                )
                return source.backend_id, None

        results = await asyncio.gather(*(one(s) for s in self.sources))
        return {bid: value for bid, value in results if value is not None}

    def gone_policy(self, identity: str) -> GonePolicy:
        return self.lookups.gone_policies.get(identity) or GonePolicy()

    def source_of(self, key: str) -> str:
        return endpoint_of(key)

    def skips_guest(self, identity: str, vmid: int | None) -> bool:
        """Whether `vmid` is a guest Proxmox lists that this run leaves alone (SPEC 4.3: filtered at source):
        nothing that belongs to it is written, marked stale or deleted."""
        return vmid is not None and vmid in self.reads.skipped_guests.get(identity, ())
