"""/docs and /redoc render in a real browser with the network cut: every asset comes from the emulator.

Chromium runs with DNS disabled for every host but 127.0.0.1, and each request to another origin is
aborted and recorded; the pages must render their operations all the same, having asked for nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, sync_playwright
from pve_emulator.testing import EmulatorHandle

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
RENDER_TIMEOUT_MS = 120_000  # 646 operations on a shared 2-core machine


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install chromium`")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


class OffHost:
    """Aborts and records every request that does not go to the emulator's own origin."""

    def __init__(self, pve: EmulatorHandle) -> None:
        self.origin = (pve.scheme, pve.host, pve.port)
        self.attempted: list[str] = []
        self.served: list[str] = []

    def __call__(self, route: Route) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if (parts.scheme, parts.hostname, parts.port) == self.origin:
            self.served.append(parts.path)
            route.continue_()
        else:
            self.attempted.append(url)
            route.abort()


def _open(browser: Browser, pve: EmulatorHandle, path: str) -> tuple[Page, OffHost, list[str]]:
    context = browser.new_context()
    guard = OffHost(pve)
    context.route("**/*", guard)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(pve.url + path, wait_until="load", timeout=RENDER_TIMEOUT_MS)
    return page, guard, errors


def test_swagger_ui_renders_the_operations_offline(browser: Browser, pve: EmulatorHandle) -> None:
    page, guard, errors = _open(browser, pve, "/docs")
    try:
        op = page.locator('.opblock-summary-path[data-path="/api2/json/nodes/{node}/qemu"]').first
        op.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
        assert page.locator(".opblock-tag", has_text="nodes").count() >= 1
        assert page.locator(".info .title").first.inner_text().startswith("Proxmox VE API emulator")
        page.wait_for_load_state("networkidle", timeout=RENDER_TIMEOUT_MS)
    finally:
        page.context.close()
    assert guard.attempted == []
    assert {"/docs-static/swagger-ui-bundle.js", "/docs-static/swagger-ui.css", "/openapi.json"} <= set(
        guard.served
    )
    assert errors == []


def test_redoc_renders_the_operations_offline(browser: Browser, pve: EmulatorHandle) -> None:
    page, guard, errors = _open(browser, pve, "/redoc")
    try:
        title = page.locator("h1", has_text="Proxmox VE API emulator").first
        title.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
        menu = page.locator(".menu-content")
        menu.get_by_text("nodes", exact=True).first.wait_for(timeout=RENDER_TIMEOUT_MS)
        assert menu.get_by_text("cluster", exact=True).count() >= 1
        page.wait_for_load_state("networkidle", timeout=RENDER_TIMEOUT_MS)
    finally:
        page.context.close()
    assert guard.attempted == []
    assert {"/docs-static/redoc.standalone.js", "/openapi.json"} <= set(guard.served)
    assert errors == []
