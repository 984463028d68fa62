"""REST list writes: each batch is one list request (NetBox spends one transaction per object in it).

A list request is all-or-nothing in NetBox, so a rejected batch is retried object by object: one bad
object fails alone. A write whose answer never came is read back before it is sent again, so it is
neither lost nor doubled.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from hvsync_backend.inventory.batching import BatchSizer
from hvsync_backend.inventory.errors import NetBoxError, NetBoxHTTPError, NetBoxUnreachable
from hvsync_backend.inventory.reads import NetBoxReads
from hvsync_backend.inventory.writes.base import item_error, one_by_one, timed
from hvsync_backend.wire.keys import KEY_FIELD

__all__ = ["READ_BACK_KEYS", "REST_CHUNK_CEILING", "RestWrites"]

#: Largest REST list write: NetBox spends one transaction per object in it, so a bigger list only
#: takes longer to answer (and to time out) without writing faster.
REST_CHUNK_CEILING = 200
#: Identity keys per read-back request (each key is up to ~60 characters of query string)
READ_BACK_KEYS = 40


class RestWrites:
    """The REST write strategy (`WriteStrategy`): list requests through the client's transport."""

    def __init__(self, client: NetBoxReads, sizer: BatchSizer) -> None:
        self.client = client
        self.sizer = sizer

    async def write(self, method: str, path: str, chunk: list[dict[str, Any]]) -> list[Any]:
        """One REST list request; a rejected list is retried object by object, an unanswered one is
        read back first (`_unanswered`)."""
        try:
            answer = await timed(self.sizer, len(chunk), self.client.request(method, path, json=chunk))
        except NetBoxUnreachable as exc:
            return await self._unanswered(method, path, chunk, exc)
        except NetBoxHTTPError as exc:
            if len(chunk) == 1 or exc.status in (401, 403, 404, 405) or (exc.status or 0) >= 500:
                return [item_error(exc, 0)] * len(chunk) if len(chunk) > 1 else [item_error(exc, 0)]
            # One bad object rejects the whole list: retry one by one to isolate it.
            singles = await one_by_one(path, [partial(self.write, method, path, [item]) for item in chunk])
            return [s[0] for s in singles]
        if method == "DELETE":
            return [None] * len(chunk)
        if isinstance(answer, list) and len(answer) == len(chunk):
            return answer
        return [answer] * len(chunk)

    async def _unanswered(
        self, method: str, path: str, chunk: list[dict[str, Any]], exc: NetBoxUnreachable
    ) -> list[Any]:
        """A REST write NetBox never answered may or may not have landed. Updates are sent again (the
        same PATCH twice leaves the same object); deletes are sent again one by one (a 404 means the
        first landed); creates that carry their `hvsync_key` are read back by it and only the missing
        ones are sent again. Other creates are reported, never resent: a blind retry could write a
        duplicate, and the next sync finds what did land."""
        if method == "PATCH":
            return await self._retry_once(method, path, chunk, exc)
        if method == "DELETE":
            return await one_by_one(path, [partial(self._delete_again, path, item, exc) for item in chunk])
        keys = [(item.get("custom_fields") or {}).get(KEY_FIELD) for item in chunk]
        if not all(isinstance(k, str) and k for k in keys):
            return [exc] * len(chunk)
        try:  # a few keys per read: a long query string would pass gunicorn's request-line limit
            pages = await asyncio.gather(
                *(
                    self.client.read_pages(
                        path, {f"cf_{KEY_FIELD}": keys[i : i + READ_BACK_KEYS]}, None, False
                    )
                    for i in range(0, len(keys), READ_BACK_KEYS)
                )
            )
        except NetBoxError:
            return [exc] * len(chunk)
        landed = {(row.get("custom_fields") or {}).get(KEY_FIELD): row for rows in pages for row in rows}
        results: list[Any] = [landed.get(k) for k in keys]
        missing = [i for i, row in enumerate(results) if row is None]
        if missing:
            again = await self._retry_once(method, path, [chunk[i] for i in missing], exc)
            for i, answer in zip(missing, again, strict=True):
                results[i] = answer
        return results

    async def _retry_once(
        self, method: str, path: str, chunk: list[dict[str, Any]], exc: NetBoxUnreachable
    ) -> list[Any]:
        try:
            answer = await timed(self.sizer, len(chunk), self.client.request(method, path, json=chunk))
        except NetBoxUnreachable:
            return [exc] * len(chunk)
        except NetBoxHTTPError as error:
            return [item_error(error, 0)] * len(chunk)
        if isinstance(answer, list) and len(answer) == len(chunk):
            return answer
        return [answer] * len(chunk)

    async def _delete_again(self, path: str, item: dict[str, Any], exc: NetBoxUnreachable) -> Any:
        try:
            await self.client.request("DELETE", f"{path}/{int(item['id'])}")
        except NetBoxHTTPError as error:
            return None if error.status == 404 else error
        except NetBoxUnreachable:
            return exc
        return None
