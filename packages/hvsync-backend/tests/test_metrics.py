"""GET /metrics: protected by the API key unless configured public; after a stage run against the fakes
it holds the run, its outcome, object counts equal to the `complete` summary, upstream requests by status,
and auth failures and lockouts; secrets never appear; the Grafana dashboard queries only real series."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_netbox import FakeNetBox
from fastapi.testclient import TestClient
from hvsync_backend.app import create_app
from hvsync_backend.config import Settings
from hvsync_backend.metrics import VERBS
from hvsync_backend.wire import STAGE_ROUTES
from prometheus_client.parser import text_string_to_metric_families
from support import HV, INV, fake_proxmox, parse_stream

DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana-hvsync.json"


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: the metrics do not depend on the database (the auth tests cover both)."""
    return f"sqlite:///{tmp_path / 'data' / 'hvsync.db'}"


def scrape(
    client: Any, headers: dict[str, str] | None = None
) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] from the exposition, parsed by prometheus_client's own parser."""
    r = client.get("/metrics", headers=headers or {})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            samples[sample.name].append((dict(sample.labels), sample.value))
    return samples


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0.0 when there is none)."""
    return sum(v for got, v in samples.get(name, []) if labels.items() <= got.items())


def run_devices(backend: Any, auth: dict[str, str]) -> dict[str, Any]:
    """Store the NetBox and Proxmox endpoints, run the devices stage through its stream, return `complete`."""
    backend.context.proxmox.transport_factory = lambda target: httpx.MockTransport(fake_proxmox)
    netbox = FakeNetBox(
        rows={"plugins/hvsync/hv-endpoints": [{"id": 7, "name": HV["name"], "backend_id": 1}]}
    )
    backend.context.netbox_transport = netbox.transport
    c = backend.client
    assert c.post("/inventory/endpoint", headers=auth, json=INV).status_code == 201
    r = c.post("/hv/endpoints", headers=auth, json={**HV, "access_methods": ["token"], "max_retries": 0})
    assert r.status_code == 201, r.text
    r = c.get(STAGE_ROUTES["devices"], headers=auth)
    assert r.status_code == 200, r.text
    frames = parse_stream(r.text)
    assert frames[-1].event == "complete"
    assert sum(netbox.requests.values()) > 0
    return frames[-1].data


def test_metrics_need_the_key_by_default(backend, auth) -> None:
    r = backend.client.get("/metrics")
    assert r.status_code == 401
    assert r.json() == {"detail": "Invalid API key"}
    assert "hvsync_" not in r.text
    r = backend.client.get("/metrics", headers={"X-Service-API-Key": "wrong-" + "x" * 40})
    assert r.status_code == 401 and r.json() == {"detail": "Invalid API key"}
    assert backend.client.get("/metrics", headers=auth).status_code == 200


def test_metrics_public_when_configured(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path / "d", bcrypt_rounds=4, metrics_public=True))
    try:
        with TestClient(app) as client:
            samples = scrape(client)
            assert value(samples, "hvsync_auth_keys_cached") == 0.0
            assert "hvsync_sync_runs_total" not in samples  # nothing ran yet: no series invented
            assert client.get("/auth/keys").status_code == 503  # only /metrics opened, not the API
    finally:
        app.state.context.engine.dispose()


def test_settings_read_metrics_public_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVSYNC_METRICS_PUBLIC", "true")
    assert Settings().metrics_public is True
    monkeypatch.delenv("HVSYNC_METRICS_PUBLIC")
    assert Settings().metrics_public is False


def test_stage_run_is_counted_like_its_complete_summary(backend, auth) -> None:
    complete = run_devices(backend, auth)
    assert complete["ok"] is True, complete
    summary = complete["summary"]
    assert summary["created"] >= 3  # the cluster and two nodes at least
    samples = scrape(backend.client, auth)

    assert value(samples, "hvsync_sync_runs_total", stage="devices", outcome="ok", dry_run="false") == 1.0
    assert value(samples, "hvsync_sync_runs_total", outcome="failed") == 0.0
    assert value(samples, "hvsync_sync_stage_duration_seconds_count", stage="devices", outcome="ok") == 1.0
    seconds = value(samples, "hvsync_sync_stage_duration_seconds_sum", stage="devices", outcome="ok")
    assert seconds == pytest.approx(complete["duration_ms"] / 1000, abs=0.05)

    for verb in VERBS:
        assert value(samples, "hvsync_netbox_objects_total", verb=verb) == summary[verb], verb
    kinds = {labels["kind"] for labels, _ in samples["hvsync_netbox_objects_total"]}
    assert {"cluster", "device"} <= kinds
    assert value(samples, "hvsync_netbox_objects_total", kind="device", verb="created") == 2.0

    for target in ("netbox", "proxmox"):
        assert value(samples, "hvsync_upstream_requests_total", target=target) > 0, target
        count = value(samples, "hvsync_upstream_request_duration_seconds_count", target=target)
        assert count == value(samples, "hvsync_upstream_requests_total", target=target)
    assert value(samples, "hvsync_upstream_requests_total", target="netbox", method="GET", status="200") > 0
    assert value(samples, "hvsync_upstream_requests_total", target="netbox", method="POST", status="201") > 0
    assert value(samples, "hvsync_upstream_requests_total", target="proxmox", method="GET", status="200") > 0
    statuses = {labels["status"] for labels, _ in samples["hvsync_upstream_requests_total"]}
    assert all(re.fullmatch(r"\d{3}|error", s) for s in statuses), statuses


def test_dry_run_counts_the_run_but_no_objects(backend, auth) -> None:
    run_devices(backend, auth)
    before = value(scrape(backend.client, auth), "hvsync_netbox_objects_total")
    r = backend.client.get(STAGE_ROUTES["devices"] + "?dry_run=true", headers=auth)
    assert parse_stream(r.text)[-1].data["dry_run"] is True
    samples = scrape(backend.client, auth)
    assert value(samples, "hvsync_sync_runs_total", stage="devices", dry_run="true") == 1.0
    assert value(samples, "hvsync_netbox_objects_total") == before


def test_upstream_failures_are_counted_by_status_and_error(backend, auth) -> None:
    """A refused token is counted under Proxmox's status, an unreachable host under `error`."""
    unreachable = "192.0.2.99"

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    backend.context.proxmox.transport_factory = lambda target: httpx.MockTransport(
        refuse if target.host == unreachable else fake_proxmox
    )
    for name, ip, token in (
        ("bad-token (inv:1)", "192.0.2.98", "not-the-token"),
        ("down (inv:2)", unreachable, "x"),
    ):
        body = {**HV, "name": name, "ip_address": ip, "token_value": token, "max_retries": 0}
        assert backend.client.post("/hv/endpoints", headers=auth, json=body).status_code == 201
    backend.client.get("/hv/nodes/", headers=auth)
    samples = scrape(backend.client, auth)
    assert value(samples, "hvsync_upstream_requests_total", target="proxmox", status="401") >= 1
    assert value(samples, "hvsync_upstream_requests_total", target="proxmox", status="error") == 1
    assert (
        value(samples, "hvsync_upstream_request_duration_seconds_count", target="proxmox", status="error")
        == 1
    )
    assert value(samples, "hvsync_upstream_requests_total", target="netbox") == 0  # nothing asked NetBox


