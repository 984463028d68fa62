"""Which of the plugin's hv endpoint records stands for each backend endpoint of the run.

The plugin pushes its endpoints with an `(inv:<pk>)` name suffix; plugin records and sync-state sidecars
are written under that record. Resolved once per run and shared by every stage that needs it.
"""

from __future__ import annotations

import asyncio
import re

from hvsync_backend.sync.run import GonePolicy, SyncContext
from hvsync_backend.wire import PLUGIN_API

_INV = re.compile(r"\(inv:(\d+)\)\s*$")


async def plugin_endpoints(ctx: SyncContext) -> dict[int, int]:
    """Backend endpoint id -> the plugin's hv endpoint pk, for the sources that have one.

    Resolved once per run (concurrent callers share one read, so a missing record is reported once).
    A name with an `(inv:<pk>)` suffix names that record only (the suffix is also the objects' identity);
    the plugin's `backend_id` is used only for names without one."""
    task = ctx.lookups.plugin_endpoints_task
    if task is None:
        task = ctx.lookups.plugin_endpoints_task = asyncio.ensure_future(_resolve_endpoints(ctx))
    return await asyncio.shield(task)


#: the plugin endpoint read's fields (its prefetch must ask the same to be answered from the cache);
#: the gone settings ride along (a plugin without them answers without them: the defaults apply)
_FIELDS = ("id", "name", "backend_id", "gone_policy", "gone_guard_share", "auto_approve_deletions")


def prefetch_plugin_endpoints(ctx: SyncContext) -> None:
    """Start the plugin endpoint read ahead of the kinds' reads: every sidecar read waits on it."""
    ctx.netbox.prefetch(f"{PLUGIN_API}/hv-endpoints", fields=_FIELDS)


async def _resolve_endpoints(ctx: SyncContext) -> dict[int, int]:
    rows = await ctx.netbox.list_all(f"{PLUGIN_API}/hv-endpoints", fields=_FIELDS)
    by_pk = {int(r["id"]): r for r in rows}
    by_backend = {r.get("backend_id"): int(r["id"]) for r in rows if r.get("backend_id")}
    found: dict[int, int] = {}
    for source in ctx.sources:
        match = _INV.search(source.name)
        if match:
            pk: int | None = int(match.group(1)) if int(match.group(1)) in by_pk else None
        else:
            pk = by_backend.get(source.backend_id)
        if pk is None:
            await ctx.problem(
                {
                    "source": "backend",
                    "status": None,
                    "detail": f"hv endpoint {source.backend_id} has no record in the hvsync plugin "
                    "(the plugin pushes its endpoints with an '(inv:<pk>)' name suffix); plugin records "
                    "and sync-state sidecars skipped",
                    "endpoint_id": source.backend_id,
                    "object": source.name,
                },
                f"endpoint {source.backend_id}: no plugin endpoint record",
            )
        else:
            found[source.backend_id] = pk
            ctx.lookups.gone_policies[source.identity] = GonePolicy.from_row(by_pk[pk])
    ctx.lookups.plugin_endpoints = found
    return found
