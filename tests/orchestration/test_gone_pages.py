"""A VM deleted in Proxmox, as an operator sees it in a real browser (issue 40): the run page counts it
gone, the VM's page carries the "Gone from Proxmox since ..." badge and links its deletion request, the
menu shows the pending count, and a second user approves the request on its page, which deletes the VM.

One setup for the module: a VM created in the emulator through Proxmox's API, synced, deleted through
the API, and a `virtual-machines` resync under `gone_policy: request-deletion`. The VM is this module's
own, so the demo cluster the other orchestration tests read ends as it began. Screenshots land in
.netbox/screenshots/ (docs/img/ with HVSYNC_UPDATE_SCREENSHOTS=1: the pictures of docs/plugin-operations.md
"Objects gone from Proxmox").
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conftest import PLUGIN_API, NetBox, Plugin
from test_sync_run_page import CHROMIUM, CHROMIUM_ARGS, SHOTS, assert_real_screenshot

REQUESTS = PLUGIN_API + "deletion-requests/"


@dataclass
class GoneVM:
    vm_id: int
    name: str
    job: dict[str, Any]
    request: dict[str, Any]
    approver: str
    approver_password: str


def proxmox(emulator: Any) -> httpx.Client:
    headers = {"Authorization": f"PVEAPIToken={emulator.token_id}={emulator.token_secret}"}
    return httpx.Client(base_url=emulator.url + "/api2/json", headers=headers, verify=False, timeout=30)


def wait_task(c: httpx.Client, node: str, upid: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = c.get(f"/nodes/{node}/tasks/{upid}/status").json()["data"]
        if status["status"] == "stopped":
            assert status.get("exitstatus") == "OK", status
            return
        time.sleep(0.1)
    raise AssertionError(f"task {upid} did not finish")


def approver_user(netbox: NetBox) -> tuple[str, str]:
    """A second user who may approve deletion requests (and nothing else of hvsync's)."""
    name, password = f"approver-{secrets.token_hex(3)}", "Approve-" + secrets.token_hex(8)
    user = netbox.post("users/users/", {"username": name, "password": password})
    netbox.post(
        "users/permissions/",
        {
            "name": f"approve deletions ({name})",
            "object_types": ["netbox_hvsync.deletionrequest"],
            "actions": ["view", "approve"],
            "users": [user["id"]],
        },
    )
    return name, password


@pytest.fixture(scope="module")
def gone_vm(netbox: NetBox, plugin: Plugin, emulator: Any) -> Iterator[GoneVM]:
    hv = f"{PLUGIN_API}hv-endpoints/{plugin.hv_endpoint['id']}/"
    before = netbox.get(hv)
    netbox.patch(hv, {"gone_policy": "request-deletion"})
    try:
        with proxmox(emulator) as c:
            node = c.get("/nodes").json()["data"][0]["node"]
            vmid = int(c.get("/cluster/nextid").json()["data"])
            name = f"gone-{vmid}"
            made = c.post(f"/nodes/{node}/qemu", data={"vmid": vmid, "name": name, "memory": 512})
            assert made.status_code == 200, made.text
            wait_task(c, node, made.json()["data"])
            first = netbox.run_sync(sync_types=["devices", "virtual-machines"])
            assert first["status"]["value"] == "completed", first["error"]
            [vm] = netbox.get("virtualization/virtual-machines/", name=name)["results"]

            gone = c.delete(f"/nodes/{node}/qemu/{vmid}")
            assert gone.status_code == 200, gone.text
            wait_task(c, node, gone.json()["data"])
            assert c.get(f"/nodes/{node}/qemu/{vmid}/config").status_code != 200
        job = netbox.run_sync(sync_types=["virtual-machines"])
        assert job["status"]["value"] == "completed", (job["error"], job["data"]["sync"].get("errors"))
        [request] = netbox.get(REQUESTS, object_id=vm["id"], status="pending")["results"]
        approver, password = approver_user(netbox)
        yield GoneVM(vm["id"], name, job, request, approver, password)
    finally:
        netbox.patch(hv, {"gone_policy": before["gone_policy"]["value"]})


def logged_in(browser: Any, user: str, password: str, netbox: NetBox) -> Any:
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, ignore_https_errors=True)
    page.set_default_timeout(30_000)
    page.goto(f"{netbox.url}/login/?next=/plugins/hvsync/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/plugins/hvsync/$"))
    return page


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        raise AssertionError(f"{CHROMIUM} is missing: the browser tests need Debian's chromium")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        made = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield made
        finally:
            made.close()


def stage_cells(page: Any, stage: str) -> dict[str, str]:
    """The run page's row of one stage, keyed by the table's column headers."""
    heads = [h.strip() for h in page.locator("#sync-run-stages thead th").all_text_contents()]
    row = page.locator(f'#sync-run-stages tbody tr[data-stage="{stage}"]')
    assert row.count() == 1, stage
    cells = [c.strip() for c in row.locator("td").all_text_contents()]
    return dict(zip(heads, cells, strict=True))


