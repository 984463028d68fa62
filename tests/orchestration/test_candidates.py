"""SPEC 6.2 / 7.3: a backend reached by hostname and by IP. The job tries the hostname first, falls back
to the IP on transport failures, and when both fail reports the first backend-authored failure, else the
last transport failure.

The backend endpoint is pointed at `http://localhost:<proxy port>` with IP address 127.0.0.1: both reach
the fault proxy, which tells them apart by the `Host:` header, so each candidate can fail on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import PLUGIN_API, NetBox, Plugin, assert_no_secrets
from fault_proxy import Fault, FaultProxy

DEVICES = "/dcim/devices/create/stream"


@pytest.fixture
def two_candidates(netbox: NetBox, plugin: Plugin, faults: FaultProxy) -> Iterator[tuple[str, str]]:
    """The plugin's backend endpoint with a hostname URL and an IP address; restored afterwards."""
    port = faults.url.rsplit(":", 1)[1]
    be_path = f"{PLUGIN_API}backend-endpoints/{plugin.backend_endpoint['id']}/"
    ip = netbox.get("ipam/ip-addresses/", address="127.0.0.1/32")["results"][0]
    row = netbox.patch(be_path, {"backend_url": f"http://localhost:{port}", "ip_address": ip["id"]})
    assert row["backend_url"] == f"http://localhost:{port}" and row["ip_address"]["id"] == ip["id"]
    try:
        yield f"http://localhost:{port}", f"http://127.0.0.1:{port}"
    finally:
        faults.clear()
        netbox.patch(be_path, {"backend_url": faults.url, "ip_address": None})


def stage_of(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in job["data"]["sync"]["stages"] if s["stage"] == name)


def test_unreachable_hostname_falls_back_to_the_ip(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, two_candidates: tuple[str, str]
) -> None:
    hostname, ip = two_candidates
    faults.set_for_host("localhost", "/", Fault("drop"))
    job = netbox.run_sync(sync_types=["devices"])
    assert job["status"]["value"] == "completed", job["error"]
    sync = job["data"]["sync"]
    assert sync["backend_candidates"] == [
        {"address": hostname, "ok": False, "failure_kind": "transport", "error": "connection"},
        {"address": ip, "ok": True, "status": 200},
    ]
    assert stage_of(job, "devices")["ok"] is True
    hosts = {h.headers.get("Host", "").split(":")[0] for h in faults.hits if h.path.startswith(DEVICES)}
    assert hosts == {"127.0.0.1"}, "stages ran on the IP candidate only"
    assert any("did not answer at " + hostname in e["message"] for e in job["log_entries"])
    assert_no_secrets(job, plugin.planted)


def test_hostname_transport_failure_then_ip_application_failure_reports_the_backend_answer(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, two_candidates: tuple[str, str]
) -> None:
    hostname, ip = two_candidates
    # Both answer /health (the probe keeps the hostname); the stage fails differently on each.
    faults.set_for_host("localhost", DEVICES, Fault("drop"))
    faults.set_for_host("127.0.0.1", DEVICES, Fault("status", 400, {"detail": "injected 400 on the IP"}))
    job = netbox.run_sync(sync_types=["devices"])
    assert job["status"]["value"] == "failed"
    stage = stage_of(job, "devices")
    assert stage["status"] == 400 and stage["failure_kind"] == "application"
    assert "injected 400 on the IP" in stage["error"] and "injected 400 on the IP" in job["error"]
    assert [(c["address"], c["failure_kind"]) for c in stage["candidates"]] == [
        (hostname, "transport"),
        (ip, "application"),
    ]
    assert_no_secrets(job, plugin.planted)


def test_application_failure_on_the_hostname_is_final(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, two_candidates: tuple[str, str]
) -> None:
    hostname, _ip = two_candidates
    faults.set_for_host(
        "localhost", DEVICES, Fault("status", 400, {"detail": "injected 400 on the hostname"})
    )
    job = netbox.run_sync(sync_types=["devices"])
    stage = stage_of(job, "devices")
    assert stage["status"] == 400 and "injected 400 on the hostname" in stage["error"]
    assert [c["address"] for c in stage["candidates"]] == [hostname], "the IP is not tried"
    hosts = [h.headers.get("Host", "").split(":")[0] for h in faults.hits if h.path.startswith(DEVICES)]
    assert hosts == ["localhost"]


def test_both_transport_failures_report_the_last_one(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, two_candidates: tuple[str, str]
) -> None:
    hostname, ip = two_candidates
    faults.set_for_host("localhost", DEVICES, Fault("drop"))
    faults.set_for_host("127.0.0.1", DEVICES, Fault("no_complete"))
    job = netbox.run_sync(sync_types=["devices"])
    assert job["status"]["value"] == "failed"
    stage = stage_of(job, "devices")
    assert stage["failure_kind"] == "transport"
    assert "complete" in stage["error"], stage["error"]  # the IP's failure (stream ended), not the drop
    assert [(c["address"], c["failure_kind"]) for c in stage["candidates"]] == [
        (hostname, "transport"),
        (ip, "transport"),
    ]
    # a transport failure stops the loop; the job says which stages did not run
    assert job["data"]["sync"].get("skipped_stages") in (None, [])
    assert_no_secrets(job, plugin.planted)
