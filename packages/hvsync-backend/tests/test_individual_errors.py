"""`POST /sync/individual/{kind}` answers JSON for every outcome: an unexpected exception inside the run
is the run's failed `complete` with status 500 (as the streams end with `complete`), never the server's
plain-text "Internal Server Error", and no credential-looking text from the exception reaches the body."""

from __future__ import annotations

import logging

import pytest
from fake_netbox import FakeNetBox
from hvsync_backend.services import sync_runs
from support import HV, INV


@pytest.mark.parametrize("kind", ["vm", "cluster", "task-history"])
def test_an_unexpected_error_in_an_individual_run_is_a_json_500(backend, auth, monkeypatch, caplog, kind):
    c = backend.client
    backend.context.netbox_transport = FakeNetBox().transport
    assert c.post("/inventory/endpoint", headers=auth, json=INV).status_code == 201
    assert c.post("/hv/endpoints", headers=auth, json=HV).status_code == 201

    async def broken(*args, **kwargs):
        raise RuntimeError("index out of range near db_password=hunter2-secret")

    monkeypatch.setattr(sync_runs, "execute", broken)
    params = {"vm": {"vmid": "100"}, "cluster": {}, "task-history": {"vmid": "100"}}[kind]
    with caplog.at_level(logging.ERROR, logger="hvsync_backend.sync"):
        r = c.post(f"/sync/individual/{kind}", headers=auth, params=params)
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["stage"] == f"individual-{kind}" and body["ok"] is False and body["dry_run"] is False
    assert body["error"] == {"source": "backend", "status": None, "detail": "internal error: RuntimeError"}
    assert body["summary"]["created"] == 0 and body["errors"] == [body["error"]]
    assert "hunter2" not in r.text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "individual" in logged and "RuntimeError" in logged and "hunter2" not in logged


def test_unknown_endpoint_ids_stay_a_404(backend, auth):
    backend.context.netbox_transport = FakeNetBox().transport
    backend.client.post("/inventory/endpoint", headers=auth, json=INV)
    r = backend.client.post("/sync/individual/cluster", headers=auth, params={"hv_endpoint_ids": "77"})
    assert r.status_code == 404 and r.json() == {"detail": "unknown hv endpoint id(s): 77"}


@pytest.mark.parametrize("node", ["a/b", "a\x00b", "-node", "node-", "n" * 64, "..", "a b"])
def test_a_upid_naming_no_possible_node_is_refused_before_any_read(backend, auth, node):
    netbox = FakeNetBox()
    backend.context.netbox_transport = netbox.transport
    backend.client.post("/inventory/endpoint", headers=auth, json=INV)
    upid = f"UPID:{node}:0000A1B2:0001C3D4:65000000:qmstart:100:root@pam:"
    r = backend.client.post("/sync/individual/task-history", headers=auth, params={"upid": upid})
    assert r.status_code == 422, r.text
    assert "upid" in r.text and "expected a Proxmox UPID" in r.text
