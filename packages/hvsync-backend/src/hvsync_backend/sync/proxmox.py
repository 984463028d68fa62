"""Reading one Proxmox endpoint: bounded concurrent GETs, cached per run, in typed shapes.

Every stage of a full update reads through the same reader, so the cluster is read once per run.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hvsync_backend.hv.errors import ProxmoxNotConfigured
from hvsync_backend.inventory.errors import redact
from hvsync_backend.wire.keys import endpoint_identity

_INV_SUFFIX = re.compile(r"\(inv:(\d+)\)\s*$")


class ProxmoxGetter(Protocol):
    """What the sync needs of a Proxmox client: `await get(path, params)` returning unwrapped `data`."""

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any: ...


@dataclass
class HvSource:
    """One enabled hv endpoint in scope: backend id, display name and a client."""

    backend_id: int
    name: str
    client: ProxmoxGetter
    secrets: tuple[str, ...] = ()
    site_slug: str = ""

    @property
    def identity(self) -> str:
        """Stable identity: the plugin's immutable `(inv:<pk>)` suffix, else the backend id."""
        match = _INV_SUFFIX.search(self.name)
        if match:
            return endpoint_identity(plugin_pk=int(match.group(1)))
        return endpoint_identity(backend_id=self.backend_id)


class ProxmoxReadError(Exception):
    """A Proxmox read failed; carries the upstream status (None: no answer) and a redacted detail."""

    def __init__(self, source: HvSource, path: str, exc: BaseException) -> None:
        status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
        self.status = int(status) if isinstance(status, int) else None
        self.kind = type(exc).__name__
        #: nothing was sent: the endpoint has no usable credentials stored (a backend-side problem)
        self.not_configured = isinstance(exc, ProxmoxNotConfigured)
        self.endpoint_id = source.backend_id
        self.path = path
        text = redact(str(exc), source.secrets) or self.kind
        self.detail = f"Proxmox endpoint {source.backend_id} GET {path}: {self.kind}: {text}"[:1000]
        super().__init__(self.detail)

    def as_problem(self) -> dict[str, Any]:
        return {
            "source": "backend" if self.not_configured else "proxmox",
            "status": self.status,
            "detail": self.detail,
            "object": self.path,
            "endpoint_id": self.endpoint_id,
        }


@dataclass(frozen=True)
class Node:
    name: str
    online: bool
    ip: str | None = None
    nodeid: int = 0


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    standalone: bool
    nodes: tuple[Node, ...]


@dataclass
class Guest:
    vmid: int
    name: str
    node: str
    kind: str  # qemu | lxc
    status: str
    template: bool
    maxcpu: int
    maxmem: int
    tags: tuple[str, ...]
    config: dict[str, Any] = field(default_factory=dict)


#: Answers to one guest's config read that concern that guest alone: it vanished or moved between the
#: guest list and its config read (Proxmox answers 500 "does not exist"), or its node stopped answering
#: (595). The guest is left out of the run; anything else (no answer, 401, 403) fails the endpoint.
GUEST_UNREADABLE = frozenset({404, 500, 595})
#: pveproxy's answer when it cannot reach the node a route names (the node went away after the run read
#: the cluster's status): that node is silent for the rest of the run, its reads left out.
NODE_UNREACHABLE = 595


