"""The NetBox client's list reads: pages read concurrently, the plugin's flat rows, the run's list cache.

A sync compares whole lists, so a read is every page of one list route; pages after the first are read
at once. Reads a run repeats, or starts ahead of the kind that needs them, come from the list cache.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from hvsync_backend.inventory.list_cache import Key, Rows
from hvsync_backend.inventory.transport import NetBoxTransport, consume_exception
from hvsync_backend.wire import change_sets

__all__ = ["PAGE_LIMIT", "NetBoxReads"]

PAGE_LIMIT = 1000


class NetBoxReads(NetBoxTransport):
    """The transport plus list reads (`list_all`, `prefetch`); the write strategies read back through it."""

    def prefetch(
        self,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        fields: Sequence[str] | None = None,
        flat: bool = False,
    ) -> None:
        """Start reading a list now (cache on) so that a later identical `list_all` finds it ready."""
        if self.cache_reads:
            self._cached_task(path, params, fields, brief=False, flat=flat)

    async def list_all(
        self,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        fields: Sequence[str] | None = None,
        brief: bool = False,
        flat: bool = False,
    ) -> list[dict[str, Any]]:
        """Every object of a list route, in pages of 1,000; pages after the first are read concurrently.

        `flat`: the caller reads related objects by id (and their plain fields) only, so the list may come
        from the plugin's rows route when it serves this path (same filters and values, about half of
        NetBox's work to answer); otherwise, and always without the plugin, from the REST list.
        With `cache_reads` on, an identical read since this client's last write is answered from the
        run's cache (rows are copied: callers may change them)."""
        if not self.cache_reads:
            return await self.read_pages(path, params, fields, brief, flat)
        key, task = self._cached_task(path, params, fields, brief, flat)
        try:
            rows = await asyncio.shield(task)
        except Exception:
            self.lists.drop(key, task)
            raise
        return [dict(row) for row in rows]

    def _cached_task(
        self,
        path: str,
        params: dict[str, Any] | None,
        fields: Sequence[str] | None,
        brief: bool,
        flat: bool = False,
    ) -> tuple[Key, asyncio.Task[Rows]]:
        key = (
            path.strip("/"),
            tuple(
                sorted((k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in (params or {}).items())
            ),
            tuple(fields or ()),
            brief,
            flat,
        )
        task = self.lists.lookup(key, self)
        if task is not None:
            self.stats.cached_reads += 1
            return key, task
        task = asyncio.ensure_future(self.read_pages(path, params, fields, brief, flat))
        task.add_done_callback(consume_exception)
        self.lists.store(key, task, self)
        return key, task

    async def read_pages(
        self,
        path: str,
        params: dict[str, Any] | None,
        fields: Sequence[str] | None,
        brief: bool,
        flat: bool = False,
    ) -> list[dict[str, Any]]:
        """Every page of a list from NetBox itself, never from the cache (the REST read-back uses it)."""
        if flat and not brief:
            offer = await self.apply_offer()
            if offer is not None and path.strip("/") in offer.read_paths:
                path = f"{change_sets.ROWS_ROUTE}/{path.strip('/')}"
        query: dict[str, Any] = dict(params or {})
        query["limit"] = PAGE_LIMIT
        if fields:
            query["fields"] = ",".join(fields)
        if brief:
            query["brief"] = "true"
        first = await self.get(path, {**query, "offset": 0})
        results: list[dict[str, Any]] = list(first.get("results", []))
        count = int(first.get("count") or 0)
        pages = math.ceil(count / PAGE_LIMIT)
        if pages > 1:
            rest = await asyncio.gather(
                *(self.get(path, {**query, "offset": page * PAGE_LIMIT}) for page in range(1, pages))
            )
            for page in rest:
                results.extend(page.get("results", []))
        return results
