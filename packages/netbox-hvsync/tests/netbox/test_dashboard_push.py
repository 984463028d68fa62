"""Opportunistic push (SPEC 4.5, "viewing the dashboard pushes the selected hv endpoint") without a GET
that has a side effect: the plugin home page (the dashboard) shows the selected endpoint with a "Push now"
button, and only that POST pushes.

The backend is real; the plugin reaches it through a counting proxy on loopback, so the tests see every
request the plugin makes. Endpoints are saved without running their post-commit push, so the backend
holds nothing until the button is pressed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from support import CANDIDATE

pytestmark = pytest.mark.django_db

HOME = "/plugins/hvsync/"


class CountingProxy:
    """A loopback HTTP proxy in front of the real backend that records each request line it forwards."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.seen: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self) -> None:
                proxy.seen.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                answer = requests.request(
                    self.command, upstream + self.path, data=body, headers=headers, timeout=15
                )
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in (
                        "content-length",
                        "transfer-encoding",
                        "connection",
                        "content-encoding",
                    ):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(backend: str) -> Iterator[CountingProxy]:
    counting = CountingProxy(backend)
    yield counting
    counting.close()


def _hv_rows(url: str) -> list[dict]:
    return requests.get(url + "/hv/endpoints", headers={"X-Service-API-Key": CANDIDATE}, timeout=5).json()


def _endpoint(name: str, secret: str):
    from netbox_hvsync.models import HvEndpoint

    hv = HvEndpoint(name=name, domain=f"{name}.example.net", username="root@pam", token_name="hvsync")
    hv.token_value = secret
    hv.save()
    return hv


@pytest.fixture
def endpoints(proxy, django_capture_on_commit_callbacks):
    from netbox_hvsync.models import BackendEndpoint

    be = BackendEndpoint(name="b", url=proxy.url)
    be.token = CANDIDATE  # verified (bootstraps the backend) through the proxy before persistence
    be.save()
    with django_capture_on_commit_callbacks(execute=False):  # no post-commit push
        alpha = _endpoint("alpha", "alpha-pve-secret-0001")
        beta = _endpoint("beta", "beta-pve-secret-0002")
    proxy.seen.clear()
    return alpha, beta


def test_viewing_the_dashboard_sends_nothing_to_the_backend(ui, proxy, backend, endpoints):
    alpha, beta = endpoints
    for url in (HOME, f"{HOME}?hv_endpoint={beta.pk}", HOME):
        page = ui.get(url)
        assert page.status_code == 200
    assert proxy.seen == []  # not one request: no push, no probe, no key check
    assert _hv_rows(backend) == []
    html = page.content.decode()
    assert 'id="hvsync-push-now"' in html and f'name="hv_endpoint" value="{alpha.pk}"' in html
    assert "not pushed yet" in html
    assert "alpha-pve-secret-0001" not in html


def test_push_now_pushes_the_selected_endpoint(ui, proxy, backend, endpoints):
    _alpha, beta = endpoints
    response = ui.post(HOME, {"hv_endpoint": beta.pk})
    assert response.status_code == 302 and response["Location"] == f"{HOME}?hv_endpoint={beta.pk}"
    rows = _hv_rows(backend)
    assert [r["name"] for r in rows] == [f"beta (inv:{beta.pk})"]
    assert any(line.startswith("POST /hv/endpoints") for line in proxy.seen)
    beta.refresh_from_db()
    assert beta.backend_id == rows[0]["id"]
    page = ui.get(response["Location"]).content.decode()
    assert f"beta: pushed to the backend (backend id {rows[0]['id']})" in page
    assert f"last pushed as backend id {rows[0]['id']}" in " ".join(page.split())
    assert "beta-pve-secret-0002" not in page


def test_push_now_without_a_choice_pushes_the_first_enabled_endpoint(ui, backend, endpoints):
    alpha, _ = endpoints
    assert ui.post(HOME).status_code == 302
    assert [r["name"] for r in _hv_rows(backend)] == [f"alpha (inv:{alpha.pk})"]


def test_push_now_refuses_an_endpoint_the_user_may_not_view(proxy, backend, endpoints):
    from django.test import Client
    from users.models import User

    alpha, _ = endpoints
    nobody = User.objects.create_user(username="no-hvsync-perms")
    client = Client()
    client.force_login(nobody)
    response = client.post(HOME, {"hv_endpoint": alpha.pk}, follow=True)
    assert (
        "Nothing pushed: no enabled Proxmox endpoint you may view was selected" in response.content.decode()
    )
    assert proxy.seen == [] and _hv_rows(backend) == []


def test_dashboard_without_a_backend_says_nothing_was_pushed(ui, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        gamma = _endpoint("gamma", "gamma-pve-secret-0003")
    page = ui.post(HOME, {"hv_endpoint": gamma.pk}, follow=True)
    assert page.status_code == 200
    assert "gamma: not pushed: no usable backend endpoint" in page.content.decode()
