"""In-memory fakes for the HTTP seam of netbox_hvsync.rules (used by the tests in this directory)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from netbox_hvsync.rules.transport import TransportError

REPO_ROOT = Path(__file__).resolve().parents[4]
BASE = "https://backend.example:8800"
API_KEY = "K" * 20 + "planted-api-key-0123456789abcdef"


@dataclass
class FakeResponse:
    status_code: int
    body: Any = None
    raw_text: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    lines: Iterable[str | bytes] = ()

    @property
    def text(self) -> str:
        if self.raw_text is not None:
            return self.raw_text
        return "" if self.body is None else json.dumps(self.body)

    def iter_lines(self) -> Iterable[str | bytes]:
        return self.lines


@dataclass
class Call:
    method: str
    url: str
    path: str
    headers: dict[str, str]
    json: Any
    timeout: float
    allow_redirects: bool


Handler = FakeResponse | Exception | Callable[["Call"], FakeResponse]


class FakeTransport:
    """Routes (METHOD, path) to queued answers; the last queued answer repeats. Records every call."""

    def __init__(self, routes: Mapping[tuple[str, str], Handler | list[Handler]] | None = None) -> None:
        self.routes: dict[tuple[str, str], list[Handler]] = {}
        self.calls: list[Call] = []
        for key, value in (routes or {}).items():
            self.on(key[0], key[1], value)

    def on(self, method: str, path: str, answer: Handler | list[Handler]) -> FakeTransport:
        self.routes[(method, path)] = list(answer) if isinstance(answer, list) else [answer]
        return self

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        json: Any | None,
        timeout: float,
        allow_redirects: bool,
    ) -> FakeResponse:
        path = urlsplit(url).path or "/"
        call = Call(method, url, path, dict(headers), json, timeout, allow_redirects)
        self.calls.append(call)
        queue = self.routes.get((method, path))
        if not queue:
            return FakeResponse(404, {"detail": "Not Found"})
        handler = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(handler, Exception):
            raise handler
        if callable(handler):
            return handler(call)
        return handler

    def paths(self) -> list[str]:
        return [f"{c.method} {c.path}" for c in self.calls]

    def everything_sent(self) -> str:
        return json.dumps([[c.url, c.headers, c.json] for c in self.calls])


def refused() -> TransportError:
    return TransportError("Connection refused by 10.0.0.9:8800", kind="connection")
