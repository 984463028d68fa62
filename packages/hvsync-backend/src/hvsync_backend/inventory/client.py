"""Async NetBox REST client: paged reads, bulk list writes, bounded concurrency, typed errors.

NetBox writes one transaction per object even in list requests (~20-30 objects/s on small machines),
so writes are chunked and run a few at a time (tuned to NetBox's gunicorn workers). A list request is
all-or-nothing in NetBox, so a rejected chunk is retried object by object: one bad object fails alone.
When the plugin offers its apply path (`apply_path.py`), each chunk is one change set instead: one
transaction inside NetBox. On both paths chunk sizes follow NetBox's answer times (`batching.py`), and a
write whose answer never came is read back before it is sent again, so it is neither lost nor doubled.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx

from hvsync_backend.inventory.apply_path import ApplyOffer, change_set, is_outcome
from hvsync_backend.inventory.batching import (
    SUMMED_INTO_PARENT,
    BatchSizer,
    batch_end,
    grouped_order,
    parent_keys,
)
from hvsync_backend.inventory.errors import (
    NetBoxAuthError,
    NetBoxError,
    NetBoxHTTPError,
    NetBoxUnreachable,
    redact,
)
from hvsync_backend.inventory.list_cache import Key, ListCache, Rows
from hvsync_backend.inventory.releases import INTERFACE_LISTS, NetBoxRelease, write_primary_macs
from hvsync_backend.metrics import RequestObserver, observed
from hvsync_backend.wire import change_sets
from hvsync_backend.wire.keys import KEY_FIELD

BRANCH_HEADER = "X-NetBox-Branch"
#: Seconds an idle keep-alive connection is kept for reuse (below gunicorn's default keepalive of 2 s).
KEEPALIVE_EXPIRY = 1.5
PAGE_LIMIT = 1000
#: Largest REST list write: NetBox spends one transaction per object in it, so a bigger list only
#: takes longer to answer (and to time out) without writing faster.
REST_CHUNK_CEILING = 200
#: Identity keys per read-back request (each key is up to ~60 characters of query string)
READ_BACK_KEYS = 40


@dataclass(frozen=True)
class NetBoxConfig:
    """Where NetBox is and how to talk to it. `auth_header` is the whole Authorization value."""

    url: str
    auth_header: str
    verify_ssl: bool = True
    branch_schema_id: str | None = None
    timeout: float = 30.0
    read_concurrency: int = 8
    write_concurrency: int = 4
    write_chunk: int = 50
    #: First change-set size on the apply path (it then follows NetBox's answer times)
    apply_chunk: int = 100
    #: Use the plugin's apply path when it offers one (False: REST list writes only)
    apply_path: bool = True
    #: Builds the client's HTTP transport (None: the network); set from `BackendContext.netbox_transport`.
    transport: Callable[[], httpx.AsyncBaseTransport] | None = field(default=None, repr=False, compare=False)
    #: Told about every request the client sends (the backend's metrics); None: nobody.
    observer: RequestObserver | None = field(default=None, repr=False, compare=False)

    @staticmethod
    def auth_header_for(token_version: int, token: str, token_key: str | None = None) -> str:
        """NetBox v1 tokens use `Token <token>`; v2 tokens use `Bearer nbt_<key>.<token>`."""
        if int(token_version) == 2:
            if not token_key:
                raise ValueError("token_key is required for token_version 2")
            return f"Bearer nbt_{token_key}.{token}"
        return f"Token {token}"

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never leave the process (used to sweep error text)."""
        parts = self.auth_header.split(" ", 1)
        value = parts[1] if len(parts) == 2 else parts[0]
        pieces = [value, *value.removeprefix("nbt_").split(".")]
        return tuple(p for p in pieces if len(p) >= 4)


@dataclass
class WriteStats:
    """Request and object counters; tests and benchmarks read them to prove what was written."""

    read_requests: int = 0
    write_requests: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    by_path: dict[str, int] = field(default_factory=dict)
    #: per read path: requests, seconds waiting for NetBox, response bytes (where a resync's time goes)
    reads_by_path: dict[str, dict[str, float]] = field(default_factory=dict)
    #: list reads answered from this run's cache instead of NetBox
    cached_reads: int = 0

    def record_read(self, path: str, seconds: float, size: int) -> None:
        row = self.reads_by_path.setdefault(path, {"requests": 0, "seconds": 0.0, "bytes": 0})
        row["requests"] += 1
        row["seconds"] = round(row["seconds"] + seconds, 3)
        row["bytes"] += size

    @property
    def objects_written(self) -> int:
        return self.created + self.updated + self.deleted


