"""The NetBox HTTP transport: one connection pool per sync run, bounded concurrency, typed errors.

Every request of the client goes through `NetBoxTransport.request`, which counts it, marks cached list
reads stale around writes, and turns every failure into a `NetBoxError` with the secrets swept out.
The reads (`reads.py`) and the write strategies (`writes/`) are built on it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from hvsync_backend.inventory import tokens
from hvsync_backend.inventory.apply_path import ApplyOffer
from hvsync_backend.inventory.dial import checked_transport
from hvsync_backend.inventory.errors import (
    NetBoxAuthError,
    NetBoxError,
    NetBoxHTTPError,
    NetBoxUnreachable,
    redact,
)
from hvsync_backend.inventory.list_cache import ListCache
from hvsync_backend.inventory.releases import NetBoxRelease
from hvsync_backend.metrics import RequestObserver, observed
from hvsync_backend.wire import change_sets

__all__ = [
    "BRANCH_HEADER",
    "DEFAULT_MAX_ANSWER_BYTES",
    "KEEPALIVE_EXPIRY",
    "NetBoxConfig",
    "NetBoxTransport",
    "WriteStats",
    "consume_exception",
    "summarise",
]

BRANCH_HEADER = "X-NetBox-Branch"
#: Seconds an idle keep-alive connection is kept for reuse (below gunicorn's default keepalive of 2 s).
KEEPALIVE_EXPIRY = 1.5
#: Default cap on one NetBox answer: a 1,000-object page of the largest list is far below it
#: (docs/backend.md, "Answer size caps"); `HVSYNC_NETBOX_MAX_ANSWER_BYTES` sets it.
DEFAULT_MAX_ANSWER_BYTES = 32 * 1024 * 1024
_CHUNK = 64 * 1024
#: Headers that describe the bytes as sent, not as read (the answer kept is decoded already).
_DECODED_AWAY = frozenset({"content-encoding", "content-length", "transfer-encoding"})


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
    #: Longest NetBox answer read (bytes): reading stops there and the request fails naming the limit.
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    #: Builds the client's HTTP transport (None: the network); set from `BackendContext.netbox_transport`.
    transport: Callable[[], httpx.AsyncBaseTransport] | None = field(default=None, repr=False, compare=False)
    #: Told about every request the client sends (the backend's metrics); None: nobody.
    observer: RequestObserver | None = field(default=None, repr=False, compare=False)

    @staticmethod
    def auth_header_for(token_version: int, token: str, token_key: str | None = None) -> str:
        """The `Authorization` value of a token: `tokens.auth_header`, the builder the registry uses too."""
        return tokens.auth_header(token_version, token, token_key)

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


class NetBoxTransport:
    """One keep-alive connection pool per sync run: requests, typed errors, counters, the release and the
    plugin's offer. `NetBoxClient` adds the reads and the write strategies on top."""

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
        if transport is None and config.transport is not None:
            transport = config.transport()
        if transport is None:  # the network: only addresses endpoints.hosts allows (inventory/dial.py)
            transport = checked_transport(config.url, verify=config.verify_ssl, limits=limits)
        self._http = httpx.AsyncClient(
            base_url=config.url.rstrip("/") + "/api/",
            headers=headers,
            verify=config.verify_ssl,
            timeout=httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0)),
            limits=limits,
            follow_redirects=False,
            transport=transport,
        )
        self._reads = asyncio.Semaphore(config.read_concurrency)
        #: Write requests in flight at once (the write strategies take a slot per batch).
        self.write_slots = asyncio.Semaphore(config.write_concurrency)
        self._secrets = config.secrets()
        self.stats = WriteStats()
        #: List reads kept for reuse (`list_cache.py`; used only once a sync run turns `cache_reads` on):
        #: a second read of the same list costs nothing and reads can be started ahead of the kind that
        #: needs them. `lists`: a cache an earlier client of the same sync job left (sync/job_reads.py).
        self.cache_reads = False
        self.lists = lists if lists is not None else ListCache()
        self._release: asyncio.Task[NetBoxRelease] | None = None
        self._offer: asyncio.Task[ApplyOffer | None] | None = None

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
        return await observed(self.config.observer, method, self._read(method, path, params, json))

    async def _read(self, method: str, path: str, params: dict[str, Any] | None, json: Any) -> httpx.Response:
        """Send and read the answer streamed, at most `max_answer_bytes` of it (decoded): past the cap
        reading stops and the request fails naming the limit (NetBoxHTTPError, status None)."""
        limit = self.config.max_answer_bytes
        request = self._http.build_request(method, path, params=params, json=json)
        response = await self._http.send(request, stream=True)
        try:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit:
                raise self._too_large(method, path, limit)
            content = bytearray()
            async for chunk in response.aiter_bytes(_CHUNK):
                content += chunk
                if len(content) > limit:
                    raise self._too_large(method, path, limit)
        finally:
            await response.aclose()
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DECODED_AWAY]
        return httpx.Response(response.status_code, headers=headers, content=bytes(content), request=request)

    @staticmethod
    def _too_large(method: str, path: str, limit: int) -> NetBoxHTTPError:
        return NetBoxHTTPError(
            f"NetBox's answer to {method} /api/{path} is larger than the {limit}-byte limit "
            "(HVSYNC_NETBOX_MAX_ANSWER_BYTES); nothing of it was used",
            path=f"/api/{path}",
        )

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

    def redact(self, value: Any) -> Any:
        """`value` with this client's secrets swept out (error bodies and texts)."""
        return redact(value, self._secrets)

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
            self._offer.add_done_callback(consume_exception)
        return self._offer

    async def _discover(self) -> ApplyOffer | None:
        try:
            return ApplyOffer.from_discovery(await self.get(f"{change_sets.ROUTE}/"))
        except NetBoxError:  # no plugin, an older plugin, or NetBox down (the writes will say so)
            return None

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        async with self._reads:
            return await self.request("GET", path, params=params)


def consume_exception(task: asyncio.Task[Any]) -> None:
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
