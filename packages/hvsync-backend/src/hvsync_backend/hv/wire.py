"""How the Proxmox client puts one request on the wire: aiohttp, or an httpx transport when one is given.

A sync reads Proxmox once per guest and path: a 1,000-guest full sync makes about 3,000 small GETs.
httpx spent about 1.1 ms of CPU on each (its connection pool re-examines every connection each time it
hands one out), more than the Proxmox emulator takes to answer, so on a 2-core machine the client itself
was the largest part of those reads. aiohttp sends the same request for about 0.16 ms
(`benchmarks/bench_proxmox_wire.py`). The client above this (auth, retries, unwrapping `data`) does not
know which wire it uses: tests and custom proxies pass an httpx transport and keep httpx's.

Both wires read at most `max_bytes` of an answer (streamed: reading stops at the cap) and raise
`AnswerTooLarge` past it. The aiohttp wire dials only addresses `endpoints.hosts` allows: a name is
resolved once per connection by `CheckedResolver`, every address checked, and the connection goes to a
checked address (aiohttp connects to what its resolver returns), so DNS rebinding cannot slip a
link-local address in; an IP literal is checked before anything is sent.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult

from hvsync_backend.endpoints import hosts

#: Default cap on one Proxmox answer: a 1,000-guest cluster's largest answer is far below it
#: (docs/backend.md, "Answer size caps"); `HVSYNC_PROXMOX_MAX_ANSWER_BYTES` sets it.
DEFAULT_MAX_ANSWER_BYTES = 32 * 1024 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Answer:
    """An HTTP answer, read whole (Proxmox answers are small JSON documents)."""

    status_code: int
    reason_phrase: str
    content: bytes

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.content)


class SendFailed(Exception):
    """No answer came: refused, DNS, TLS, or the timeout passed (`timed_out`). `refused`: the backend
    would not dial the address (`endpoints.hosts`); nothing was sent and retrying cannot help."""

    def __init__(self, cause: BaseException, *, timed_out: bool, refused: bool = False) -> None:
        super().__init__(str(cause))
        self.kind = "HostRefused" if refused else type(cause).__name__
        self.timed_out = timed_out
        self.refused = refused


class AnswerTooLarge(Exception):
    """The answer is longer than the cap; reading stopped there (nothing of it is used)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"answer larger than the {limit}-byte limit (HVSYNC_PROXMOX_MAX_ANSWER_BYTES)")
        self.limit = limit


class _Refused(OSError):
    """HostRefused as aiohttp's resolver must raise it (an OSError), unwrapped again by the wire."""


class CheckedResolver(AbstractResolver):
    """aiohttp resolver over `hosts.resolve_checked`: every address checked, only those returned."""

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        try:
            addresses = await hosts.resolve_checked(host, port)
        except hosts.HostRefused as exc:
            raise _Refused(str(exc)) from None
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in addresses
        ]

    async def close(self) -> None:
        return None


def _literal_refusal(base_url: str) -> str | None:
    """Why the URL's host, when an IP literal, may not be dialled (aiohttp skips the resolver for it)."""
    host = urlsplit(base_url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    reason = hosts.refusal(address)
    return None if reason is None else f"{host} {reason}"


def _refused_cause(exc: BaseException) -> _Refused | None:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, _Refused):
            return cause
        cause = getattr(cause, "os_error", None) or cause.__cause__
    return None


def _too_large(declared: str | None, limit: int) -> bool:
    return declared is not None and declared.isdigit() and int(declared) > limit


class Wire(Protocol):
    """Sends one request relative to the endpoint's base URL; raises SendFailed when no answer came."""

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None,
        form: dict[str, Any] | None,
        headers: dict[str, str],
    ) -> Answer: ...

    async def aclose(self) -> None: ...


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY / HTTP_PROXY, unless NO_PROXY covers it)."""
    parts = urlsplit(url)
    if parts.hostname is None or proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


def query_value(value: Any) -> str:
    """A parameter as Proxmox reads it: booleans are 1 and 0."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value)


def _pairs(values: dict[str, Any] | None) -> list[tuple[str, str]]:
    return [(key, query_value(value)) for key, value in (values or {}).items()]


