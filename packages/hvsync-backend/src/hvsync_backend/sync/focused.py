"""The nodes a selected-object run writes: those its object lives on or depends on.

A storage is on the nodes that report it, a guest on its node, a task on the node of its UPID, per
endpoint (two endpoints may both have a `pve1`). A run without selection (no focus, no VMIDs) is not
narrowed.
"""

from __future__ import annotations

from hvsync_backend.sync.focus import parse_upid
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.guests import guests
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.reads import storage_facts
from hvsync_backend.sync.run import NodeScope, SyncContext


async def focus_nodes(ctx: SyncContext) -> NodeScope:
    """Node names per endpoint the run may write (cached for the run)."""
    if ctx.reads.focus_resolved:
        return ctx.reads.focus_nodes
    focus, vmids = ctx.options.focus, ctx.options.only_vmids
    scope: NodeScope = None
    if focus is not None or vmids is not None:
        named = set(focus.nodes or ()) if focus is not None else set()
        if focus is not None and focus.upids:
            named |= {u.node for u in map(parse_upid, focus.upids) if u is not None}
        found: dict[int, set[str]] = {s.backend_id: set(named) for s in ctx.sources}
        if vmids is not None:
            for backend_id, guest_list in (await guests(ctx)).items():
                found[backend_id] |= {g.node for g in guest_list}
        if focus is not None and focus.storages is not None:
            for backend_id, data in (await storage_facts(ctx)).items():
                for node, rows in data["per_node"].items():
                    if any(str(r.get("storage")) in focus.storages for r in rows):
                        found[backend_id].add(node)
        scope = {bid: frozenset(names) for bid, names in found.items()}
    ctx.reads.focus_nodes, ctx.reads.focus_resolved = scope, True
    return scope


def node_allowed(scope: NodeScope, source: HvSource, node: str) -> bool:
    return scope is None or node in scope.get(source.backend_id, frozenset())


async def ids_with_existing(ctx: SyncContext, kind: Kind) -> dict[str, int]:
    """Key -> NetBox id of `kind`: this run's objects, plus (when the run writes only some nodes) the
    managed ones already in NetBox, so that a link to a node this run did not write is kept, not cleared."""
    ids = await known_ids(ctx, kind)
    if await focus_nodes(ctx) is None:
        return ids
    existing = ctx.lookups.existing_ids
    if kind.name not in existing:
        existing[kind.name] = {key: c.id for key, c in (await kind.current(ctx)).items()}
    return {**existing[kind.name], **ids}
