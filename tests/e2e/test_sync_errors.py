"""Failures reported truthfully through the backend's streams: NetBox unreachable or refusing the token,
Proxmox unreachable or refusing the token; secrets never in a frame; bootstrap status and reconcile."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import httpx
from conftest import API_KEY, Backend, NetBox
from pve_emulator.testing import running_emulator

VM_STAGE = "/virtualization/virtual-machines/create/stream"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def frames_text(frames: list[dict]) -> str:
    return json.dumps(frames)


def test_netbox_unreachable_is_reported_as_such(
    backend_factory: Callable[[], Backend], netbox: NetBox
) -> None:
    backend = backend_factory()
    with running_emulator(scenario="demo") as emu:
        backend.add_inventory(netbox, port=closed_port())
        backend.add_hv(emu, "demo (inv:51)")
        frames = backend.stream(VM_STAGE)
    done = frames[-1]["data"]
    assert done["ok"] is False
    assert done["error"]["source"] == "netbox"
    assert done["error"]["status"] is None
    assert "unreachable" in done["error"]["detail"].lower()
    text = frames_text(frames)
    assert netbox.token_parts[1] not in text and emu.token_secret not in text and API_KEY not in text


def test_netbox_refusing_the_token_reports_netboxs_own_status(
    backend_factory: Callable[[], Backend], netbox: NetBox
) -> None:
    backend = backend_factory()
    key, _ = netbox.token_parts
    planted = "x" * 10 + "PLANTEDnetboxTOKEN" + "y" * 12
    with httpx.Client() as c:
        upstream = c.get(
            f"{netbox.url}/api/status/", headers={"Authorization": f"Bearer nbt_{key}.{planted}"}
        ).status_code
    assert upstream in (401, 403)
    with running_emulator(scenario="demo") as emu:
        backend.add_inventory(netbox, token=planted)
        backend.add_hv(emu, "demo (inv:52)")
        frames = backend.stream(VM_STAGE)
    done = frames[-1]["data"]
    assert done["ok"] is False
    assert (done["error"]["source"], done["error"]["status"]) == ("netbox", upstream)
    assert planted not in frames_text(frames)


def test_proxmox_unreachable_and_bad_token_are_reported_per_endpoint(
    backend_factory: Callable[[], Backend], netbox: NetBox
) -> None:
    backend = backend_factory()
    backend.add_inventory(netbox)
    planted = "PLANTED-pve-secret-0123456789abcdef"
    with running_emulator(scenario="demo") as emu:
        down = backend.add_hv(emu, "gone (inv:53)", port=closed_port())
        frames = backend.stream(VM_STAGE, hv_endpoint_ids=str(down["id"]))
        done = frames[-1]["data"]
        assert done["ok"] is False
        assert (done["error"]["source"], done["error"]["status"], done["error"]["endpoint_id"]) == (
            "proxmox",
            None,
            down["id"],
        )
        assert done["summary"]["created"] == 0

        bad = backend.add_hv(emu, "bad token (inv:54)", token_value=planted)
        frames = backend.stream(VM_STAGE, hv_endpoint_ids=str(bad["id"]))
        done = frames[-1]["data"]
        assert done["ok"] is False
        assert (done["error"]["source"], done["error"]["status"], done["error"]["endpoint_id"]) == (
            "proxmox",
            401,
            bad["id"],
        )
        assert planted not in frames_text(frames)
        problem_steps = [f for f in frames if f["event"] == "step" and f["data"].get("problem")]
        assert problem_steps and problem_steps[0]["data"]["endpoint_id"] == bad["id"]


def test_bad_query_values_are_rejected_naming_the_field(backend_factory: Callable[[], Backend]) -> None:
    backend = backend_factory()
    for name, value in (("sync_mode_vm", "sometimes"), ("hv_endpoint_ids", "1,x"), ("dry_run", "perhaps")):
        r = backend.client.get(VM_STAGE, params={name: value}, headers=backend.headers)
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["query", name]
    r = backend.client.get(VM_STAGE)
    assert r.status_code == 401


def test_bootstrap_status_and_custom_field_reconcile(
    backend_factory: Callable[[], Backend], netbox: NetBox
) -> None:
    backend = backend_factory()
    r = backend.client.get("/extras/bootstrap-status", headers=backend.headers)
    assert r.status_code == 200
    assert r.json()["skipped"] is True and r.json()["reason"] == "no_inventory_session"
    backend.add_inventory(netbox)
    first = backend.client.post("/extras/custom-fields/reconcile", headers=backend.headers)
    assert first.status_code == 200, first.text
    assert first.json()["custom_fields"]["hvsync_key"] in ("created", "updated", "unchanged")
    again = backend.client.post("/extras/custom-fields/reconcile", headers=backend.headers)
    assert again.json() == {"ok": True, "dry_run": False, "custom_fields": {"hvsync_key": "unchanged"}}
    status = backend.client.get("/extras/bootstrap-status", headers=backend.headers).json()
    assert status["ok"] is True, status
    assert status["plugin_installed"] is True
    assert status["custom_fields"]["hvsync_key"] == {"present": True, "missing_object_types": []}
    assert "syncedvirtualmachine" in status["content_types"]
    # A real problem is 200 with ok false: the custom field loses an object type.
    [field] = netbox.all("extras/custom-fields", name="hvsync_key")
    # (NetBox purges the field's data from a removed object type: drop one no later test relies on)
    types = [t for t in field["object_types"] if t != "ipam.prefix"]
    with netbox.client() as c:
        c.patch(f"extras/custom-fields/{field['id']}/", json={"object_types": types}).raise_for_status()
    broken = backend.client.get("/extras/bootstrap-status", headers=backend.headers)
    assert broken.status_code == 200 and broken.json()["ok"] is False
    assert broken.json()["custom_fields"]["hvsync_key"]["missing_object_types"] == ["ipam.prefix"]
    fixed = backend.client.post("/extras/custom-fields/reconcile", headers=backend.headers).json()
    assert fixed["custom_fields"]["hvsync_key"] == "updated"
    assert backend.client.get("/extras/bootstrap-status", headers=backend.headers).json()["ok"] is True
