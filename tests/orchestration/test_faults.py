"""Fault matrix end to end: each fault lands in the job with the right failure_kind, status, attempt
records and message; planted secrets appear nowhere; a rerun after the fault converges.

Faults are injected by the proxy between NetBox's worker and the real backend. Stage faults target
`devices`, the first stage, and the job runs only that stage to stay fast.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import BACKEND_KEY, PLUGIN_API, NetBox, Plugin, assert_no_secrets
from fault_proxy import Fault, FaultProxy

DEVICES = "/dcim/devices/create/stream"


def failed_stage(job: dict[str, Any]) -> dict[str, Any]:
    stages = [s for s in job["data"]["sync"]["stages"] if not s["ok"]]
    assert len(stages) == 1, job["data"]["sync"]["stages"]
    return stages[0]


def run_devices(netbox: NetBox) -> dict[str, Any]:
    return netbox.run_sync(sync_types=["devices"])


@pytest.mark.parametrize(
    ("status", "attempts"),
    [(400, 1), (502, 3), (503, 3)],
)
def test_stage_status_is_propagated_and_only_5xx_retried(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, status: int, attempts: int
) -> None:
    faults.set(DEVICES, Fault("status", status, {"detail": f"injected {status}"}))
    job = run_devices(netbox)
    assert job["status"]["value"] == "failed"
    stage = failed_stage(job)
    assert stage["status"] == status and stage["failure_kind"] == "application"
    assert [a["attempt"] for a in stage["attempts"]] == list(range(1, attempts + 1))
    assert all(a["status"] == status and f"injected {status}" in a["detail"] for a in stage["attempts"])
    assert job["error"] == job["data"]["sync"]["errors"][-1]
    assert f"injected {status}" in job["error"] and "devices" in job["error"]
    assert faults.paths("GET").count(DEVICES) == attempts
    assert_no_secrets(job, plugin.planted)


def test_backend_still_bootstrapping_is_transport_and_retried(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    faults.set(
        DEVICES, Fault("status", 503, {"detail": "no API key configured; POST /auth/register-key first"})
    )
    stage = failed_stage(run_devices(netbox))
    assert stage["status"] == 503 and stage["failure_kind"] == "transport"
    assert len(stage["attempts"]) == 3
    assert "advisory" in stage


def test_401_rechecks_the_stored_key_read_only(netbox: NetBox, plugin: Plugin, faults: FaultProxy) -> None:
    faults.set(DEVICES, Fault("status", 401, {"detail": "invalid API key"}))
    job = run_devices(netbox)
    stage = failed_stage(job)
    assert stage["status"] == 401 and len(stage["attempts"]) == 1
    assert stage["key_recheck"]["ok"] is True  # the real backend still accepts the stored key
    after = faults.paths()[faults.paths().index(DEVICES) :]
    assert "/auth/keys" in after
    assert "/auth/register-key" not in after  # no bootstrap, no substitute key
    keys_calls = [h for h in faults.hits if h.path.startswith("/auth/keys")]
    assert {h.headers.get("X-Service-API-Key") for h in keys_calls} == {BACKEND_KEY}


@pytest.mark.parametrize(
    ("fault", "kind", "text"),
    [
        (Fault("no_complete"), "transport", "without complete"),
        (Fault("bad_complete"), "application", "unparseable complete"),
        (Fault("redirect"), "transport", "redirect refused"),
        (Fault("drop"), "transport", "connection"),
        (Fault("status", 502, raw="<html>502 Bad Gateway</html>"), "transport", "non-JSON"),
    ],
    ids=["no-complete", "bad-complete", "redirect", "connection-drop", "gateway-page"],
)
def test_stream_faults_are_classified(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, fault: Fault, kind: str, text: str
) -> None:
    faults.set(DEVICES, fault)
    job = run_devices(netbox)
    assert job["status"]["value"] == "failed"
    stage = failed_stage(job)
    assert stage["failure_kind"] == kind, stage
    assert text in job["error"], job["error"]
    if fault.kind == "redirect":
        assert len(stage["attempts"]) == 1 and stage["attempts"][0]["status"] == 307
    assert_no_secrets(job, plugin.planted)


def test_secrets_echoed_by_the_backend_are_redacted(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    echo = {
        "detail": f"bad request for key {BACKEND_KEY} and token {plugin.planted[1]}",
        "api_key": BACKEND_KEY,
        "token_value": plugin.planted[2],
        "nested": [{"loc": ["body", "token"], "input": plugin.planted[1], "msg": "bad"}],
    }
    faults.set(DEVICES, Fault("status", 400, echo))
    job = run_devices(netbox)
    assert job["status"]["value"] == "failed"
    assert "bad request for key" in job["error"]
    assert_no_secrets(job, plugin.planted)


def test_backend_down_blocks_in_preflight_with_b5(netbox: NetBox, plugin: Plugin, faults: FaultProxy) -> None:
    faults.set("/", Fault("drop"))
    job = run_devices(netbox)
    block = job["data"]["sync"]
    assert job["status"]["value"] == "failed"
    assert job["error"].startswith("Preflight blocked the sync: B5:")
    assert block["preflight"]["blocked"] == "B5" and block["stages"] == []
    assert not any(p.endswith("/create/stream") for p in faults.paths())
    assert_no_secrets(job, plugin.planted)


def test_rerun_after_a_fault_converges_without_duplicates(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    faults.set(DEVICES, Fault("no_complete"))
    assert run_devices(netbox)["status"]["value"] == "failed"
    faults.clear()
    job = run_devices(netbox)
    assert job["status"]["value"] == "completed", job["error"]
    assert len(netbox.get(PLUGIN_API + "hv-endpoints/")["results"]) == 1
    devices = netbox.count("dcim/devices/", tag="hvsync")
    assert devices > 0
    again = run_devices(netbox)
    assert again["status"]["value"] == "completed", again["error"]
    assert netbox.count("dcim/devices/", tag="hvsync") == devices
    assert again["data"]["sync"]["stages"][0]["summary"]["created"] == 0


def test_tls_failure_is_transport_and_keeps_the_stored_key(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    path = f"{PLUGIN_API}backend-endpoints/{plugin.backend_endpoint['id']}/"
    tls_url = faults.url.replace("http://", "https://")
    moved = netbox.patch(path, {"backend_url": tls_url})
    try:
        # re-targeting re-verifies the stored key after commit; the TLS handshake fails, the key stays,
        # and the row is not used until its target accepts the key (the job retries, then blocks: B1)
        assert moved["backend_url"] == tls_url
        row = netbox.get(path)
        assert row["key_state"]["value"] == "failed" and row["has_token"] is True
        faults.hits.clear()
        job = run_devices(netbox)
        assert job["status"]["value"] == "failed"
        assert job["error"].startswith("Preflight blocked the sync: B1: no usable backend endpoint; ")
        assert "its key was not accepted" in job["error"] and "(tls)" in job["error"], job["error"]
        assert not [h for h in faults.hits if h.path.startswith(("/inventory", "/hv/"))]  # no credentials
        assert_no_secrets(job, plugin.planted)
    finally:
        restored = netbox.patch(path, {"backend_url": faults.url})
    assert restored["backend_url"] == faults.url
    assert netbox.get(path)["key_state"]["value"] == "adopted"
    assert run_devices(netbox)["status"]["value"] == "completed"


def test_health_timeout_is_a_bounded_warning_not_a_stop(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    faults.set("/health", Fault("hang", seconds=7))
    job = run_devices(netbox)
    assert job["status"]["value"] == "completed", job["error"]
    phases = job["data"]["sync"]["preflight"]["phases"]
    assert {"phase": "health", "status": "warning"}.items() <= phases[0].items()
    assert "did not answer within the wait budget" in phases[0]["message"]
    assert any("did not answer within the wait budget" in e["message"] for e in job["log_entries"])
    assert job["data"]["sync"]["preflight"]["duration_ms"] < 20_000  # a ceiling, not a hang


def test_a_silent_stage_stream_times_out_as_transport(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    """A stream that starts and then sends nothing (not even the backend's 15 s keep-alive) fails after the
    plugin's `stream_read_timeout`, as a transport timeout, without waiting for the stream to end."""
    from conftest import STREAM_READ_TIMEOUT

    stall = STREAM_READ_TIMEOUT + 30
    faults.set(DEVICES, Fault("stall", seconds=stall))
    job = run_devices(netbox)
    assert job["status"]["value"] == "failed"
    stage = failed_stage(job)
    assert stage["failure_kind"] == "transport", stage
    assert len(stage["attempts"]) == 1, "a timeout is not retried (only statuses >= 500 are)"
    assert "timeout" in stage["attempts"][0]["detail"].lower(), stage["attempts"][0]
    assert STREAM_READ_TIMEOUT - 1 <= stage["attempts"][0]["elapsed_s"] < stall, stage["attempts"][0]
    assert_no_secrets(job, plugin.planted)