class AiohttpWire:
    """One keep-alive aiohttp session per endpoint, opened on first use (it belongs to the running loop).
    After `aclose`, a request still sent (a run reading through a client its pool has since replaced)
    opens and closes a session of its own: slower, but it is answered and nothing is left open.

    Every request has the endpoint's timeout for connecting (a free connection included) and for each read
    of the answer, as httpx applied it. Verification uses the system's trust store (and SSL_CERT_FILE /
    SSL_CERT_DIR). The proxy variables (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) are honoured as httpx honoured
    them, but read once: aiohttp's `trust_env` reads them and ~/.netrc again on every request
    (0.1-0.4 ms of CPU each in a probe; a whole read costs about 0.16 ms without it)."""

    def __init__(
        self,
        base_url: str,
        *,
        verify: bool,
        timeout: float,
        headers: dict[str, str],
        max_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.verify = verify
        self.max_bytes = max_bytes
        self._refusal = _literal_refusal(self.base_url)
        self.timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=timeout, sock_read=timeout
        )
        self.headers = headers
        self.proxy = proxy_for(self.base_url)
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _new_session(self) -> aiohttp.ClientSession:
        tls: ssl.SSLContext | bool = ssl.create_default_context() if self.verify else False
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls, resolver=CheckedResolver()),
            timeout=self.timeout,
            headers=self.headers,
        )

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None,
        form: dict[str, Any] | None,
        headers: dict[str, str],
    ) -> Answer:
        if self._refusal is not None:
            raise SendFailed(hosts.HostRefused(self._refusal), timed_out=False, refused=True)
        body = None
        if form is not None:
            body = urlencode(_pairs(form)).encode()
            headers = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
        if self._closed:
            async with self._new_session() as session:
                return await self._request(session, method, path, params, body, headers)
        if self._session is None:
            self._session = self._new_session()
        return await self._request(self._session, method, path, params, body, headers)

    async def _request(
        self,
        session: aiohttp.ClientSession,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        body: bytes | None,
        headers: dict[str, str],
    ) -> Answer:
        try:
            async with session.request(
                method,
                self.base_url + path,
                params=_pairs(params),
                data=body,
                headers=headers,
                allow_redirects=False,
                proxy=self.proxy,
            ) as response:
                if _too_large(response.headers.get("Content-Length"), self.max_bytes):
                    raise AnswerTooLarge(self.max_bytes)
                content = bytearray()
                async for chunk in response.content.iter_chunked(_CHUNK):
                    content += chunk
                    if len(content) > self.max_bytes:
                        raise AnswerTooLarge(self.max_bytes)
                return Answer(response.status, response.reason or "", bytes(content))
        except (aiohttp.ClientError, TimeoutError) as exc:
            refused = _refused_cause(exc)
            if refused is not None:
                raise SendFailed(hosts.HostRefused(str(refused)), timed_out=False, refused=True) from None
            raise SendFailed(exc, timed_out=isinstance(exc, TimeoutError)) from None

    async def aclose(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None


class HttpxWire:
    """The same requests through an httpx transport (tests' mock transports, a custom proxy transport)."""

    def __init__(
        self,
        base_url: str,
        *,
        verify: bool,
        timeout: float,
        headers: dict[str, str],
        transport: httpx.AsyncBaseTransport,
        max_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.max_bytes = max_bytes
        self._http = httpx.AsyncClient(
            base_url=base_url,
            verify=verify,
            timeout=httpx.Timeout(timeout),
            transport=transport,
            follow_redirects=False,
            headers=headers,
        )

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None,
        form: dict[str, Any] | None,
        headers: dict[str, str],
    ) -> Answer:
        data = dict(_pairs(form)) if form is not None else None
        try:
            async with self._http.stream(
                method, path, params=dict(_pairs(params)), data=data, headers=headers
            ) as response:
                if _too_large(response.headers.get("Content-Length"), self.max_bytes):
                    raise AnswerTooLarge(self.max_bytes)
                content = bytearray()
                async for chunk in response.aiter_bytes(_CHUNK):
                    content += chunk
                    if len(content) > self.max_bytes:
                        raise AnswerTooLarge(self.max_bytes)
        except httpx.TransportError as exc:
            raise SendFailed(exc, timed_out=isinstance(exc, httpx.TimeoutException)) from None
        return Answer(response.status_code, response.reason_phrase, bytes(content))

    async def aclose(self) -> None:
        await self._http.aclose()


def open_wire(
    base_url: str,
    *,
    verify: bool,
    timeout: float,
    headers: dict[str, str],
    transport: httpx.AsyncBaseTransport | None = None,
    max_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> Wire:
    """aiohttp, unless an httpx transport is given."""
    if transport is not None:
        return HttpxWire(
            base_url,
            verify=verify,
            timeout=timeout,
            headers=headers,
            transport=transport,
            max_bytes=max_bytes,
        )
    return AiohttpWire(base_url, verify=verify, timeout=timeout, headers=headers, max_bytes=max_bytes)
