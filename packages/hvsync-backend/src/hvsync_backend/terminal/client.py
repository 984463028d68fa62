"""The backend over HTTP: stage streams read frame by frame (with reconnects), selected-object POSTs.

Every call has a timeout. A stream that drops is picked up again with `Last-Event-ID`: the backend
replays what was missed, or sends `restart` and a fresh run. Errors name the URL and status, never the key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx

from hvsync_backend.sse.frames import Frame, decode_frames
from hvsync_backend.terminal.config import RunnerConfig
from hvsync_backend.wire import API_KEY_HEADER
from hvsync_backend.wire.sse import split_lines

CONNECT_TIMEOUT = 10.0
RECONNECTS = 3


class BackendUnavailable(Exception):
    """The backend could not be reached, TLS failed, or it refused the key (exit code 3)."""


class BackendRefused(Exception):
    """The backend refused the request itself (a 4xx other than auth, e.g. 422): a usage error (exit 2)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"backend answered {status}: {detail}")
        self.status = status


class StreamBroken(Exception):
    """The stream ended or failed for good before its `complete` frame."""


def _detail(response: httpx.Response) -> str:
    """The backend's `detail` (422 lists are flattened to `loc: msg`), bounded."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = ".".join(str(x) for x in item.get("loc", []))
                parts.append(f"{loc}: {item.get('msg')}")
        detail = "; ".join(parts)
    return str(detail)[:500]


def _frames(lines: Iterator[str]) -> Iterator[Frame]:
    """The stream's events as frames; an event whose data is not JSON breaks the stream."""
    try:
        yield from decode_frames(lines)
    except ValueError:
        raise StreamBroken("the backend sent a frame that is not JSON") from None


class BackendClient:
    """One httpx client for the whole invocation (connection reuse; TLS settings from the config)."""

    def __init__(self, config: RunnerConfig, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self.http = httpx.Client(
            base_url=config.url,
            headers={API_KEY_HEADER: config.api_key, "User-Agent": "hvsync-backend-sync"},
            verify=config.verify,
            timeout=httpx.Timeout(config.timeout, connect=CONNECT_TIMEOUT),
            transport=transport,
            trust_env=False,
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> BackendClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, response: httpx.Response) -> None:
        if response.status_code in (401, 403):
            raise BackendUnavailable(f"backend {self.config.url} refused the API key ({_detail(response)})")
        if response.status_code in (429, 503):
            raise BackendUnavailable(
                f"backend {self.config.url} answered {response.status_code}: {_detail(response)}"
            )
        if 400 <= response.status_code < 500 and response.status_code != 404:
            raise BackendRefused(response.status_code, _detail(response))
        if response.status_code >= 500 or (response.status_code == 404 and response.request.method == "GET"):
            raise BackendUnavailable(
                f"backend {self.config.url} answered {response.status_code} for "
                f"{response.request.url.path}: {_detail(response)}"
            )

    def _unreachable(self, exc: httpx.HTTPError) -> BackendUnavailable:
        reason = type(exc).__name__
        text = str(exc).replace(self.config.api_key, "***")[:200]
        return BackendUnavailable(f"backend {self.config.url} unreachable ({reason}: {text})")

    def stream(self, route: str, params: dict[str, str]) -> Iterator[Frame]:
        """The frames of one stream up to and including `complete`; reconnects with Last-Event-ID."""
        last_id: str | None = None
        attempts = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id:
                headers["Last-Event-ID"] = last_id
            try:
                with self.http.stream("GET", route, params=params, headers=headers) as response:
                    if response.status_code != 200:
                        response.read()
                        self._check(response)
                        raise BackendUnavailable(f"backend answered {response.status_code} for {route}")
                    for frame in _frames(split_lines(response.iter_bytes())):
                        if frame.id and frame.id != "0":
                            last_id = frame.id
                        yield frame
                        if frame.event == "complete":
                            return
                raise StreamBroken(f"the stream of {route} ended before its complete frame")
            except (httpx.ReadError, httpx.ReadTimeout, httpx.RemoteProtocolError, StreamBroken) as exc:
                attempts += 1
                if last_id is None and not isinstance(exc, StreamBroken):
                    raise self._unreachable(exc) from None
                if attempts > RECONNECTS:
                    raise StreamBroken(
                        f"the stream of {route} broke {attempts} times: {type(exc).__name__}"
                    ) from None
            except httpx.HTTPError as exc:
                raise self._unreachable(exc) from None

    def individual(self, route: str, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """A selected-object sync: its status and `complete`-shaped body (404/409/424/502 are results)."""
        timeout = httpx.Timeout(self.config.request_timeout, connect=CONNECT_TIMEOUT)
        try:
            response = self.http.post(route, params=params, timeout=timeout)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if response.status_code in (401, 403, 429, 503) or (
            400 <= response.status_code < 500 and response.status_code not in (404, 409, 424)
        ):
            self._check(response)
        try:
            body = response.json()
        except ValueError:
            raise BackendUnavailable(
                f"backend {self.config.url} answered {response.status_code} without JSON for {route}"
            ) from None
        if not isinstance(body, dict):
            body = {"ok": False, "detail": str(body)[:300]}
        return response.status_code, body

    def cancel(self, job: str) -> None:
        """Best effort: ask the backend to stop the runs of our job (on Ctrl-C)."""
        with contextlib.suppress(httpx.HTTPError):
            self.http.post("/sync/cancel", params={"job": job}, timeout=CONNECT_TIMEOUT)