def test_the_run_page_the_badge_and_the_request_pages_show_the_gone_vm(
    gone_vm: GoneVM, browser: Any, netbox: NetBox
) -> None:
    summary = {s["stage"]: s["summary"] for s in gone_vm.job["data"]["sync"]["stages"]}["virtual-machines"]
    assert (summary["gone"], summary["deletion_requests"], summary["deleted"]) == (1, 1, 0), summary
    page = logged_in(browser, netbox.admin_user, netbox.admin_password, netbox)

    # the run page: the virtual-machines stage counts the VM gone and its deletion request
    page.goto(f"{netbox.url}/plugins/hvsync/sync-runs/{gone_vm.job['id']}/")
    page.wait_for_selector('#sync-run-body[data-status="completed"]')
    cells = stage_cells(page, "virtual-machines")
    assert cells["Status"] == "ok" and cells["gone"] == "1", cells
    assert cells["deletion_requests"] == "1" and cells["deleted"] == "0", cells
    run_shot = SHOTS / "gone-run-page.png"
    page.screenshot(path=str(run_shot), full_page=True)

    # the VM's page: still there, with the badge and a link to its open request
    page.goto(f"{netbox.url}/virtualization/virtual-machines/{gone_vm.vm_id}/")
    badge = page.locator("#hvsync-gone-badge")
    assert re.fullmatch(r"Gone from Proxmox since .+", badge.inner_text().strip()), badge.inner_text()
    link = page.locator("#hvsync-open-deletion-request")
    assert link.inner_text().strip() == f"Deletion request {gone_vm.request['id']} (Pending)"
    assert link.get_attribute("href") == f"/plugins/hvsync/deletion-requests/{gone_vm.request['id']}/"
    badge_shot = SHOTS / "gone-vm-badge.png"
    page.screenshot(path=str(badge_shot), full_page=True)

    # the list: the request is there, pending; the menu counts every pending request
    page.goto(f"{netbox.url}/plugins/hvsync/deletion-requests/?status=pending")
    row = page.locator("table tbody tr", has_text=gone_vm.name)
    assert row.count() == 1 and "Pending" in row.inner_text()
    pending = netbox.get(REQUESTS, status="pending", limit=1)["count"]
    assert page.locator("#hvsync-pending-deletions").first.text_content().strip() == str(pending)

    # the requester's own view of the request: Reject only (four eyes)
    link_url = f"{netbox.url}/plugins/hvsync/deletion-requests/{gone_vm.request['id']}/"
    page.goto(link_url)
    assert page.locator("#deletion-reject").is_visible()
    assert page.locator("#deletion-approve").count() == 0
    page.close()
    assert_real_screenshot(run_shot)
    assert_real_screenshot(badge_shot)


def test_a_second_user_approves_and_the_vm_is_deleted(gone_vm: GoneVM, browser: Any, netbox: NetBox) -> None:
    page = logged_in(browser, gone_vm.approver, gone_vm.approver_password, netbox)
    page.goto(f"{netbox.url}/plugins/hvsync/deletion-requests/{gone_vm.request['id']}/")
    assert gone_vm.name in page.inner_text("body")
    approve, reject = page.locator("#deletion-approve"), page.locator("#deletion-reject")
    assert approve.is_visible() and approve.inner_text().strip() == "Approve"
    assert reject.is_visible() and reject.inner_text().strip() == "Reject"
    for button in (approve, reject):  # the whole label shows beside the comment field, not clipped
        assert button.evaluate("el => el.scrollWidth <= el.clientWidth"), button.inner_text()
    comment = "checked in Proxmox: deleted on purpose"
    page.fill("#deletion-comment", comment)
    request_shot = SHOTS / "deletion-request.png"
    page.screenshot(path=str(request_shot), full_page=True)

    with page.expect_navigation():
        approve.click()
    text = page.inner_text("body")
    assert f"Deletion request {gone_vm.request['id']} applied" in text, text[:2000]
    assert page.locator("#deletion-approve").count() == 0  # decided: no buttons any more
    page.close()

    done = netbox.get(f"{REQUESTS}{gone_vm.request['id']}/")
    assert done["status"]["value"] == "applied", done
    assert done["decided_by"]["username"] == gone_vm.approver and done["comment"] == comment
    assert done["deleted_data"]["object"]["id"] == gone_vm.vm_id
    with netbox.client() as c:
        assert c.get(f"virtualization/virtual-machines/{gone_vm.vm_id}/").status_code == 404
    changes = netbox.get(
        "core/object-changes/",
        changed_object_type="virtualization.virtualmachine",
        changed_object_id=gone_vm.vm_id,
        action="delete",
    )["results"]
    assert [c["user_name"] for c in changes] == [gone_vm.approver]
    assert_real_screenshot(request_shot)
