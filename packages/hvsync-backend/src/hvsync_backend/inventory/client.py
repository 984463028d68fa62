"""Async NetBox client: the transport and its reads, plus list writes through one of two strategies.

NetBox writes one transaction per object even in list requests (~20-30 objects/s on small machines),
so writes are chunked and run a few at a time (tuned to NetBox's gunicorn workers). Each batch goes out
through a write strategy (`writes/`): REST list requests (`writes/rest.py`), or, when the plugin offers its
apply path (`apply_path.py`), one change set per batch (`writes/change_sets.py`). On both, chunk sizes
follow NetBox's answer times (`batching.py`), and a write whose answer never came is read back before
it is sent again, so it is neither lost nor doubled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

from hvsync_backend.inventory.batching import BatchSizer, batch_end, grouped_order, parent_keys
from hvsync_backend.inventory.errors import NetBoxError
from hvsync_backend.inventory.reads import NetBoxReads
from hvsync_backend.inventory.releases import INTERFACE_LISTS, write_primary_macs
from hvsync_backend.inventory.transport import NetBoxConfig, WriteStats
from hvsync_backend.inventory.writes.base import WriteStrategy
from hvsync_backend.inventory.writes.change_sets import ChangeSetWrites
from hvsync_backend.inventory.writes.rest import REST_CHUNK_CEILING, RestWrites
from hvsync_backend.wire import change_sets

__all__ = ["NetBoxClient", "NetBoxConfig", "WriteStats"]


class NetBoxClient(NetBoxReads):
    """One keep-alive connection pool per sync run; use as an async context manager."""

    @cached_property
    def rest_writes(self) -> RestWrites:
        """REST list writes, batches sized from `write_chunk` up to `REST_CHUNK_CEILING`."""
        return RestWrites(self, BatchSizer(max(1, self.config.write_chunk), REST_CHUNK_CEILING, self._target))

    @cached_property
    def change_set_writes(self) -> ChangeSetWrites:
        """Change sets on the apply path, sized from `apply_chunk` up to the format's largest set."""
        sizer = BatchSizer(max(1, self.config.apply_chunk), change_sets.MAX_OPERATIONS, self._target)
        return ChangeSetWrites(self, sizer)

    @property
    def _target(self) -> float:
        """Seconds a batch should take NetBox to answer (a quarter of the timeout, at least one)."""
        return max(1.0, self.config.timeout / 4)

    @property
    def rest_sizer(self) -> BatchSizer:
        return self.rest_writes.sizer

    @property
    def apply_sizer(self) -> BatchSizer:
        return self.change_set_writes.sizer

    async def __aenter__(self) -> NetBoxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def strategy_for(self, path: str) -> WriteStrategy:
        """Change sets for a path the plugin's apply path takes, else REST list writes."""
        offer = await self.apply_offer()
        return self.change_set_writes if offer is not None and path in offer.paths else self.rest_writes

    async def bulk_create(
        self, path: str, items: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any] | NetBoxError]:
        """Create objects with list POSTs; result i is the created object or the error of item i."""
        results = await self._write_interfaces("POST", path, list(items))
        self.stats.created += sum(1 for r in results if not isinstance(r, NetBoxError))
        return results

    async def bulk_update(
        self, path: str, items: Sequence[dict[str, Any]], parents: Sequence[Any] | None = None
    ) -> list[dict[str, Any] | NetBoxError]:
        """PATCH objects (each item carries `id`) with list requests. `parents`: on a path NetBox sums
        into a parent (`batching.SUMMED_INTO_PARENT`), each object's parent as read, so one parent's
        children share a batch."""
        results = await self._write_interfaces("PATCH", path, list(items), parents)
        self.stats.updated += sum(1 for r in results if not isinstance(r, NetBoxError))
        return results

    async def bulk_delete(
        self, path: str, ids: Iterable[int], parents: Sequence[Any] | None = None
    ) -> list[NetBoxError | None]:
        """DELETE objects by id with list requests (`parents` as for `bulk_update`)."""
        results = await self._bulk("DELETE", path, [{"id": i} for i in ids], parents)
        out: list[NetBoxError | None] = [r if isinstance(r, NetBoxError) else None for r in results]
        self.stats.deleted += sum(1 for r in out if r is None)
        return out

    async def _write_interfaces(
        self, method: str, path: str, items: list[dict[str, Any]], parents: Sequence[Any] | None = None
    ) -> list[Any]:
        """A bulk create or update; interfaces' `mac_address` is written as 4.7 writes it on releases
        whose interfaces ignore it (see `releases`)."""
        if (
            path.strip("/") not in INTERFACE_LISTS
            or not any("mac_address" in item for item in items)
            or (await self.release()).interface_mac_shortcut
        ):
            return await self._bulk(method, path, items, parents)
        plain = [{k: v for k, v in item.items() if k != "mac_address"} for item in items]
        send = [i for i, item in enumerate(plain) if method == "POST" or len(item) > 1]
        results: list[Any] = [dict(item) for item in plain]  # a MAC-only update writes no other field
        for i, answer in zip(send, await self._bulk(method, path, [plain[i] for i in send]), strict=True):
            results[i] = answer
        wanted = {
            int(results[i]["id"]): item["mac_address"]
            for i, item in enumerate(items)
            if "mac_address" in item
            and not isinstance(results[i], NetBoxError)
            and (method == "PATCH" or item["mac_address"] is not None)  # a new interface has no MAC
        }
        if wanted:
            errors = await write_primary_macs(self, path.strip("/"), wanted, NetBoxError)
            for i, result in enumerate(results):
                if not isinstance(result, NetBoxError) and int(result["id"]) in errors:
                    results[i] = errors[int(result["id"])]
        return results

    async def _bulk(
        self, method: str, path: str, items: list[dict[str, Any]], parents: Sequence[Any] | None = None
    ) -> list[Any]:
        """Write `items` in batches, a few at a time; result i answers item i (object, None or error)."""
        if not items:
            return []
        path = path.strip("/")
        strategy = await self.strategy_for(path)
        sizer = strategy.sizer
        keys = parent_keys(path, items, parents)
        order = grouped_order(keys)  # children NetBox sums into one parent share a batch
        ordered = [items[i] for i in order]
        ordered_keys = [keys[i] for i in order]
        answers: list[Any] = [None] * len(ordered)
        cursor = 0

        async def worker() -> None:
            nonlocal cursor
            while cursor < len(ordered):
                start = cursor
                cursor = end = batch_end(ordered_keys, start, sizer.take(len(ordered) - start))
                async with self.write_slots:
                    answers[start:end] = await strategy.write(method, path, ordered[start:end])

        workers = min(self.config.write_concurrency, -(-len(items) // sizer.take(len(items))))
        await asyncio.gather(*(worker() for _ in range(max(1, workers))))
        results: list[Any] = [None] * len(items)
        for position, index in enumerate(order):
            results[index] = answers[position]
        return results