async def one_by_one(path: str, writes: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Single-object writes: concurrent, except on a path NetBox sums into a parent, where concurrent
    transactions would each write their own sum (`batching.SUMMED_INTO_PARENT`): those go in order.
    Each write is started only when it runs, so a cancelled run leaves no coroutine unawaited."""
    if path.strip("/") in SUMMED_INTO_PARENT:
        return [await write() for write in writes]
    return list(await asyncio.gather(*(write() for write in writes)))


class NetBoxClient:
    """One keep-alive connection pool per sync run; use as an async context manager."""

    def __init__(
        self,
        config: NetBoxConfig,
        transport: httpx.AsyncBaseTransport | None = None,
        lists: ListCache | None = None,
    ) -> None:
        self.config = config
        headers = {
            "Authorization": config.auth_header,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        if config.branch_schema_id:
            headers[BRANCH_HEADER] = config.branch_schema_id
        # Reuse only connections idle for less than gunicorn's default keep-alive (2 s): a write sent on a
        # connection the server just closed fails with ReadError and, unlike a GET, is not safe to resend.
        limits = httpx.Limits(
            max_connections=config.read_concurrency + config.write_concurrency + 2,
            keepalive_expiry=KEEPALIVE_EXPIRY,
        )
        self._http = httpx.AsyncClient(
            base_url=config.url.rstrip("/") + "/api/",
            headers=headers,
            verify=config.verify_ssl,
            timeout=httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0)),
            limits=limits,
            follow_redirects=False,
            transport=transport if transport is not None or config.transport is None else config.transport(),
        )
        self._reads = asyncio.Semaphore(config.read_concurrency)
        self._writes = asyncio.Semaphore(config.write_concurrency)
        self._secrets = config.secrets()
        self.stats = WriteStats()
        #: List reads kept for reuse (`list_cache.py`; used only once a sync run turns `cache_reads` on):
        #: a second read of the same list costs nothing and reads can be started ahead of the kind that
        #: needs them. `lists`: a cache an earlier client of the same sync job left (sync/job_reads.py).
        self.cache_reads = False
        self.lists = lists if lists is not None else ListCache()
        self._release: asyncio.Task[NetBoxRelease] | None = None
        self._offer: asyncio.Task[ApplyOffer | None] | None = None
        target = max(1.0, config.timeout / 4)
        self.rest_sizer = BatchSizer(max(1, config.write_chunk), REST_CHUNK_CEILING, target)
        self.apply_sizer = BatchSizer(max(1, config.apply_chunk), change_sets.MAX_OPERATIONS, target)

    async def __aenter__(self) -> NetBoxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self.lists.release(self)
        if self._offer is not None and not self._offer.done():
            self._offer.cancel()
        await self._http.aclose()

    # -- low level -------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        writes: tuple[str, str] | None = None,
    ) -> Any:
        """One HTTP call; returns decoded JSON (None for 204) or raises a typed NetBoxError.

        `writes` is the (method, list path) a write really changes, when it is sent elsewhere (a change
        set): that list's cached reads go stale, as they would for the REST write."""
        path = path.strip("/") + "/"  # NetBox answers a path without the slash with a redirect
        is_write = method != "GET"
        stale = writes or (method, path)
        if is_write:
            self.lists.wrote(*stale)  # when a write starts and when it ends: reads in between are stale
        started = time.monotonic()
        try:
            try:
                response = await self._send(method, path, params, json)
            except (httpx.ReadError, httpx.RemoteProtocolError):
                if is_write:
                    raise
                # A keep-alive connection NetBox's gunicorn closed while idle (its keepalive is a few
                # seconds) fails on reuse before anything was read: a GET is safe to send again once.
                response = await self._send(method, path, params, json)
        except httpx.TimeoutException as exc:
            raise NetBoxUnreachable(
                f"NetBox did not answer {method} /api/{path} within {self.config.timeout:g}s ({type(exc).__name__})",
                path=f"/api/{path}",
            ) from None
        except httpx.HTTPError as exc:
            text = redact(str(exc), self._secrets)
            raise NetBoxUnreachable(
                f"NetBox unreachable at {self.config.url}: {type(exc).__name__}: {text}", path=f"/api/{path}"
            ) from None
        finally:
            if is_write:
                self.lists.wrote(*stale)
                self.stats.write_requests += 1
                key = f"{method} {path.split('?')[0]}"
                self.stats.by_path[key] = self.stats.by_path.get(key, 0) + 1
            else:
                self.stats.read_requests += 1
        if not is_write:
            self.stats.record_read(path, time.monotonic() - started, len(response.content))
        if response.status_code >= 300:
            raise self._error(response, method, path)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise NetBoxHTTPError(
                f"NetBox answered {method} /api/{path} with non-JSON content ({response.status_code})",
                status=response.status_code,
                path=f"/api/{path}",
            ) from None

    async def _send(self, method: str, path: str, params: dict[str, Any] | None, json: Any) -> httpx.Response:
        request = self._http.request(method, path, params=params, json=json)
        return await observed(self.config.observer, method, request)

    def _error(self, response: httpx.Response, method: str, path: str) -> NetBoxError:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text[:500]
        body = redact(body, self._secrets)
        detail = f"NetBox {method} /api/{path} answered {response.status_code}: {summarise(body)}"
        cls: type[NetBoxHTTPError] = (
            NetBoxAuthError if response.status_code in (401, 403) else NetBoxHTTPError
        )
        return cls(detail, status=response.status_code, body=body, path=f"/api/{path}")

    async def release(self) -> NetBoxRelease:
        """The NetBox release behind this client, asked once (`GET /api/status/`)."""
        if self._release is None:
            self._release = asyncio.ensure_future(self._read_release())
        return await asyncio.shield(self._release)

    async def _read_release(self) -> NetBoxRelease:
        return NetBoxRelease.from_status(await self.get("status/"))

    async def apply_offer(self) -> ApplyOffer | None:
        """What the plugin's apply path takes, asked once; None: REST list writes only."""
        if not self.config.apply_path:
            return None
        return await asyncio.shield(self.discover())

    def discover(self) -> asyncio.Task[ApplyOffer | None]:
        """Start asking what the plugin offers, once. A sync run asks before anything else: every flat
        read waits on the answer to know whether the rows route serves it."""
        if self._offer is None:
            self._offer = asyncio.ensure_future(self._discover())
            self._offer.add_done_callback(_consume_exception)
        return self._offer

    async def _discover(self) -> ApplyOffer | None:
        try:
            return ApplyOffer.from_discovery(await self.get(f"{change_sets.ROUTE}/"))
        except NetBoxError:  # no plugin, an older plugin, or NetBox down (the writes will say so)
            return None

    # -- reads -----------------------------------------------------------------------------------

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        async with self._reads:
            return await self.request("GET", path, params=params)

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
            return await self._list_all(path, params, fields, brief, flat)
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
        task = asyncio.ensure_future(self._list_all(path, params, fields, brief, flat))
        task.add_done_callback(_consume_exception)
        self.lists.store(key, task, self)
        return key, task

    async def _list_all(
        self,
        path: str,
        params: dict[str, Any] | None,
        fields: Sequence[str] | None,
        brief: bool,
        flat: bool = False,
    ) -> list[dict[str, Any]]:
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

    # -- writes ----------------------------------------------------------------------------------

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
        offer = await self.apply_offer()
        applied = offer is not None and path in offer.paths
        sizer = self.apply_sizer if applied else self.rest_sizer
        write = self._apply_chunk if applied else self._write_chunk
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
                async with self._writes:
                    answers[start:end] = await write(method, path, ordered[start:end], sizer)

        workers = min(self.config.write_concurrency, -(-len(items) // sizer.take(len(items))))
        await asyncio.gather(*(worker() for _ in range(max(1, workers))))
        results: list[Any] = [None] * len(items)
        for position, index in enumerate(order):
            results[index] = answers[position]
        return results

    async def _timed(self, sizer: BatchSizer, size: int, call: Any) -> Any:
        """Await a write, telling `sizer` how long NetBox took (or that it never answered)."""
        started = time.monotonic()
        try:
            answer = await call
        except NetBoxUnreachable:
            sizer.timed_out(size)
            raise
        sizer.answered(size, time.monotonic() - started)
        return answer

    async def _write_chunk(
        self, method: str, path: str, chunk: list[dict[str, Any]], sizer: BatchSizer
    ) -> list[Any]:
        """One REST list request; a rejected list is retried object by object, an unanswered one is
        read back first (`_unanswered`)."""
        try:
            answer = await self._timed(sizer, len(chunk), self.request(method, path, json=chunk))
        except NetBoxUnreachable as exc:
            return await self._unanswered(method, path, chunk, exc, sizer)
        except NetBoxHTTPError as exc:
            if len(chunk) == 1 or exc.status in (401, 403, 404, 405) or (exc.status or 0) >= 500:
                return (
                    [self._item_error(exc, 0)] * len(chunk) if len(chunk) > 1 else [self._item_error(exc, 0)]
                )
            # One bad object rejects the whole list: retry one by one to isolate it.
            singles = await one_by_one(
                path, [partial(self._write_chunk, method, path, [item], sizer) for item in chunk]
            )
            return [s[0] for s in singles]
        if method == "DELETE":
            return [None] * len(chunk)
        if isinstance(answer, list) and len(answer) == len(chunk):
            return answer
        return [answer] * len(chunk)

    async def _unanswered(
        self, method: str, path: str, chunk: list[dict[str, Any]], exc: NetBoxUnreachable, sizer: BatchSizer
    ) -> list[Any]:
        """A REST write NetBox never answered may or may not have landed. Updates are sent again (the
        same PATCH twice leaves the same object); deletes are sent again one by one (a 404 means the
        first landed); creates that carry their `hvsync_key` are read back by it and only the missing
        ones are sent again. Other creates are reported, never resent: a blind retry could write a
        duplicate, and the next sync finds what did land."""
        if method == "PATCH":
            return await self._retry_once(method, path, chunk, exc, sizer)
        if method == "DELETE":
            return await one_by_one(path, [partial(self._delete_again, path, item, exc) for item in chunk])
        keys = [(item.get("custom_fields") or {}).get(KEY_FIELD) for item in chunk]
        if not all(isinstance(k, str) and k for k in keys):
            return [exc] * len(chunk)
        try:  # a few keys per read: a long query string would pass gunicorn's request-line limit
            pages = await asyncio.gather(
                *(
                    self._list_all(path, {f"cf_{KEY_FIELD}": keys[i : i + READ_BACK_KEYS]}, None, False)
                    for i in range(0, len(keys), READ_BACK_KEYS)
                )
            )
        except NetBoxError:
            return [exc] * len(chunk)
        landed = {(row.get("custom_fields") or {}).get(KEY_FIELD): row for rows in pages for row in rows}
        results: list[Any] = [landed.get(k) for k in keys]
        missing = [i for i, row in enumerate(results) if row is None]
        if missing:
            again = await self._retry_once(method, path, [chunk[i] for i in missing], exc, sizer)
            for i, answer in zip(missing, again, strict=True):
                results[i] = answer
        return results

    async def _retry_once(
        self, method: str, path: str, chunk: list[dict[str, Any]], exc: NetBoxUnreachable, sizer: BatchSizer
    ) -> list[Any]:
        try:
            answer = await self._timed(sizer, len(chunk), self.request(method, path, json=chunk))
        except NetBoxUnreachable:
            return [exc] * len(chunk)
        except NetBoxHTTPError as error:
            return [self._item_error(error, 0)] * len(chunk)
        if isinstance(answer, list) and len(answer) == len(chunk):
            return answer
        return [answer] * len(chunk)

    async def _delete_again(self, path: str, item: dict[str, Any], exc: NetBoxUnreachable) -> Any:
        try:
            await self.request("DELETE", f"{path}/{int(item['id'])}")
        except NetBoxHTTPError as error:
            return None if error.status == 404 else error
        except NetBoxUnreachable:
            return exc
        return None

    # -- the apply path ----------------------------------------------------------------------------

    async def _apply_chunk(
        self, method: str, path: str, chunk: list[dict[str, Any]], sizer: BatchSizer
    ) -> list[Any]:
        """One change set. If NetBox refuses some of its objects the whole set rolls back; the refused
        ones are reported and the rest is sent again as a new change set, so one bad object fails alone."""
        body = change_set(method, path, chunk)
        try:
            outcome = await self._timed(sizer, len(chunk), self._send_change_set(body, method, path))
        except NetBoxError as exc:
            error = self._item_error(exc, 0) if isinstance(exc, NetBoxHTTPError) else exc
            return [error] * len(chunk)
        if outcome.get("applied"):
            by_index = {int(r["index"]): r for r in outcome.get("results") or []}
            return [None if method == "DELETE" else {"id": by_index[i]["id"]} for i in range(len(chunk))]
        refused = {int(e["index"]): e for e in outcome.get("errors") or [] if isinstance(e, dict)}
        results: list[Any] = [None] * len(chunk)
        for i, refusal in refused.items():
            results[i] = self._refusal(refusal, path)
        rest = [i for i in range(len(chunk)) if i not in refused]
        if rest and refused:
            again = await self._apply_chunk(method, path, [chunk[i] for i in rest], sizer)
            for i, answer in zip(rest, again, strict=True):
                results[i] = answer
        elif rest:  # refused without naming an object: report it on each
            failure = NetBoxHTTPError(
                "NetBox did not apply the change set and named no object", status=400, path=path
            )
            for i in rest:
                results[i] = failure
        return results

    async def _send_change_set(self, body: dict[str, Any], method: str, path: str) -> dict[str, Any]:
        """POST a change set; when no answer comes (or NetBox fails it with a 5xx), read back what landed
        under its id, and only if nothing did, send the same change set again (the plugin answers a
        repeated id with the stored outcome, so even a racing first attempt is not applied twice)."""
        route = f"{change_sets.ROUTE}/"
        first: NetBoxError | None = None
        for _attempt in range(2):
            try:
                answer = await self.request("POST", route, json=body, writes=(method, path))
                return dict(answer)
            except NetBoxHTTPError as exc:
                if is_outcome(exc.body):
                    return dict(exc.body)
                if (exc.status or 0) < 500:
                    raise
                first = first or exc
            except NetBoxUnreachable as exc:
                first = first or exc
            landed = await self.read_back(body["id"])
            if landed is not None:
                return landed
        assert first is not None
        raise first

    async def read_back(self, set_id: str) -> dict[str, Any] | None:
        """The stored outcome of an applied change set, or None if nothing landed under `set_id`."""
        try:
            answer = await self.request("GET", f"{change_sets.ROUTE}/{set_id}/")
        except NetBoxError:
            return None
        return dict(answer) if is_outcome(answer) else None

    def _refusal(self, error: dict[str, Any], path: str) -> NetBoxHTTPError:
        status = int(error.get("status") or 400)
        body = redact(error.get("errors") or error.get("detail"), self._secrets)
        cls: type[NetBoxHTTPError] = NetBoxAuthError if status in (401, 403) else NetBoxHTTPError
        return cls(
            f"NetBox rejected the object ({status}): {summarise(body)}",
            status=status,
            body=body,
            path=f"/api/{path}/",
        )

    @staticmethod
    def _item_error(exc: NetBoxHTTPError, index: int) -> NetBoxError:
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


def _consume_exception(task: asyncio.Task[Any]) -> None:
    """A prefetch nobody awaited must not log 'exception was never retrieved' (the reader re-raises it)."""
    if not task.cancelled():
        task.exception()


def summarise(body: Any) -> str:
    """NetBox error bodies in one line: `detail` plus the per-object field errors of list requests."""
    if isinstance(body, dict):
        parts = [str(body["detail"])] if "detail" in body else []
        for item in body.get("errors") or []:
            if isinstance(item, dict):
                parts.append(json.dumps(item.get("errors", item), sort_keys=True, default=str))
        if not parts:
            parts.append(json.dumps(body, sort_keys=True, default=str))
        return " ".join(parts)[:1500]
    if isinstance(body, list):
        return json.dumps([b for b in body if b], default=str)[:1500]
    return str(body)[:1500]
