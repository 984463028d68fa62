"""Proxmox reads several stages share: cluster facts and storage, read once per run.

Each reader fills its typed field of the run's `ProxmoxReads` on first use, per endpoint and
concurrently; a failing endpoint is reported once and left out (`SyncContext.per_endpoint`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from hvsync_backend.sync.proxmox import ClusterInfo, HvSource, ProxmoxReader
from hvsync_backend.sync.run import SyncContext


async def clusters(ctx: SyncContext) -> dict[int, ClusterInfo]:
    """Cluster facts of every endpoint in scope (cached for the run)."""
    if ctx.reads.clusters is None:

        async def read(source: HvSource, reader: ProxmoxReader) -> ClusterInfo:
            return await reader.cluster()

        ctx.reads.clusters = await ctx.per_endpoint(read)
    return ctx.reads.clusters


async def report_silent_nodes(ctx: SyncContext, source: HvSource, reader: ProxmoxReader) -> None:
    """Nodes that stopped answering a node read during the run (`ProxmoxReader.node_get`) are left out
    of it; the run says which, once each."""
    for node, error in sorted(reader.silent_nodes.items()):
        if node in reader.reported_nodes:
            continue
        reader.reported_nodes.add(node)
        await ctx.problem(
            {**error.as_problem(), "object": f"node {node}"},
            f"node {node} of Proxmox endpoint {source.backend_id} stopped answering ({error.status}): "
            "left out of this run",
        )


def _node_list(entry: dict[str, Any]) -> set[str] | None:
    """The nodes a storage is restricted to (its `nodes` option), None when it is on every node."""
    nodes = {n for n in str(entry.get("nodes") or "").split(",") if n}
    return nodes or None


async def storage_facts(ctx: SyncContext) -> dict[int, dict[str, Any]]:
    """endpoint -> {'config': [...], 'per_node': {node: [storages on that node]}} (cached for the run).

    Proxmox lists every configured storage on every node, a storage restricted to other nodes with
    `enabled: 0` and zero sizes (pve-storage's storage_info); per_node keeps only the node's own."""
    if ctx.reads.storage is None:
        infos = await clusters(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> dict[str, Any]:
            info = infos.get(source.backend_id)
            names = [n.name for n in info.nodes if n.online] if info else []
            config = await reader.get("storage") or []
            lists = await asyncio.gather(*(reader.optional(f"nodes/{n}/storage") for n in names))
            restricted = {str(e.get("storage")): _node_list(e) for e in config}
            return {
                "config": config,
                "per_node": {
                    n: [r for r in rows or [] if n in (restricted.get(str(r.get("storage"))) or {n})]
                    for n, rows in zip(names, lists, strict=True)
                },
            }

        ctx.reads.storage = await ctx.per_endpoint(read)
    return ctx.reads.storage
