"""Validation proofs of adopted backend keys (SPEC 5.2.6), against a real backend process.

"A validation proof is bound to the candidate, URL, scheme, port and TLS-verification setting; changing any
forces a fresh check." A counting forwarder in front of the backend records every request that reaches it,
so a test sees exactly when the plugin verified a key again and when it trusted its proof.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
import requests
from support import CANDIDATE

pytestmark = pytest.mark.django_db

VERIFICATION = ["GET /", "GET /health", "GET /auth/bootstrap-status", "GET /auth/keys"]


class Counter:
    """Forwards every request to `upstream` and records `METHOD /path` of each."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.hits: list[str] = []
        counter = self

        class Forward(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                counter.hits.append(f"{self.command} {self.path.split('?', 1)[0]}")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
                }
                answer = requests.request(
                    self.command, counter.upstream + self.path, headers=headers, data=body, timeout=10
                )
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def take(self) -> list[str]:
        hits, self.hits = self.hits, []
        return hits


@pytest.fixture
def counter(backend: str) -> Iterator[Counter]:
    made = Counter(backend)
    yield made
    made.server.shutdown()
    made.server.server_close()


def adopted_row(port: int):
    from netbox_hvsync.models import BackendEndpoint

    row = BackendEndpoint(name="b", url="http://127.0.0.1", port=port)
    row.token = CANDIDATE
    row.save()  # an explicit candidate: verified before persistence
    row.refresh_from_db()
    assert row.key_state == "adopted" and row.key_proof.startswith("p1:")
    assert CANDIDATE not in row.key_proof  # an HMAC, never the key
    return row


def test_an_unchanged_target_trusts_its_proof_without_a_new_check(
    counter, django_capture_on_commit_callbacks
):
    from netbox_hvsync.backend.adoption import adopt_stored_keys
    from netbox_hvsync.backend.resolution import resolve_backend

    row = adopted_row(counter.port)
    assert counter.take()[-1] == "POST /auth/register-key"  # the fresh backend was bootstrapped once
    with django_capture_on_commit_callbacks(execute=True):
        row.token = CANDIDATE  # the same key again (new ciphertext), same target and TLS setting
        row.comments = "re-saved"
        row.save()
    row.refresh_from_db()
    assert row.key_state == "adopted" and row.token == CANDIDATE
    assert adopt_stored_keys() == [] and resolve_backend().row.pk == row.pk
    assert counter.take() == []  # the proof is fresh: nothing asked the backend again


def test_a_port_or_tls_change_without_a_save_forces_a_fresh_check(
    backend, counter, django_capture_on_commit_callbacks
):
    """A change that bypasses the save (a queryset update, a restore) leaves an adopted row whose proof no
    longer matches: the key is not trusted until the new target accepted it again."""
    from netbox_hvsync.backend.adoption import adopt_stored_keys
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.models import BackendEndpoint

    row = adopted_row(int(urlsplit(backend).port or 0))  # adopted directly at the backend
    first_proof = row.key_proof
    assert counter.take() == []

    BackendEndpoint.objects.filter(pk=row.pk).update(port=counter.port)  # now behind the counter
    assert resolve_backend() is None  # the stale proof is not trusted
    row.refresh_from_db()
    assert row.key_state == "pending" and row.key_proof == ""
    assert counter.take() == []  # ... and nothing was sent with the key on the way
    assert adopt_stored_keys() == []  # the sync job's check before it resolves its backend
    assert counter.take() == VERIFICATION  # a fresh check hit the new target
    row.refresh_from_db()
    assert row.key_state == "adopted" and row.key_proof not in ("", first_proof)
    assert resolve_backend().row.pk == row.pk and counter.take() == []

    BackendEndpoint.objects.filter(pk=row.pk).update(verify_ssl=False)
    assert adopt_stored_keys() == []
    assert counter.take() == VERIFICATION  # the TLS setting is part of the binding
    assert resolve_backend().row.pk == row.pk
    assert adopt_stored_keys() == [] and counter.take() == []  # unchanged: no check

    with django_capture_on_commit_callbacks(execute=True):
        row.refresh_from_db()
        row.verify_ssl = True  # a normal save of a TLS change re-verifies after commit, too
        row.save()
    assert counter.take() == VERIFICATION
    row.refresh_from_db()
    assert row.key_state == "adopted" and resolve_backend().row.pk == row.pk
