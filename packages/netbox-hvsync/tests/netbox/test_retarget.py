"""Retargeting keeps no secret where it should not go (issue 39, C2), against a real backend process and a
trap server on loopback that records everything that reaches it.

- editing only an endpoint's domain pushes its secret with the new target (the backend needs it: C2);
- the IP address a backend endpoint reaches as its failover address can change in IPAM without the
  endpoint being saved: the key goes there only after the address passed the failover check;
- changing an IP address an endpoint links to needs permission to change that endpoint, obeys the
  endpoint host rules, and re-targets the endpoint with its secret.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from support import CANDIDATE, free_port, token_client

pytestmark = pytest.mark.django_db

HEADERS = {"X-Service-API-Key": CANDIDATE}
PVE_SECRET = "pve-token-secret-retarget-0001"


class Trap:
    """Answers every request 200 `{}` and records it whole (request line, headers, body)."""

    def __init__(self, host: str, port: int) -> None:
        self.seen: list[str] = []
        trap = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode(errors="replace") if length else ""
                trap.seen.append(f"{self.command} {self.path}\n{self.headers}\n{body}")
                payload = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def everything(self) -> str:
        return "\n".join(self.seen)


def _hv_rows(backend: str) -> list[dict]:
    return requests.get(backend + "/hv/endpoints", headers=HEADERS, timeout=5).json()


def _adopted_backend(backend: str, **fields):
    from netbox_hvsync.models import BackendEndpoint

    port = int(backend.rsplit(":", 1)[1])
    row = BackendEndpoint(name="b", port=port, **fields)
    row.token = CANDIDATE
    row.save()
    row.refresh_from_db()
    assert row.key_state == "adopted"
    return row


def _hv(commit, **fields):
    from netbox_hvsync.models import HvEndpoint

    hv = HvEndpoint(name="pve", username="root@pam", token_name="hv", **fields)
    hv.token_value = PVE_SECRET
    with commit(execute=True):
        hv.save()
    return hv


def test_a_domain_only_edit_pushes_the_secret_with_the_new_target(
    backend, django_capture_on_commit_callbacks
):
    commit = django_capture_on_commit_callbacks
    _adopted_backend(backend, url="http://127.0.0.1")
    hv = _hv(commit, domain="pve-old.example.net")
    hv.domain = "pve-new.example.net"
    with commit(execute=True):
        hv.save()
    [row] = _hv_rows(backend)
    # the backend refuses (422) or wipes a moved endpoint's secret unless the push carries it (C2)
    assert row["domain"] == "pve-new.example.net" and row["has_token_value"] is True


@pytest.fixture
def trap(backend) -> Iterator[Trap]:
    port = int(backend.rsplit(":", 1)[1])
    made = Trap("127.0.0.2", port)  # the same port as the backend, on another loopback address
    yield made
    made.server.shutdown()
    made.server.server_close()


def test_the_key_never_reaches_a_failover_address_that_fails_the_check(backend, trap):
    """The backend endpoint has a URL (localhost) and a failover IP; the IP is moved in IPAM to the trap."""
    from ipam.models import IPAddress
    from netbox_hvsync.backend.failover import probe_candidates, run_on_candidates
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.rules.stage_runner import StageRun

    ip = IPAddress.objects.create(address="127.0.0.1/32")
    row = _adopted_backend(backend, url="http://localhost", ip_address=ip)
    ip.address = "127.0.0.2/32"  # no endpoint save: the proof of the URL target still holds
    ip.save()
    resolved = resolve_backend()
    assert resolved is not None and resolved.row.pk == row.pk
    trap_ctx = resolved.all_candidates[1]
    assert trap_ctx.base_url.startswith("http://127.0.0.2:")
    # the hostname goes down (a closed port stands for it): only the moved failover address answers
    dead_ctx = replace(resolved.all_candidates[0], base_url=f"http://127.0.0.1:{free_port()}")
    down = replace(resolved, context=dead_ctx, candidates=(dead_ctx, trap_ctx))
    try:
        picked, probes = probe_candidates(down)  # the preflight's choice of address
        assert picked.context == dead_ctx, probes  # the trap answered /health but failed the check
        assert probes[-1] == {"address": trap_ctx.base_url, "ok": False, "error": "failed the failover check"}
        tried: list[str] = []

        def run_one(ctx):  # a stage on the address in use fails with a transport failure
            tried.append(ctx.base_url)
            return StageRun(
                "devices", False, 0, message="down", failure_payload={"failure_kind": "transport"}
            )

        run_on_candidates(down, run_one)
        assert tried == [dead_ctx.base_url]  # the trap was never handed the stage (nor the key)
    finally:
        resolved.transport.close()
    assert CANDIDATE not in trap.everything()


def test_changing_a_linked_ip_needs_permission_to_change_the_endpoint(
    backend, superuser, django_capture_on_commit_callbacks
):
    from django.contrib.contenttypes.models import ContentType
    from ipam.models import IPAddress
    from users.models import ObjectPermission, User

    commit = django_capture_on_commit_callbacks
    _adopted_backend(backend, url="http://127.0.0.1")
    ip = IPAddress.objects.create(address="10.0.0.5/32")
    hv = _hv(commit, ip_address=ip)
    assert _hv_rows(backend)[0]["ip_address"] == "10.0.0.5"

    editor = User.objects.create_user(username="ipam-editor")
    permission = ObjectPermission.objects.create(name="edit ips", actions=["view", "change"])
    permission.object_types.set([ContentType.objects.get(app_label="ipam", model="ipaddress")])
    permission.users.add(editor)
    url = f"/api/ipam/ip-addresses/{ip.pk}/"
    refused = token_client(editor).patch(url, {"address": "10.0.0.66/32"}, format="json")
    assert refused.status_code == 400, refused.content
    assert "Proxmox endpoint 'pve'" in json.dumps(refused.json())
    ip.refresh_from_db()
    assert str(ip.address) == "10.0.0.5/32"

    admin = token_client(superuser)
    hostile = admin.patch(url, {"address": "169.254.169.254/32"}, format="json")
    assert hostile.status_code == 400 and "link-local" in json.dumps(hostile.json())

    with commit(execute=True):
        moved = admin.patch(url, {"address": "10.0.0.6/32"}, format="json")
    assert moved.status_code == 200, moved.content
    [row] = _hv_rows(backend)  # re-targeted on the backend, its secret pushed with the new target
    assert row["ip_address"] == "10.0.0.6" and row["has_token_value"] is True
    assert hv.pk and str(IPAddress.objects.get(pk=ip.pk).address) == "10.0.0.6/32"