class ProxmoxReader:
    """Cached, bounded reads of one endpoint for the duration of one run."""

    def __init__(self, source: HvSource, concurrency: int = 8) -> None:
        self.source = source
        self._sem = asyncio.Semaphore(concurrency)
        self._cache: dict[str, asyncio.Task[Any]] = {}
        #: VMID -> why its config could not be read (GUEST_UNREADABLE); such guests are left out
        self.unreadable: dict[int, ProxmoxReadError] = {}
        #: nodes listed online that stopped answering during the run (NODE_UNREACHABLE), and why
        self.silent_nodes: dict[str, ProxmoxReadError] = {}
        #: those of them the run has reported (`reads.report_silent_nodes`: once each)
        self.reported_nodes: set[str] = set()

    def carry_over(self, source: HvSource) -> None:
        """Serve a next run of the same job over `source` (sync/job_reads.py): keep the answers, forget the
        failures, cancellations and reads still in flight (they are read again)."""
        self.source = source
        self._cache = {
            key: task
            for key, task in self._cache.items()
            if task.done() and not task.cancelled() and task.exception() is None
        }
        self.unreadable = {}
        self.silent_nodes = {}
        self.reported_nodes = set()

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        key = path + "?" + "&".join(f"{k}={v}" for k, v in sorted((params or {}).items()))
        task = self._cache.get(key)
        if task is None:
            task = asyncio.ensure_future(self._fetch(path, params))
            self._cache[key] = task
        return await task

    async def _fetch(self, path: str, params: dict[str, Any] | None) -> Any:
        async with self._sem:
            try:
                return await self.source.client.get(path, params)
            except Exception as exc:
                raise ProxmoxReadError(self.source, path, exc) from None

    async def node_get(self, node: str, path: str, params: dict[str, Any] | None = None) -> Any | None:
        """A read of one node's own list (its tasks, its network): None when the node stopped answering
        (595), which leaves that node out of the run as if it had been offline from the start, instead of
        failing the whole endpoint; any other failure raises."""
        try:
            return await self.get(path, params)
        except ProxmoxReadError as exc:
            if exc.status != NODE_UNREACHABLE:
                raise
            self.silent_nodes[node] = exc
            return None

    async def optional(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """A read whose failure only means 'not available' (guest agent not running, feature off)."""
        try:
            return await self.get(path, params)
        except ProxmoxReadError:
            return None

    async def cluster(self) -> ClusterInfo:
        status = await self.get("cluster/status") or []
        nodes = await self.get("nodes") or []
        online = {n.get("node"): n.get("status") == "online" for n in nodes}
        cluster_name = next((s.get("name") for s in status if s.get("type") == "cluster"), None)
        members = [s for s in status if s.get("type") == "node"]
        names = [m.get("name") for m in members] or [n.get("node") for n in nodes]
        ips = {m.get("name"): m.get("ip") for m in members}
        nodeids = {m.get("name"): int(m.get("nodeid") or 0) for m in members}
        node_objs = tuple(
            Node(str(n), bool(online.get(n, True)), ips.get(n), nodeids.get(n, 0))
            for n in sorted(x for x in names if x)
        )
        if cluster_name:
            return ClusterInfo(str(cluster_name), False, node_objs)
        standalone = node_objs[0].name if node_objs else f"endpoint-{self.source.backend_id}"
        return ClusterInfo(standalone, True, node_objs)

    async def guests(
        self, keep: Callable[[Guest], bool] | None = None, *, with_config: bool = True
    ) -> list[Guest]:
        """Guests from cluster/resources; `keep` filters before any per-guest read (filter at source)."""
        rows = await self.get("cluster/resources", {"type": "vm"}) or []
        guests = [
            Guest(
                vmid=int(r["vmid"]),
                name=str(r.get("name") or f"{r.get('type', 'vm')}-{r['vmid']}"),
                node=str(r.get("node")),
                kind=str(r.get("type") or "qemu"),
                status=str(r.get("status") or "unknown"),
                template=bool(int(r.get("template") or 0)),
                maxcpu=int(r.get("maxcpu") or 0),
                maxmem=int(r.get("maxmem") or 0),
                tags=tuple(t for t in re.split(r"[;,\s]+", str(r.get("tags") or "")) if t),
            )
            for r in rows
            if r.get("vmid") is not None and r.get("type") in ("qemu", "lxc")
        ]
        if keep is not None:
            guests = [g for g in guests if keep(g)]
        if with_config:
            configs = await asyncio.gather(
                *(self.get(f"nodes/{g.node}/{g.kind}/{g.vmid}/config") for g in guests),
                return_exceptions=True,
            )
            readable = []
            for guest, config in zip(guests, configs, strict=True):
                if isinstance(config, ProxmoxReadError) and config.status in GUEST_UNREADABLE:
                    self.unreadable[guest.vmid] = config
                    continue
                if isinstance(config, BaseException):
                    raise config
                guest.config = dict(config or {})
                readable.append(guest)
            guests = readable
        return sorted(guests, key=lambda g: g.vmid)

    async def guest_addresses(self, guest: Guest) -> list[tuple[str, str]]:
        """(MAC, address/prefix) pairs a running guest reports: QEMU guest agent or LXC interfaces."""
        pairs: list[tuple[str, str]] = []
        if guest.kind == "qemu":
            if guest.status != "running":
                return pairs
            answer = await self.optional(f"nodes/{guest.node}/qemu/{guest.vmid}/agent/network-get-interfaces")
            ifaces = answer.get("result", []) if isinstance(answer, dict) else (answer or [])
            for iface in ifaces:
                mac = str(iface.get("hardware-address") or "").upper()
                for addr in iface.get("ip-addresses") or []:
                    ip, prefix = addr.get("ip-address"), addr.get("prefix")
                    if mac and ip and prefix is not None:
                        pairs.append((mac, f"{ip}/{prefix}"))
        else:
            answer = await self.optional(f"nodes/{guest.node}/lxc/{guest.vmid}/interfaces")
            for iface in answer or []:
                mac = str(iface.get("hwaddr") or "").upper()
                for key in ("inet", "inet6"):
                    value = iface.get(key)
                    if mac and value:
                        pairs.append((mac, str(value)))
        return pairs


Reporter = Callable[[dict[str, Any]], Awaitable[None]]
