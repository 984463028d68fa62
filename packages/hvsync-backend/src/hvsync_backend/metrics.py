"""Prometheus metrics of one backend instance: every definition lives here, on a registry of its own.

One registry per app (not prometheus_client's global one), so tests and several apps in one process
never share or collide on series. Labels stay low-cardinality and secret-free by construction: stage and
kind names, verbs, the upstream's kind (``netbox``/``proxmox``), the HTTP method and status code; never a
URL, an id, a host, a key or a token. docs/metrics.md describes each series and the Grafana dashboard.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from hvsync_backend.wire import GONE_COUNTS, SUMMARY_COUNTS

#: What a sync writes to NetBox per object, as the stages' `complete` summary counts it, and the objects
#: it marked gone from Proxmox or saw come back (deletion requests are the plugin's to count).
VERBS = (*SUMMARY_COUNTS, *(c for c in GONE_COUNTS if c != "deletion_requests"))
#: Methods kept as they are in the `method` label; anything else is "OTHER" (bounded cardinality).
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
#: Stages take seconds to minutes on real clusters; requests milliseconds to the clients' timeouts.
STAGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: `reason` label of hvsync_auth_failures_total.
REASON_MISSING, REASON_INVALID, REASON_LOCKED = "missing_key", "invalid_key", "locked"


class RequestObserver(Protocol):
    """Told about every request an upstream client sends: ``(method, status, seconds)``."""

    def __call__(self, method: str, status: str, seconds: float) -> None: ...


class Answered(Protocol):
    """What `observed` reads of an answer: an httpx response, or the Proxmox wire's Answer."""

    @property
    def status_code(self) -> int: ...


async def observed[A: Answered](observe: RequestObserver | None, method: str, send: Awaitable[A]) -> A:
    """Await ``send`` and report its status (or ``error`` for a transport failure) and latency.

    Cancellation (a prefetch the run no longer needs) is not a request outcome and is not reported."""
    started = time.perf_counter()
    try:
        response = await send
    except Exception:
        if observe is not None:
            observe(method, "error", time.perf_counter() - started)
        raise
    if observe is not None:
        observe(method, str(response.status_code), time.perf_counter() - started)
    return response


class Metrics:
    """The backend's series; `render()` is what ``GET /metrics`` answers."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.sync_runs = Counter(
            "hvsync_sync_runs",
            "Sync runs that reached their `complete`, by run (stage slug, full-update, individual-<kind>)",
            ["stage", "outcome", "dry_run"],
            registry=r,
        )
        self.stage_duration = Histogram(
            "hvsync_sync_stage_duration_seconds",
            "Wall time of each stage a run executed",
            ["stage", "outcome"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.objects = Counter(
            "hvsync_netbox_objects",
            "NetBox objects handled by sync runs (not dry runs), by object kind and verb",
            ["kind", "verb"],
            registry=r,
        )
        self.requests = Counter(
            "hvsync_upstream_requests",
            "HTTP requests sent to NetBox and Proxmox, by status code (`error`: no answer)",
            ["target", "method", "status"],
            registry=r,
        )
        self.request_duration = Histogram(
            "hvsync_upstream_request_duration_seconds",
            "Latency of HTTP requests sent to NetBox and Proxmox",
            ["target", "method", "status"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.auth_failures = Counter(
            "hvsync_auth_failures",
            "Requests refused for their API key: missing_key, invalid_key, or locked (client IP locked out)",
            ["reason"],
            registry=r,
        )
        self.auth_lockouts = Counter(
            "hvsync_auth_lockouts", "Client IPs locked out after too many failed authentications", registry=r
        )
        self.keys_cached = Gauge(
            "hvsync_auth_keys_cached", "API key verifications held in this process's cache", registry=r
        )

    # --- upstream requests ---------------------------------------------------------------------------
    def observer(self, target: str) -> RequestObserver:
        """The observer a client of ``target`` (``netbox`` or ``proxmox``) reports its requests to."""

        def observe(method: str, status: str, seconds: float) -> None:
            verb = method.upper() if method.upper() in METHODS else "OTHER"
            self.requests.labels(target, verb, status).inc()
            self.request_duration.labels(target, verb, status).observe(seconds)

        return observe

    # --- sync runs -----------------------------------------------------------------------------------
    def objects_handled(self, kind: str, counts: Mapping[str, int]) -> None:
        """One kind's share of a stage's summary (`Counts.as_dict()`)."""
        for verb in VERBS:
            amount = int(counts.get(verb, 0))
            if amount:
                self.objects.labels(kind, verb).inc(amount)

    def run_finished(self, data: Mapping[str, Any], stages: Iterable[Mapping[str, Any]]) -> None:
        """A `complete` payload and the per-stage rows (``stage``, ``ok``, ``duration_ms``) of the run."""
        self.sync_runs.labels(
            str(data["stage"]), outcome(bool(data.get("ok"))), str(bool(data.get("dry_run"))).lower()
        ).inc()
        for row in stages:
            self.stage_duration.labels(str(row["stage"]), outcome(bool(row.get("ok")))).observe(
                float(row.get("duration_ms") or 0.0) / 1000
            )

    # --- auth ----------------------------------------------------------------------------------------
    def auth_failed(self, reason: str) -> None:
        self.auth_failures.labels(reason).inc()

    def locked_out(self) -> None:
        self.auth_lockouts.inc()

    def watch_key_cache(self, size: Callable[[], int]) -> None:
        """Read the cache's size at scrape time (the cache itself knows nothing of metrics)."""
        self.keys_cached.set_function(lambda: float(size()))

    # --- exposition ----------------------------------------------------------------------------------
    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def outcome(ok: bool) -> str:
    return "ok" if ok else "failed"
