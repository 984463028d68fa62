"""Key adoption around BackendEndpoint saves and push on save (SPEC 5.2, 4.5 push, 6.5), against a real
backend process (the workspace's `hvsync-backend serve`, fresh data directory per test).

Tests run inside a rolled-back transaction, so post-commit work is driven explicitly with
`django_capture_on_commit_callbacks`: "nothing before commit" is then directly observable.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import requests
from support import API, CANDIDATE, free_port

pytestmark = pytest.mark.django_db

OTHER = "otherKEY-" + "9ab3" * 10


def needs_bootstrap(url: str) -> bool:
    return bool(requests.get(url + "/auth/bootstrap-status", timeout=5).json()["needs_bootstrap"])


def key_accepted(url: str, key: str) -> bool:
    return requests.get(url + "/auth/keys", headers={"X-Service-API-Key": key}, timeout=5).status_code == 200


def test_explicit_candidate_is_verified_before_persistence_and_bootstraps_once(api, backend):
    from netbox_hvsync.models import BackendEndpoint

    assert needs_bootstrap(backend)
    created = api.post(
        API + "backend-endpoints/", {"name": "b", "backend_url": backend, "token": CANDIDATE}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["key_state"]["value"] == "adopted"
    assert created.json()["key_fingerprint"].startswith("v1:") and CANDIDATE not in created.content.decode()
    assert not needs_bootstrap(backend) and key_accepted(backend, CANDIDATE)  # registered before the row
    row = BackendEndpoint.objects.get(pk=created.json()["id"])
    assert row.token == CANDIDATE

    # an initialized backend: a different candidate is checked with GET /auth/keys, never bootstrapped
    refused = api.patch(f"{API}backend-endpoints/{row.pk}/", {"token": OTHER}, format="json")
    assert refused.status_code == 400
    body = refused.content.decode()
    assert "token" in body and "rejected the key" in body and OTHER not in body
    row.refresh_from_db()
    assert row.token == CANDIDATE and row.key_state == "adopted"  # the stored value survived
    assert not key_accepted(backend, OTHER)


def test_unreachable_backend_refuses_the_save_and_keeps_the_stored_key(api, backend):
    from netbox_hvsync.models import BackendEndpoint

    created = api.post(
        API + "backend-endpoints/", {"name": "b", "backend_url": backend, "token": CANDIDATE}, format="json"
    )
    pk = created.json()["id"]
    dead = f"http://127.0.0.1:{free_port()}"
    moved = api.patch(f"{API}backend-endpoints/{pk}/", {"backend_url": dead, "token": OTHER}, format="json")
    assert moved.status_code == 400 and "unreachable" in moved.json()["token"][0]
    assert OTHER not in moved.content.decode()
    row = BackendEndpoint.objects.get(pk=pk)
    assert row.url == backend and row.token == CANDIDATE


def test_redirects_are_refused_on_adoption(api):
    hits: list[str] = []

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        refused = api.post(
            API + "backend-endpoints/", {"name": "r", "backend_url": url, "token": CANDIDATE}, format="json"
        )
    finally:
        server.shutdown()
    assert refused.status_code == 400 and "redirect refused" in refused.json()["token"][0]
    assert hits == ["/"]  # one request, never followed


def test_bad_candidate_is_refused_without_a_request_naming_the_field(api):
    refused = api.post(
        API + "backend-endpoints/",
        {"name": "x", "backend_url": "http://127.0.0.1:9", "token": "short\r\nX-Injected: 1"},
        format="json",
    )
    assert refused.status_code == 400 and list(refused.json()) == ["token"]
    assert "X-Injected" not in refused.content.decode()


def test_keyless_enabled_row_is_pending_and_configured_only_after_commit(
    backend, django_capture_on_commit_callbacks
):
    from netbox_hvsync.models import BackendEndpoint

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        row = BackendEndpoint.objects.create(name="auto", url=backend)
    assert row.key_state == "pending" and row.key_fingerprint == ""
    generated = row.token
    assert len(generated) == 64 and generated not in row.token_ciphertext
    assert needs_bootstrap(backend)  # nothing was sent before commit
    assert callbacks  # the configuration waits for the commit (NetBox may queue its own callbacks too)
    for callback in callbacks:
        callback()
    row.refresh_from_db()
    assert row.key_state == "adopted" and row.key_fingerprint.startswith("v1:")
    assert key_accepted(backend, generated) and row.token == generated


def test_new_disabled_row_is_stored_keyless_without_any_request(backend, django_capture_on_commit_callbacks):
    from netbox_hvsync.models import BackendEndpoint

    with django_capture_on_commit_callbacks(execute=True):
        row = BackendEndpoint.objects.create(name="off", url=backend, enabled=False)
    assert row.token_ciphertext == "" and needs_bootstrap(backend)


def test_inventory_and_hv_saves_push_after_commit(backend, django_capture_on_commit_callbacks):
    from netbox_hvsync.models import BackendEndpoint, HvEndpoint, InventoryEndpoint

    be = BackendEndpoint(name="b", url=backend)
    be.token = CANDIDATE
    be.save()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        inv = InventoryEndpoint(name="nb", domain="netbox.example.net", port=443, token_key="abc")
        inv.token = "inventory-secret-token-0001"
        inv.save()
    assert (
        requests.get(
            backend + "/inventory/endpoint", headers={"X-Service-API-Key": CANDIDATE}, timeout=5
        ).json()
        == []
    )
    for callback in callbacks:
        callback()
    rows = requests.get(
        backend + "/inventory/endpoint", headers={"X-Service-API-Key": CANDIDATE}, timeout=5
    ).json()
    assert len(rows) == 1 and rows[0]["domain"] == "netbox.example.net"
    inv.refresh_from_db()
    assert inv.pushed_credential_fingerprint.startswith("v1:")

    with django_capture_on_commit_callbacks(execute=True):
        hv = HvEndpoint(
            name="pve",
            domain="pve.example.net",
            username="root@pam",
            token_name="hvsync",
            allow_template_builds=True,
        )
        hv.token_value = "pve-secret-0001"
        hv.save()
    hv.refresh_from_db()
    rows = requests.get(backend + "/hv/endpoints", headers={"X-Service-API-Key": CANDIDATE}, timeout=5).json()
    assert [r["name"] for r in rows] == [f"pve (inv:{hv.pk})"]
    assert hv.backend_id == rows[0]["id"] and hv.template_build_grant_confirmed is True
    # a second save PUTs the same row (identity by suffix), and revoking the grant is confirmed
    with django_capture_on_commit_callbacks(execute=True):
        hv.allow_template_builds = False
        hv.save()
    hv.refresh_from_db()
    rows = requests.get(backend + "/hv/endpoints", headers={"X-Service-API-Key": CANDIDATE}, timeout=5).json()
    assert len(rows) == 1 and hv.template_build_grant_confirmed is False


class Stranger(BaseHTTPRequestHandler):
    """A host that looks like an initialized backend but holds another key: every path it is asked for
    is recorded, so a test can prove which requests (and so which secrets) reached it."""

    hits: list[str] = []

    def do_GET(self) -> None:
        self.hits.append(f"GET {self.path}")
        answers = {
            "/": (200, b"{}"),
            "/health": (200, b"{}"),
            "/auth/bootstrap-status": (200, b'{"needs_bootstrap": false}'),
        }
        status, body = answers.get(self.path, (401, b'{"detail": "Invalid API key"}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.hits.append(f"POST {self.path}")
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_PUT = do_POST

    def log_message(self, *args: object) -> None:
        pass


def test_a_retargeted_row_is_not_used_until_its_new_target_accepts_the_key(
    backend, django_capture_on_commit_callbacks
):
    """SPEC 5.2.7/5.2.8: a same-key target change is used only after the new target accepts the key. Before
    the fix the moved row stayed usable while its verification failed, and pushes sent the inventory token
    to the unverified host."""
    from netbox_hvsync.backend.adoption import adopt_stored_keys
    from netbox_hvsync.backend.push import push_inventory_by_pk
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.models import BackendEndpoint, InventoryEndpoint

    row = BackendEndpoint(name="b", url=backend)
    row.token = CANDIDATE
    row.save()
    assert row.key_state == "adopted" and resolve_backend() is not None
    with django_capture_on_commit_callbacks(execute=False):
        inventory = InventoryEndpoint(name="nb", domain="netbox.example.net", port=443, token_key="abc")
        inventory.token = "inventory-secret-token-0002"
        inventory.save()

    Stranger.hits = []
    server = HTTPServer(("127.0.0.1", 0), Stranger)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stranger = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with django_capture_on_commit_callbacks(execute=True):
            row.url = stranger
            row.save()
        row.refresh_from_db()
        assert row.url == stranger and row.key_state == "failed" and row.token == CANDIDATE
        assert resolve_backend() is None
        assert push_inventory_by_pk(inventory.pk) is None  # nothing is pushed to it
        reasons = adopt_stored_keys()  # a sync job's retry before its preflight
        assert len(reasons) == 1 and "'b'" in reasons[0] and "not accepted" in reasons[0]
        assert "HTTP 401" in reasons[0] and CANDIDATE not in reasons[0]
        assert resolve_backend() is None
        # only the verification sequence reached the stranger, never a push of credentials
        assert set(Stranger.hits) == {"GET /", "GET /health", "GET /auth/bootstrap-status", "GET /auth/keys"}
    finally:
        server.shutdown()

    # moving back re-verifies against the real backend, which accepts the key: usable again
    with django_capture_on_commit_callbacks(execute=True):
        row.url = backend
        row.save()
    row.refresh_from_db()
    assert row.key_state == "adopted" and resolve_backend().row.pk == row.pk


def test_saving_a_pending_row_again_retries_its_verification(backend, django_capture_on_commit_callbacks):
    """A key that could not be verified (the backend was down when the row was saved) is retried by an
    unchanged save, and by every sync job's preflight (adopt_stored_keys)."""
    from netbox_hvsync.backend.adoption import adopt_stored_keys
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.models import BackendEndpoint

    dead = f"http://127.0.0.1:{free_port()}"
    with django_capture_on_commit_callbacks(execute=True):
        row = BackendEndpoint.objects.create(name="later", url=dead)
    row.refresh_from_db()
    assert row.key_state == "failed" and resolve_backend() is None
    assert "unreachable" in adopt_stored_keys()[0]
    with django_capture_on_commit_callbacks(execute=True):
        BackendEndpoint.objects.filter(pk=row.pk).update(url=backend)  # the operator fixed the address
        row.refresh_from_db()
        row.save()  # unchanged save: re-verifies
    row.refresh_from_db()
    assert row.key_state == "adopted" and resolve_backend().row.pk == row.pk
    assert adopt_stored_keys() == []
