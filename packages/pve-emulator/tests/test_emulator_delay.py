"""``--response-delay`` and ``--concurrency`` (``running_emulator(response_delay=..., concurrency=...)``):
every API request waits before it is answered, asleep on the event loop, and at most N are handled at a
time, so a slow Proxmox can be played without using CPU (the plugin's long sync test,
tests/orchestration/test_long_sync.py)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from pve_emulator.cli import main, parser
from pve_emulator.testing import running_emulator

DELAY = 0.4


def test_each_request_waits_the_delay_and_waits_beside_the_others() -> None:
    with running_emulator(response_delay=DELAY) as pve:
        headers = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
        started = time.monotonic()
        answer = httpx.get(pve.api_url + "/nodes", headers=headers, timeout=10)
        one = time.monotonic() - started
        assert answer.status_code == 200 and answer.json()["data"][0]["node"]
        assert one >= DELAY

        async def eight() -> list[httpx.Response]:
            async with httpx.AsyncClient(headers=headers, timeout=10) as client:
                return list(await asyncio.gather(*(client.get(pve.api_url + "/version") for _ in range(8))))

        started = time.monotonic()
        answers = asyncio.run(eight())
        together = time.monotonic() - started
        assert [a.status_code for a in answers] == [200] * 8
        # asleep, not blocking: eight requests take about one delay, far less than eight
        assert DELAY <= together < 4 * DELAY


def timed_versions(url: str, count: int) -> float:
    """Seconds `count` concurrent GET /version take, all answered 200."""

    async def together() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            return list(await asyncio.gather(*(client.get(url + "/version") for _ in range(count))))

    started = time.monotonic()
    answers = asyncio.run(together())
    assert [a.status_code for a in answers] == [200] * count
    return time.monotonic() - started


def test_a_concurrency_of_one_answers_one_request_at_a_time() -> None:
    with running_emulator(response_delay=DELAY, concurrency=1) as pve:
        assert timed_versions(pve.api_url, 4) >= 4 * DELAY  # each waits its turn, then its delay
        pve.app.concurrency = 4  # a changed limit applies to the next requests
        assert timed_versions(pve.api_url, 4) < 3 * DELAY


def test_no_delay_and_no_limit_by_default() -> None:
    with running_emulator() as pve:
        assert pve.app.response_delay == 0.0 and pve.app.concurrency is None
        assert httpx.get(pve.api_url + "/version", timeout=10).status_code == 200


def test_the_cli_option_and_its_bounds() -> None:
    assert parser().parse_args(["serve", "--response-delay", "1.5"]).response_delay == 1.5
    assert parser().parse_args(["serve"]).response_delay == 0.0
    assert parser().parse_args(["serve", "--concurrency", "3"]).concurrency == 3
    assert parser().parse_args(["serve"]).concurrency is None
    for flag, bad in (("--response-delay", "-1"), ("--response-delay", "61"), ("--concurrency", "0")):
        with pytest.raises(SystemExit) as refused:
            main(["serve", flag, bad])
        assert refused.value.code == 2
