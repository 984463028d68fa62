"""The HTTP seam: small protocols the NetBox glue implements with `requests`, tests with fakes.

The rules never import an HTTP library. Every call passes an explicit timeout and `allow_redirects=False`
(SPEC 5.2.4, DESIGN 7: calls to the backend refuse redirects). An adapter must translate its library's
connection, TLS and timeout exceptions into `TransportError`; any 3xx answer is treated here as a
refused redirect.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .constants import API_KEY_HEADER


class Response(Protocol):
    """The part of a `requests.Response` core reads."""

    status_code: int
    headers: Mapping[str, str]

    @property
    def text(self) -> str: ...


class Transport(Protocol):
    """One HTTP request; TLS verification is bound into the transport by whoever builds it."""

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        json: Any | None,
        timeout: float,
        allow_redirects: bool,
    ) -> Response: ...


class TransportError(Exception):
    """No backend-authored answer arrived: connection, TLS, timeout (adapters raise this)."""

    def __init__(self, message: str, *, kind: str = "connection") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class BackendContext:
    """Where and how to reach the backend for one job or one save."""

    base_url: str
    api_key: str
    backend_endpoint_id: int | None = None

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def auth_headers(self) -> dict[str, str]:
        return {API_KEY_HEADER: self.api_key, "Accept": "application/json"}


@dataclass(frozen=True)
class JsonAnswer:
    """A backend answer with its body parsed when it was JSON (`is_json` false otherwise)."""

    status: int
    body: Any
    is_json: bool
    text: str
    headers: Mapping[str, str]

    @property
    def is_redirect(self) -> bool:
        return 300 <= self.status < 400


def read_answer(response: Response) -> JsonAnswer:
    """Parse a response body as JSON when it is JSON; never raises on a bad body."""
    text = response.text or ""
    try:
        body = jsonlib.loads(text) if text.strip() else None
        is_json = bool(text.strip())
    except ValueError:
        body, is_json = None, False
    return JsonAnswer(
        status=int(response.status_code), body=body, is_json=is_json, text=text, headers=response.headers
    )


def call(
    transport: Transport,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    json: Any | None = None,
) -> JsonAnswer:
    """Send one request that refuses redirects; TransportError propagates to the caller."""
    response = transport.request(
        method, url, headers=dict(headers), json=json, timeout=timeout, allow_redirects=False
    )
    return read_answer(response)
