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


async def storage_facts(ctx: SyncContext) -> dict[int, dict[str, Any]]:
    """endpoint -> {'config': [...], 'per_node': {node: [...]}} (cached for the run)."""
    if ctx.reads.storage is None:
        infos = await clusters(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> dict[str, Any]:
            info = infos.get(source.backend_id)
            names = [n.name for n in info.nodes if n.online] if info else []
            config = await reader.get("storage") or []
            lists = await asyncio.gather(*(reader.optional(f"nodes/{n}/storage") for n in names))
            return {
                "config": config,
                "per_node": {n: list(rows or []) for n, rows in zip(names, lists, strict=True)},
            }

        ctx.reads.storage = await ctx.per_endpoint(read)
    return ctx.reads.storage
