"""Trap servers on loopback: a tiny TCP server that records every byte that reaches it and answers what
the test chooses (an HTTP answer, a huge body, nothing at all), so a test can prove what the backend
sent where, and what it read."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

Answer = Callable[[bytes], bytes | Iterator[bytes] | None]


@dataclass
class Trap:
    """`received`: every byte of every connection, in order; `sent`: bytes of the answers written."""

    port: int
    received: bytearray = field(default_factory=bytearray)
    connections: int = 0
    sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def text(self) -> str:
        with self.lock:
            return bytes(self.received).decode("latin-1")


def http_answer(status: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """An HTTP/1.1 answer that closes the connection (`status` is e.g. "500 Whatever")."""
    head = [f"HTTP/1.1 {status}", "Connection: close", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def streamed_answer(total: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """A 200 JSON-looking answer of `total` bytes without Content-Length (ends when the server closes)."""
    yield b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    yield b'{"data": "'
    left = total
    while left > 0:
        piece = min(chunk, left)
        yield b"x" * piece
        left -= piece
    yield b'"}'


def _head_complete(data: bytes) -> bool:
    """A whole request has arrived: its header block, plus a Content-Length body if it declares one."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return False
    length = 0
    for line in data[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    return len(data) >= end + 4 + length


@contextmanager
def trap(answer: Answer | None = None) -> Iterator[Trap]:
    """A trap on 127.0.0.1: each connection is read until a whole HTTP request came (or 2 s of
    silence: a TLS hello never completes one), then `answer(request)` is written and it is closed."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    state = Trap(port=server.getsockname()[1])
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        conn.settimeout(2.0)
        data = b""
        try:
            while not _head_complete(data):
                piece = conn.recv(65536)
                if not piece:
                    break
                data += piece
                with state.lock:
                    state.received += piece
        except OSError:
            pass
        reply = answer(data) if answer is not None and _head_complete(data) else None
        try:
            if isinstance(reply, bytes):
                conn.sendall(reply)
                state.sent += len(reply)
            elif reply is not None:
                for piece in reply:
                    conn.sendall(piece)
                    state.sent += len(piece)
        except OSError:  # the client stopped reading and closed: what it took is in `sent`
            pass
        finally:
            conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            state.connections += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join(2)
        server.close()
