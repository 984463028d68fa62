"""The sync-run page in a real browser: it follows a running sync live (HTMX, no reload) and shows the
finished run's stages with the numbers of `job.data`.

Headless Debian chromium driven by playwright; the fault proxy slows every stage stream so the job stays
running long enough to watch. Screenshots land in .netbox/screenshots/ (docs/img/ with
HVSYNC_UPDATE_SCREENSHOTS=1: the pictures of docs/plugin.md "Sync-run page").
"""

from __future__ import annotations

import os
import re
import struct
import time
from pathlib import Path
from typing import Any

from conftest import PLUGIN_API, REPO, STAGES, NetBox, Plugin
from fault_proxy import Fault, FaultProxy
from hvsync_backend.wire import STAGE_ROUTES

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Delay per streamed chunk: stages take seconds each, so the page has time to poll several times.
SLOW_CHUNK_S = 0.3
#: Screenshots go beside the test instances; HVSYNC_UPDATE_SCREENSHOTS=1 writes the docs' own copies.
SHOTS = REPO / ("docs/img" if os.environ.get("HVSYNC_UPDATE_SCREENSHOTS") == "1" else ".netbox/screenshots")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def assert_real_screenshot(path: Path) -> None:
    width, height = png_size(path)
    assert width >= 1000 and height >= 600, (width, height)
    assert path.stat().st_size > 20_000, path.stat().st_size  # a blank page compresses to a few KB


def wait_for_job(netbox: NetBox, pk: int, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = netbox.get(f"core/jobs/{pk}/")
        if row["status"]["value"] in ("completed", "failed", "errored"):
            return row
        time.sleep(1)
    raise AssertionError(f"job {pk} did not finish within {timeout}s")


def test_sync_run_page_follows_a_running_sync_live(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    if not CHROMIUM.exists():
        raise AssertionError(f"{CHROMIUM} is missing: the sync-run page test needs Debian's chromium")
    from playwright.sync_api import sync_playwright

    assert set(STAGE_ROUTES) == set(STAGES)
    for route in STAGE_ROUTES.values():
        faults.set(route, Fault("slow", seconds=SLOW_CHUNK_S))
    queued = netbox.post(PLUGIN_API + "sync/schedule/", {})
    run_url = f"{netbox.url}/plugins/hvsync/sync-runs/{queued['id']}/"
    SHOTS.mkdir(parents=True, exist_ok=True)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, ignore_https_errors=True)
            page.set_default_timeout(60_000)
            page.goto(f"{netbox.url}/login/?next=/plugins/hvsync/")
            page.fill("input[name=username]", netbox.admin_user)
            page.fill("input[name=password]", netbox.admin_password)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/plugins/hvsync/$"))

            page.goto(run_url)
            # a stage is running: the live card names it (index/of and stage slug)
            page.wait_for_selector("#progress-index", timeout=180_000)
            body = page.locator("#sync-run-body")
            assert body.get_attribute("hx-trigger") == "every 2s"
            index_text = page.inner_text("#progress-index")
            stage_text = page.inner_text("#progress-stage")
            assert re.fullmatch(r"\d+/13", index_text), index_text
            assert stage_text in STAGES, stage_text
            first_progress = page.inner_text("#sync-run-progress")
            page.evaluate("window.__hvsyncMarker = 'still-the-same-document'")

            # the content changes without a reload: the marker survives, one navigation only
            page.wait_for_function(
                "prev => { const el = document.querySelector('#sync-run-progress');"
                " return el !== null && el.innerText !== prev; }",
                arg=first_progress,
                timeout=120_000,
            )
            assert page.evaluate("window.__hvsyncMarker") == "still-the-same-document"
            assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
            assert page.inner_text("#progress-stage") in STAGES
            # a stage in mid-stream: frames counted so far (saved at most once a second)
            page.wait_for_function(
                "() => { const el = document.querySelector('#progress-frames');"
                " return el !== null && Number(el.innerText) > 0; }",
                timeout=60_000,
            )
            assert page.evaluate("window.__hvsyncMarker") == "still-the-same-document"
            running_shot = SHOTS / "sync-run-running.png"
            page.screenshot(path=str(running_shot), full_page=True)

            job = wait_for_job(netbox, queued["id"])
            assert job["status"]["value"] == "completed", (job["error"], job["data"]["sync"].get("errors"))
            # the page notices the end by itself and stops polling
            page.wait_for_selector('#sync-run-body[data-status="completed"]', timeout=30_000)
            assert page.evaluate("window.__hvsyncMarker") == "still-the-same-document"
            assert page.locator("#sync-run-body").get_attribute("hx-trigger") is None
            assert page.locator("#sync-run-progress").count() == 0

            # every stage with ok and the numbers of job.data, read from the DOM
            rows = page.locator("#sync-run-stages tbody tr[data-stage]")
            by_stage: dict[str, list[str]] = {}
            for i in range(rows.count()):
                cells = [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
                by_stage[cells[1]] = cells
            assert list(by_stage) == STAGES
            for entry in job["data"]["sync"]["stages"]:
                cells = by_stage[entry["stage"]]
                summary = entry["summary"]
                assert cells[0] == "demo cluster" and cells[2] == "ok", cells
                assert cells[4] == str(summary["created"]) and cells[6] == str(summary["unchanged"]), cells
            assert page.locator("#sync-run-timeline > div").count() == len(STAGES)
            assert page.locator("#sync-run-changelog").count() == 1
            finished_shot = SHOTS / "sync-run-finished.png"
            page.screenshot(path=str(finished_shot), full_page=True)
        finally:
            browser.close()
    assert_real_screenshot(running_shot)
    assert_real_screenshot(finished_shot)
