"""What every write strategy shares: the interface the client drives, and the helpers both use."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from hvsync_backend.inventory.batching import SUMMED_INTO_PARENT, BatchSizer
from hvsync_backend.inventory.errors import NetBoxError, NetBoxHTTPError, NetBoxUnreachable

__all__ = ["WriteStrategy", "item_error", "one_by_one", "timed"]


class WriteStrategy(Protocol):
    """One way of sending a batch of list writes to NetBox. Its `sizer` follows NetBox's answer times."""

    sizer: BatchSizer

    async def write(self, method: str, path: str, chunk: list[dict[str, Any]]) -> list[Any]:
        """Send one batch; result i answers item i (the written object, None for a delete, or an error)."""
        ...


async def one_by_one(path: str, writes: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Single-object writes: concurrent, except on a path NetBox sums into a parent, where concurrent
    transactions would each write their own sum (`batching.SUMMED_INTO_PARENT`): those go in order.
    Each write is started only when it runs, so a cancelled run leaves no coroutine unawaited."""
    if path.strip("/") in SUMMED_INTO_PARENT:
        return [await write() for write in writes]
    return list(await asyncio.gather(*(write() for write in writes)))


async def timed(sizer: BatchSizer, size: int, call: Awaitable[Any]) -> Any:
    """Await a write, telling `sizer` how long NetBox took (or that it never answered)."""
    started = time.monotonic()
    try:
        answer = await call
    except NetBoxUnreachable:
        sizer.timed_out(size)
        raise
    sizer.answered(size, time.monotonic() - started)
    return answer


def item_error(exc: NetBoxHTTPError, index: int) -> NetBoxError:
    """Narrow a list answer's per-item error body to the item itself."""
    body = exc.body
    if isinstance(body, list) and len(body) > index and body[index]:
        return type(exc)(
            f"NetBox rejected the object ({exc.status}): {body[index]}",
            status=exc.status,
            body=body[index],
            path=exc.path,
        )
    return exc