def test_wrong_keys_and_lockout_are_counted(backend, auth) -> None:
    c = backend.client
    assert c.get("/auth/keys").status_code == 401
    threshold = backend.settings.lockout_threshold
    wrong = {"X-Service-API-Key": "wrong-" + "z" * 40}
    codes = [c.get("/auth/keys", headers=wrong).status_code for _ in range(threshold + 1)]
    # one failure without a key, then wrong keys: the threshold-th failure locks, the next is refused
    assert codes == [401] * (threshold - 1) + [429, 429]
    backend.context.settings.metrics_public = True  # the locked IP cannot send its key; scrape openly
    samples = scrape(c)
    assert value(samples, "hvsync_auth_failures_total", reason="missing_key") == 1.0
    assert value(samples, "hvsync_auth_failures_total", reason="invalid_key") == threshold - 1
    assert value(samples, "hvsync_auth_failures_total", reason="locked") == 2.0
    assert value(samples, "hvsync_auth_lockouts_total") == 1.0


def test_keys_cached_gauge_follows_the_cache(backend, auth) -> None:
    assert backend.client.get("/auth/keys", headers=auth).status_code == 200
    samples = scrape(backend.client, auth)
    assert value(samples, "hvsync_auth_keys_cached") == float(len(backend.context.keys.cache)) >= 1.0
    backend.context.keys.cache.clear()
    backend.context.settings.metrics_public = True
    assert value(scrape(backend.client), "hvsync_auth_keys_cached") == 0.0


def test_no_secret_reaches_the_exposition(backend, auth) -> None:
    run_devices(backend, auth)
    backend.client.get("/auth/keys", headers={"X-Service-API-Key": "planted-secret-key-" + "s" * 30})
    r = backend.client.get("/metrics", headers=auth)
    assert r.status_code == 200
    planted = [auth["X-Service-API-Key"], "planted-secret-key-", INV["token"], HV["token_value"], "keyid1"]
    for secret in planted:
        assert secret not in r.text, secret
    for address in (INV["ip_address"], HV["ip_address"], INV["domain"], "testclient"):
        assert address not in r.text, address  # no hosts or client IPs in labels either


def test_every_series_the_dashboard_queries_exists(backend, auth) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert any(
        v.get("type") == "datasource" and v.get("query") == "prometheus"
        for v in dashboard["templating"]["list"]
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 5
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v.get("definition")]
    queried = {name for expr in exprs for name in re.findall(r"\bhvsync_[a-z_]+", expr)}
    run_devices(backend, auth)
    backend.client.get("/auth/keys")  # one auth failure, so that series exists too
    exposed = set(scrape(backend.client, auth))
    missing = queried - exposed
    assert not missing, f"the dashboard queries series the backend does not expose: {sorted(missing)}"
    for wanted in (
        "hvsync_sync_stage_duration_seconds_bucket",
        "hvsync_netbox_objects_total",
        "hvsync_upstream_request_duration_seconds_bucket",
        "hvsync_auth_failures_total",
        "hvsync_sync_runs_total",
    ):
        assert wanted in queried, wanted
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_a_run_that_cannot_start_counts_as_failed(backend, auth) -> None:
    """No NetBox endpoint stored: the stream still ends with `complete`, and the run is counted failed."""
    r = backend.client.get(STAGE_ROUTES["devices"], headers=auth)
    complete = parse_stream(r.text)[-1]
    assert complete.event == "complete" and complete.data["ok"] is False
    samples = scrape(backend.client, auth)
    assert value(samples, "hvsync_sync_runs_total", stage="devices", outcome="failed", dry_run="false") == 1.0
    assert value(samples, "hvsync_sync_runs_total", outcome="ok") == 0.0
    assert value(samples, "hvsync_sync_stage_duration_seconds_count") == 0.0  # no stage ran
