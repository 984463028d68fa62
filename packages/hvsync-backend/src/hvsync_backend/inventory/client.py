"""Async NetBox REST client: paged reads, bulk list writes, bounded concurrency, typed errors.

NetBox writes one transaction per object even in list requests (~20-30 objects/s on small machines),
so writes are chunked and run a few at a time (tuned to NetBox's gunicorn workers). A list request is
all-or-nothing in NetBox, so a rejected chunk is retried object by object: one bad object fails alone.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from hvsync_backend.inventory.errors import (
    NetBoxAuthError,
    NetBoxError,
    NetBoxHTTPError,
    NetBoxUnreachable,
    redact,
)
from hvsync_backend.inventory.releases import INTERFACE_LISTS, NetBoxRelease, write_primary_macs
from hvsync_backend.metrics import RequestObserver, observed

BRANCH_HEADER = "X-NetBox-Branch"
#: Seconds an idle keep-alive connection is kept for reuse (below gunicorn's default keepalive of 2 s).
KEEPALIVE_EXPIRY = 1.5
#: Lists whose creates and updates change no field the sync reads from any other list (nested objects
#: are compared by id only; a VM's disk total is not read): a POST/PATCH there makes only that list stale.
SELF_CONTAINED_WRITES = frozenset(
    {
        "virtualization/clusters",
        "virtualization/virtual-machines",
        "virtualization/virtual-disks",
        "virtualization/interfaces",
        "dcim/devices",
        "dcim/interfaces",
        "ipam/ip-addresses",
        "ipam/vlan-groups",
        "ipam/vlans",
        "ipam/prefixes",
    }
)
PAGE_LIMIT = 1000


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


class NetBoxClient:
    """One keep-alive connection pool per sync run; use as an async context manager."""

    def __init__(self, config: NetBoxConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
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
        #: Per-run list cache (off unless a sync run turns it on): list reads keyed by path and query, so
        #: a second read of the same list in one run costs nothing and reads can be started ahead of the
        #: kind that needs them. A read is stale once this client writes to its path, or writes anything
        #: that may change other lists (see `_wrote`).
        self.cache_reads = False
        self._generation = 0
        self._path_generation: dict[str, int] = {}
        self._list_cache: dict[tuple[Any, ...], tuple[int, asyncio.Task[list[dict[str, Any]]]]] = {}
        self._release: asyncio.Task[NetBoxRelease] | None = None

    async def __aenter__(self) -> NetBoxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for _, task in self._list_cache.values():
            task.cancel()
        self._list_cache.clear()
        await self._http.aclose()

    # -- low level -------------------------------------------------------------------------------

    async def request(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None
    ) -> Any:
        """One HTTP call; returns decoded JSON (None for 204) or raises a typed NetBoxError."""
        path = path.strip("/") + "/"  # NetBox answers a path without the slash with a redirect
        is_write = method != "GET"
        if is_write:
            self._wrote(method, path)  # when a write starts and when it ends: reads in between are stale
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
                self._wrote(method, path)
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

    # -- reads -----------------------------------------------------------------------------------

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        async with self._reads:
            return await self.request("GET", path, params=params)

    def prefetch(
        self, path: str, params: dict[str, Any] | None = None, *, fields: Sequence[str] | None = None
    ) -> None:
        """Start reading a list now (cache on) so that a later identical `list_all` finds it ready."""
        if self.cache_reads:
            self._cached_task(path, params, fields, brief=False)

    async def list_all(
        self,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        fields: Sequence[str] | None = None,
        brief: bool = False,
    ) -> list[dict[str, Any]]:
        """Every object of a list route, in pages of 1,000; pages after the first are read concurrently.

        With `cache_reads` on, an identical read since this client's last write is answered from the
        run's cache (rows are copied: callers may change them)."""
        if not self.cache_reads:
            return await self._list_all(path, params, fields, brief)
        key, task = self._cached_task(path, params, fields, brief)
        try:
            rows = await asyncio.shield(task)
        except Exception:
            if self._list_cache.get(key, (0, None))[1] is task:
                del self._list_cache[key]
            raise
        return [dict(row) for row in rows]

    def _read_generation(self, path: str) -> int:
        return self._generation + self._path_generation.get(path, 0)

    def _wrote(self, method: str, path: str) -> None:
        """Make stale what a write may change: its own list; with a delete (cascades) or a write outside
        `SELF_CONTAINED_WRITES` (support objects, tags, custom fields, MAC objects, plugin records with
        their signals), every list."""
        path = path.strip("/").split("?")[0]
        if method in ("POST", "PATCH") and path in SELF_CONTAINED_WRITES:
            self._path_generation[path] = self._path_generation.get(path, 0) + 1
        else:
            self._generation += 1

    def _cached_task(
        self, path: str, params: dict[str, Any] | None, fields: Sequence[str] | None, brief: bool
    ) -> tuple[tuple[Any, ...], asyncio.Task[list[dict[str, Any]]]]:
        key = (
            path.strip("/"),
            tuple(
                sorted((k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in (params or {}).items())
            ),
            tuple(fields or ()),
            brief,
        )
        entry = self._list_cache.get(key)
        if entry is not None and entry[0] == self._read_generation(key[0]):
            self.stats.cached_reads += 1
            return key, entry[1]
        task = asyncio.ensure_future(self._list_all(path, params, fields, brief))
        task.add_done_callback(_consume_exception)
        self._list_cache[key] = (self._read_generation(key[0]), task)
        return key, task

    async def _list_all(
        self, path: str, params: dict[str, Any] | None, fields: Sequence[str] | None, brief: bool
    ) -> list[dict[str, Any]]:
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
        self, path: str, items: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any] | NetBoxError]:
        """PATCH objects (each item carries `id`) with list requests."""
        results = await self._write_interfaces("PATCH", path, list(items))
        self.stats.updated += sum(1 for r in results if not isinstance(r, NetBoxError))
        return results

    async def bulk_delete(self, path: str, ids: Iterable[int]) -> list[NetBoxError | None]:
        """DELETE objects by id with list requests."""
        results = await self._bulk("DELETE", path, [{"id": i} for i in ids])
        out: list[NetBoxError | None] = [r if isinstance(r, NetBoxError) else None for r in results]
        self.stats.deleted += sum(1 for r in out if r is None)
        return out

    async def _write_interfaces(self, method: str, path: str, items: list[dict[str, Any]]) -> list[Any]:
        """A bulk create or update; interfaces' `mac_address` is written as 4.7 writes it on releases
        whose interfaces ignore it (see `releases`)."""
        if (
            path.strip("/") not in INTERFACE_LISTS
            or not any("mac_address" in item for item in items)
            or (await self.release()).interface_mac_shortcut
        ):
            return await self._bulk(method, path, items)
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

    async def _bulk(self, method: str, path: str, items: list[dict[str, Any]]) -> list[Any]:
        if not items:
            return []
        size = max(1, self.config.write_chunk)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        answers = await asyncio.gather(*(self._write_chunk(method, path, chunk) for chunk in chunks))
        return [result for chunk in answers for result in chunk]

    async def _write_chunk(self, method: str, path: str, chunk: list[dict[str, Any]]) -> list[Any]:
        try:
            async with self._writes:
                answer = await self.request(method, path, json=chunk)
        except NetBoxUnreachable as exc:
            return [exc] * len(chunk)
        except NetBoxHTTPError as exc:
            if len(chunk) == 1 or exc.status in (401, 403, 404, 405) or (exc.status or 0) >= 500:
                return (
                    [self._item_error(exc, 0)] * len(chunk) if len(chunk) > 1 else [self._item_error(exc, 0)]
                )
            # One bad object rejects the whole list: retry one by one to isolate it.
            singles = await asyncio.gather(*(self._write_chunk(method, path, [item]) for item in chunk))
            return [s[0] for s in singles]
        if method == "DELETE":
            return [None] * len(chunk)
        if isinstance(answer, list) and len(answer) == len(chunk):
            return answer
        return [answer] * len(chunk)

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
