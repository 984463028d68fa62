"""A fault-injecting HTTP proxy in front of the real backend, for whole-system fault tests.

Requests pass through to the upstream (the backend, or NetBox for the backend's writes) unchanged (SSE
streams chunk by chunk) unless a fault is set for the path. Faults are what a broken network or a broken
server does: a status with a body, a redirect, a stream that ends without `complete`, an unparseable
`complete`, a hang, a dropped connection, a request that reached the server whose answer was lost, or a
slow link (every chunk of the answer delayed). Every request is recorded, so
tests can assert which calls the plugin made (and with which headers). `before` runs a test's callback
once, ahead of the first request under a path, before it is forwarded: a test can change the world (an
emulator fault) at an exact point of a sync job, such as the start of its second stage.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade"}


@dataclass
class Fault:
    kind: str  # status | redirect | no_complete | bad_complete | hang | stall | drop | lost_answer | slow
    status: int = 200
    body: Any = None
    raw: str | None = None
    seconds: float = 0.0
    times: int | None = None  # None: every time
    host: str | None = None  # only requests naming this host in `Host:` (None: any host)
    after: int = 0  # let this many matching requests through first (a server that fails mid-run)
    then_down: bool = False  # after injecting, drop every later request until clear() (the server died)
    method: str | None = None  # only requests with this method (None: any)
    body_contains: str | None = None  # only requests whose body holds this text (None: any)


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FaultProxy:
    upstream: str
    faults: dict[str, Fault] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    down: bool = False
    #: path prefix -> callback run once before the first request under it is handled (`before`)
    hooks: dict[str, Callable[[Hit], None]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def set(self, path_prefix: str, fault: Fault) -> None:
        self.faults[path_prefix] = fault

    def clear(self) -> None:
        self.faults.clear()
        self.hooks.clear()
        self.down = False
        self.hits.clear()

    def before(self, path_prefix: str, callback: Callable[[Hit], None]) -> None:
        """Run `callback` once, before the first request under `path_prefix` is forwarded or faulted."""
        self.hooks[path_prefix] = callback

    def set_for_host(self, host: str, path_prefix: str, fault: Fault) -> None:
        """A fault seen only through one address of the proxy (`localhost` versus `127.0.0.1`)."""
        fault.host = host
        self.faults[f"{host} {path_prefix}"] = fault

    def fault_for(self, path: str, host: str = "", method: str = "GET", body: bytes = b"") -> Fault | None:
        hostname = host.rsplit(":", 1)[0] if host else ""
        for key, fault in self.faults.items():
            prefix = key.split(" ", 1)[1] if fault.host is not None else key
            if fault.host is not None and fault.host != hostname:
                continue
            if path.split("?", 1)[0].startswith(prefix):
                if fault.method is not None and fault.method != method:
                    continue
                if fault.body_contains is not None and fault.body_contains.encode() not in body:
                    continue
                if fault.after > 0:
                    fault.after -= 1
                    continue
                if fault.times is not None:
                    if fault.times <= 0:
                        continue
                    fault.times -= 1
                return fault
        return None

    def paths(self, method: str | None = None) -> list[str]:
        return [h.path.split("?", 1)[0] for h in self.hits if method is None or h.method == method]

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                hit = Hit(self.command, self.path, dict(self.headers), body)
                proxy.hits.append(hit)
                with proxy.lock:
                    prefix = next((p for p in proxy.hooks if self.path.split("?", 1)[0].startswith(p)), None)
                    hook = proxy.hooks.pop(prefix) if prefix is not None else None
                if hook is not None:
                    hook(hit)
                with proxy.lock:  # `after` and `times` count across concurrent requests
                    fault = (
                        Fault("drop")
                        if proxy.down
                        else proxy.fault_for(self.path, self.headers.get("Host", ""), self.command, body)
                    )
                    if fault is not None and fault.then_down:
                        proxy.down = True
                if fault is None:
                    self._forward(body)
                elif fault.kind == "lost_answer":  # the server did the work; the answer never came
                    self._forward(body, answer=False)
                elif fault.kind == "slow":  # a slow link: the answer arrives, `seconds` late per chunk
                    self._forward(body, delay=fault.seconds)
                else:
                    self._inject(fault)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def _send(
                self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _inject(self, fault: Fault) -> None:
                if fault.kind == "drop":  # the connection closes without an answer
                    self.close_connection = True
                    return
                if fault.kind == "hang":
                    time.sleep(fault.seconds)
                    self.close_connection = True
                    return
                if fault.kind == "redirect":
                    self._send(307, b"", "text/plain", {"Location": proxy.upstream + self.path})
                    return
                if fault.kind == "status":
                    if fault.raw is not None:
                        self._send(fault.status, fault.raw.encode(), "text/html")
                    else:
                        self._send(fault.status, json.dumps(fault.body).encode(), "application/json")
                    return
                step = (
                    'id: 1\nevent: step\ndata: {"stage": "devices", "phase": "start", "message": "start"}\n\n'
                )
                if fault.kind == "stall":  # a stream that starts, then goes silent (no keep-alive)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(step.encode())
                    self.wfile.flush()
                    time.sleep(fault.seconds)
                    self.close_connection = True
                    return
                if fault.kind == "no_complete":
                    text = step
                elif fault.kind == "bad_complete":
                    text = step + "id: 2\nevent: complete\ndata: {this is not json\n\n"
                else:
                    raise ValueError(fault.kind)
                self._send(200, text.encode(), "text/event-stream")

            def _forward(self, body: bytes, answer: bool = True, delay: float = 0.0) -> None:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
                try:
                    upstream = requests.request(
                        self.command,
                        proxy.upstream + self.path,
                        headers=headers,
                        data=body or None,
                        stream=True,
                        timeout=(5, 600),
                        allow_redirects=False,
                    )
                except requests.RequestException:
                    self._send(502, b"<html>bad gateway</html>", "text/html")
                    return
                if not answer:
                    upstream.close()
                    self.close_connection = True
                    return
                self.send_response(upstream.status_code)
                for k, v in upstream.headers.items():
                    if k.lower() not in HOP_BY_HOP:
                        self.send_header(k, v)
                # a slow link keeps the upstream's chunks apart (chunked framing), so a reader sees each
                # frame when it arrives rather than a buffer-full at a time
                chunked = delay > 0
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for chunk in upstream.raw.stream(8192, decode_content=False):
                        if chunked:
                            time.sleep(delay)
                            chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunk else b""
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    upstream.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
