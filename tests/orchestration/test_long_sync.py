"""A sync that runs longer than five minutes completes on a stock NetBox (issue 39, "A stock NetBox").

NetBox's RQ worker kills a job after `RQ_DEFAULT_TIMEOUT`, 300 s unless configured; the test NetBox runs
on that default (tools/netbox_instance.py writes no RQ setting), so only the plugin's own job timeout
(netbox_hvsync.rules.job_timeout) lets this sync finish. The demo cluster is made slow, not big: the
session's emulator answers one Proxmox request at a time, each after `DELAY` seconds asleep on its event
loop (so the test costs little CPU). A full sync makes about 130 Proxmox requests, so it takes about
130 x `DELAY` seconds, well past 300.

Each single wait stays short of every timeout on the way: the backend keeps at most 8 Proxmox requests
of an endpoint in flight, so one waits at most 8 x `DELAY` = 22 s (the endpoint's request timeout is
30 s; the local reconciliation's longest part, the firewall, reads 8 paths in its 30 s); a stage stream
gets a keep-alive from the backend every 15 s (its read timeout is 45 s in `make test`).

`make test` runs this module in the background on its own NetBox instance (`long-sync`; tools/run-tests.sh,
`.netbox/long-sync.log`) and leaves it out of the orchestration run (`--ignore`); on its own:
`pytest tests/orchestration/test_long_sync.py`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from conftest import STAGES, NetBox, Plugin, assert_no_secrets

#: NetBox's default RQ job timeout, the limit this sync must outlast.
STOCK_RQ_TIMEOUT = 300
#: Seconds each Proxmox request waits (HVSYNC_LONG_SYNC_DELAY to change it), one request at a time.
DELAY = float(os.environ.get("HVSYNC_LONG_SYNC_DELAY", "2.75"))


@pytest.fixture
def slow_proxmox(emulator: Any) -> Iterator[float]:
    """The session's emulator, slowed down for this test only."""
    emulator.app.response_delay, emulator.app.concurrency = DELAY, 1
    try:
        yield DELAY
    finally:
        emulator.app.response_delay, emulator.app.concurrency = 0.0, None


def seconds_between(started: str, completed: str) -> float:
    return (datetime.fromisoformat(completed) - datetime.fromisoformat(started)).total_seconds()


def test_a_sync_longer_than_the_stock_rq_timeout_completes(
    netbox: NetBox, plugin: Plugin, slow_proxmox: float
) -> None:
    assert 8 * slow_proxmox < 30  # see the module docstring
    job = netbox.run_sync(timeout=3600)
    block = job["data"]["sync"]
    log = [entry["message"] for entry in job.get("log_entries") or []]
    assert job["status"]["value"] == "completed", (job["error"], block.get("errors"), log[-5:])
    assert [s["stage"] for s in block["stages"]] == STAGES
    assert all(s["ok"] and s["status"] == 200 for s in block["stages"]), block["stages"]
    assert block["reconciliation"]["ok"] is True, block["reconciliation"]
    took = seconds_between(job["started"], job["completed"])
    assert took > STOCK_RQ_TIMEOUT, f"the sync took {took:.0f} s: too short to prove anything"
    assert block["job_timeout"] >= 7200  # the plugin's own timeout, recorded with the run
    print(
        f"long sync: {took:.0f} s from started to completed; Proxmox: one request at a time, {DELAY} s each"
    )
    assert_no_secrets(job, plugin.planted)
