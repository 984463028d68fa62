"""The plugin's transport resolves a backend name once per connection and dials only addresses the host
rules allow (issue 39): a name that resolves to a link-local or metadata address is refused before any
byte is sent, whatever its text; loopback names still work."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@pytest.fixture
def listener():
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def test_a_name_resolving_to_a_metadata_address_is_refused_and_loopback_works(listener, monkeypatch):
    from netbox_hvsync.backend.http import RequestsTransport
    from netbox_hvsync.rules.transport import TransportError

    port, seen = listener
    real = socket.getaddrinfo
    answers = {
        "imds.test": ["169.254.169.254"],
        "rebind.test": ["127.0.0.1", "169.254.169.254"],  # one good, one refused: refused
        "mapped.test": ["::ffff:127.0.0.1"],
        "loop.test": ["127.0.0.1"],
    }

    def fake(host, *args, **kwargs):
        if host in answers:
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in answers[host]
            ]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    transport = RequestsTransport(verify_ssl=False)
    try:
        for name in ("imds.test", "rebind.test", "mapped.test"):
            with pytest.raises(TransportError) as info:
                transport.request(
                    "GET",
                    f"http://{name}:{port}/health",
                    headers={},
                    json=None,
                    timeout=3,
                    allow_redirects=False,
                )
            assert info.value.kind == "connection" and "refuses" in str(info.value)
        assert seen == []
        ok = transport.request(
            "GET", f"http://loop.test:{port}/health", headers={}, json=None, timeout=3, allow_redirects=False
        )
        assert ok.status_code == 200 and seen == ["/health"]
        local = transport.request(
            "GET", f"http://localhost:{port}/x", headers={}, json=None, timeout=3, allow_redirects=False
        )
        assert local.status_code == 200  # localhost may resolve to ::1 first: the next address is tried
    finally:
        transport.close()
