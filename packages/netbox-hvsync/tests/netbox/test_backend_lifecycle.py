"""Disable and delete reach the backend (issue 39, C3), against a real backend process.

A gate forwarder in front of the backend records every request and can fail chosen ones (503), so a test
sees a failed disable or retirement and its retry at the next push or preflight.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from support import CANDIDATE

pytestmark = pytest.mark.django_db

HEADERS = {"X-Service-API-Key": CANDIDATE}


class Gate:
    """Forwards to `upstream`, recording `METHOD /path` (and bodies); requests matching `failing` get 503."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.hits: list[str] = []
        self.bodies: list[bytes] = []
        self.failing: re.Pattern[str] | None = None
        gate = self

        class Forward(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                hit = f"{self.command} {self.path.split('?', 1)[0]}"
                gate.hits.append(hit)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                gate.bodies.append(body or b"")
                if gate.failing is not None and gate.failing.fullmatch(hit):
                    payload, status = b'{"detail": "gate closed"}', 503
                else:
                    headers = {
                        k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
                    }
                    answer = requests.request(
                        self.command, gate.upstream + self.path, headers=headers, data=body, timeout=10
                    )
                    payload, status = answer.content, answer.status_code
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


@pytest.fixture
def gate(backend: str) -> Iterator[Gate]:
    made = Gate(backend)
    yield made
    made.server.shutdown()
    made.server.server_close()


@pytest.fixture
def adopted(gate: Gate):
    from netbox_hvsync.models import BackendEndpoint

    row = BackendEndpoint(name="b", url="http://127.0.0.1", port=gate.port)
    row.token = CANDIDATE
    row.save()
    row.refresh_from_db()
    assert row.key_state == "adopted"
    return row


def _inventory_rows(backend: str) -> list[dict]:
    return requests.get(backend + "/inventory/endpoint", headers=HEADERS, timeout=5).json()


def _hv_rows(backend: str) -> list[dict]:
    return requests.get(backend + "/hv/endpoints", headers=HEADERS, timeout=5).json()


def _inventory(commit, **fields):
    from netbox_hvsync.models import InventoryEndpoint

    inv = InventoryEndpoint(
        name="nb", domain="nb.example.net", port=8000, scheme="http", token_key="k1", **fields
    )
    inv.token = "nb-token-secret-" + "9" * 24
    with commit(execute=True):
        inv.save()
    return inv


def _hv(commit, name="pve"):
    from netbox_hvsync.models import HvEndpoint

    hv = HvEndpoint(name=name, domain="pve.example.net", username="root@pam", token_name="hvsync")
    hv.token_value = "pve-token-secret-0001"
    with commit(execute=True):
        hv.save()
    return hv


def test_disabling_the_inventory_endpoint_is_pushed(backend, adopted, django_capture_on_commit_callbacks):
    commit = django_capture_on_commit_callbacks
    inv = _inventory(commit)
    [row] = _inventory_rows(backend)
    assert row["enabled"] is True and row["scheme"] == "http" and row["has_token"]
    inv.enabled = False
    with commit(execute=True):
        inv.save()
    [row] = _inventory_rows(backend)
    assert row["enabled"] is False and row["has_token"]  # disabled, nothing else moved


def test_a_failed_disable_is_retried_by_the_next_push(
    backend, gate, adopted, django_capture_on_commit_callbacks
):
    commit = django_capture_on_commit_callbacks
    inv = _inventory(commit)
    gate.failing = re.compile(r"PUT /inventory/endpoint/\d+")
    inv.enabled = False
    with commit(execute=True):
        inv.save()
    assert _inventory_rows(backend)[0]["enabled"] is True  # the disable did not arrive
    gate.failing = None
    gate.hits.clear()
    _hv(commit)  # the next push (any endpoint save) retries it
    assert _inventory_rows(backend)[0]["enabled"] is False
    assert any(re.fullmatch(r"PUT /inventory/endpoint/\d+", hit) for hit in gate.hits)


def test_deleting_a_proxmox_endpoint_retires_its_backend_row(
    backend, adopted, django_capture_on_commit_callbacks
):
    from netbox_hvsync.models import PendingRetirement

    commit = django_capture_on_commit_callbacks
    hv = _hv(commit)
    [row] = _hv_rows(backend)
    assert row["enabled"] is True and row["has_token_value"] and row["name"].endswith(f"(inv:{hv.pk})")
    with commit(execute=True):
        hv.delete()
    [row] = _hv_rows(backend)
    assert row["enabled"] is False and not row["has_token_value"] and not row["has_password"]
    assert row["allow_template_builds"] is False
    assert not PendingRetirement.objects.exists()


def test_a_failed_retirement_is_kept_and_retried_by_the_next_push(
    backend, gate, adopted, django_capture_on_commit_callbacks
):
    from netbox_hvsync.models import PendingRetirement

    commit = django_capture_on_commit_callbacks
    hv = _hv(commit)
    pk = hv.pk
    gate.failing = re.compile(r"POST /hv/endpoints/\d+/retire")
    with commit(execute=True):
        hv.delete()
    [row] = _hv_rows(backend)
    assert row["enabled"] is True and row["has_token_value"]  # the retirement did not arrive
    pending = PendingRetirement.objects.get(hv_endpoint_pk=pk)
    assert pending.attempts == 1 and "503" in pending.last_error and CANDIDATE not in pending.last_error
    gate.failing = None
    _hv(commit, name="pve-other")  # the next push retries it
    retired = next(r for r in _hv_rows(backend) if r["name"].endswith(f"(inv:{pk})"))
    assert retired["enabled"] is False and not retired["has_token_value"]
    assert not PendingRetirement.objects.exists()


def test_the_preflight_retires_what_is_pending(backend, adopted, django_capture_on_commit_callbacks):
    """The next sync job's preflight retries a pending retirement before anything else is pushed."""
    from netbox_hvsync.backend.push import retire_pending
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.models import PendingRetirement
    from netbox_hvsync.rules.preflight import PreflightBlocked, http_steps, run_preflight

    commit = django_capture_on_commit_callbacks
    hv = _hv(commit)
    pk = hv.pk
    with commit(execute=False):  # the delete commits, its after-commit retirement never runs
        hv.delete()
    assert PendingRetirement.objects.filter(hv_endpoint_pk=pk).exists()
    resolved = resolve_backend()
    steps = http_steps(resolved.transport, lambda _sel: resolved.context, b"k" * 32)
    steps.retire_deleted = lambda ctx: retire_pending(resolved.transport, ctx)
    with pytest.raises(PreflightBlocked):  # no inventory endpoint: B2, after the retirement
        run_preflight(steps, inventory_endpoints=[], hv_endpoints=[])
    [row] = _hv_rows(backend)
    assert row["enabled"] is False and not row["has_token_value"]
    assert not PendingRetirement.objects.exists()


def test_a_job_verifies_only_the_backend_in_use(backend, gate):
    """Issue 39 (lockout): each job re-verified every never-accepted backend row, sending a refused key to
    its backend again and again. With an adopted row in use, no other row is asked anything."""
    from netbox_hvsync.backend.adoption import adopt_stored_keys
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.models import BackendEndpoint

    other = Gate(backend)
    try:
        refused = BackendEndpoint(name="a-refused", url="http://127.0.0.1", port=other.port, enabled=False)
        refused.token = "wrongKEY-" + "0" * 32
        refused.save()  # disabled: stored pending, no request
        BackendEndpoint.objects.filter(pk=refused.pk).update(enabled=True)  # enabled, key never accepted
        in_use = BackendEndpoint(name="b-in-use", url="http://127.0.0.1", port=gate.port)
        in_use.token = CANDIDATE
        in_use.save()
        assert refused.pk < in_use.pk and other.hits == []
        for _job in range(3):
            assert adopt_stored_keys() == []
            assert resolve_backend().row.pk == in_use.pk
        assert other.hits == []  # the refused key never went out again
        BackendEndpoint.objects.filter(pk=in_use.pk).update(enabled=False)
        reasons = adopt_stored_keys()  # no backend in use: the next candidate is verified (once per job)
        assert len(reasons) == 1 and "a-refused" in reasons[0] and "GET /auth/keys" in other.hits
    finally:
        other.server.shutdown()
        other.server.server_close()
