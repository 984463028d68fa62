"""`requests` implementation of `rules.transport.Transport`: the only place the plugin speaks HTTP to the backend.

Every call carries a timeout, redirects are never followed, names are resolved once per connection and
only addresses the host rules allow are dialled (`CheckedAdapter`), and connection, TLS and timeout failures
(including those that happen while a stage stream is being read) become `TransportError`, so core
decides what they mean. Exception texts are reduced to the exception class and a short reason: they can
contain URLs but never the `X-Service-API-Key` header, which `requests` does not echo.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from typing import Any

import requests
import urllib3
from netbox_hvsync.rules.transport import TransportError
from netbox_hvsync.rules.urls import forbidden_host
from netbox_hvsync.wire.sse import split_lines
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError

#: Ceiling for reading the next chunk of a stage stream; the backend sends keep-alive comments every 15 s.
STREAM_READ_TIMEOUT = 120.0
#: Ceiling for connecting before a stage stream starts.
STREAM_CONNECT_TIMEOUT = 10.0


def _kind(exc: requests.RequestException) -> str:
    if isinstance(exc, requests.exceptions.SSLError):
        return "tls"
    if isinstance(exc, requests.exceptions.Timeout):
        return "timeout"
    # requests reports a read timeout *while streaming* as a ConnectionError wrapping urllib3's error
    if any(isinstance(arg, urllib3.exceptions.ReadTimeoutError) for arg in exc.args):
        return "timeout"
    return "connection"


def _reason(exc: BaseException) -> str:
    """A short, header-free reason: the innermost cause's class name and first line."""
    inner: BaseException = exc
    while inner.__cause__ is not None or (inner.args and isinstance(inner.args[0], BaseException)):
        inner = inner.__cause__ or inner.args[0]
    text = str(inner).splitlines()[0] if str(inner) else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


class _CheckedAddresses:
    """Resolve the host once per connection and dial only addresses the host rules allow (issue 39: a
    name that resolves to a link-local, unspecified, mapped or metadata address is refused, whatever its
    text). The checked address is dialled as a literal; TLS still verifies the certificate for the name."""

    host: str
    port: int
    _dns_host: str

    def _new_conn(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(self._dns_host, self.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise NewConnectionError(self, f"cannot resolve the host: {exc}") from None  # type: ignore[arg-type]
        addresses = list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))
        refused = [a for a in addresses if forbidden_host(a) is not None]
        if refused or not addresses:
            raise NewConnectionError(  # type: ignore[arg-type]
                self,
                "the host resolves to an address hvsync refuses (link-local, unspecified, mapped or metadata)",
            )
        name, last = self._dns_host, None
        try:
            for address in addresses:
                self._dns_host = address
                try:
                    return super()._new_conn()  # type: ignore[misc, no-any-return]
                except (NewConnectionError, urllib3.exceptions.ConnectTimeoutError) as exc:
                    last = exc
            assert last is not None
            raise last
        finally:
            self._dns_host = name


class CheckedHTTPConnection(_CheckedAddresses, HTTPConnection):
    pass


class CheckedHTTPSConnection(_CheckedAddresses, HTTPSConnection):
    pass


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = CheckedHTTPSConnection


class CheckedAdapter(HTTPAdapter):
    """requests' adapter whose connections go only to addresses the host rules allow."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _CheckedHTTPPool, "https": _CheckedHTTPSPool}


class StreamingResponse:
    """A streamed answer whose line iterator turns mid-stream network failures into `TransportError`.

    The rules then judge the stream "interrupted before complete" with the failure's kind (`timeout` when no
    chunk arrived within the read timeout, `connection` when the connection broke); the break is also
    remembered in `broken`.
    """

    def __init__(self, response: requests.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers: Mapping[str, str] = response.headers
        self.broken: str | None = None

    @property
    def text(self) -> str:
        try:
            return self._response.text
        except requests.RequestException as exc:
            self.broken = _reason(exc)
            return ""

    def iter_lines(self) -> Iterator[str]:
        """SSE lines as the SSE rules split them (`wire.sse.split_lines`, shared with the backend's terminal
        runner): CRLF, LF or CR, also when a CRLF or a UTF-8 character is split across chunks."""
        try:
            yield from split_lines(self._response.iter_content(chunk_size=8192))
        except requests.RequestException as exc:
            self.broken = _reason(exc)
            raise TransportError(f"reading the stream: {self.broken}", kind=_kind(exc)) from None
        finally:
            self._response.close()

    def close(self) -> None:
        self._response.close()


class RequestsTransport:
    """`rules.transport.Transport` over one `requests.Session` with TLS verification bound at build time."""

    def __init__(self, *, verify_ssl: bool, read_timeout: float = STREAM_READ_TIMEOUT) -> None:
        self.read_timeout = read_timeout
        self.session = requests.Session()
        self.session.verify = verify_ssl
        self.session.trust_env = False  # no proxy or netrc credentials from the worker's environment
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, CheckedAdapter())

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        json: Any | None,
        timeout: float,
        allow_redirects: bool,
    ) -> requests.Response:
        try:
            return self.session.request(
                method, url, headers=dict(headers), json=json, timeout=timeout, allow_redirects=False
            )
        except requests.RequestException as exc:
            raise TransportError(f"{method} {url}: {_reason(exc)}", kind=_kind(exc)) from None

    def open_stream(
        self, url: str, *, headers: Mapping[str, str], params: Mapping[str, str]
    ) -> StreamingResponse:
        """GET a stage stream; the read timeout applies per chunk, not to the whole stage."""
        try:
            response = self.session.get(
                url,
                headers=dict(headers),
                params=dict(params),
                timeout=(STREAM_CONNECT_TIMEOUT, self.read_timeout),
                allow_redirects=False,
                stream=True,
            )
        except requests.RequestException as exc:
            raise TransportError(f"GET {url}: {_reason(exc)}", kind=_kind(exc)) from None
        return StreamingResponse(response)

    def close(self) -> None:
        self.session.close()
