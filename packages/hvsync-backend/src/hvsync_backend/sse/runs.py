"""Runs outlive connections: a stage runs as a background task writing frames into a bounded buffer.

A client that reconnects with `Last-Event-ID` gets the frames it missed (then the live tail); when the
run is unknown or the missed frames already fell out of the buffer it gets a `restart` frame instead.

At most `max_active` runs are unfinished at once: a request that would start one more is refused with
`RunLimitReached` (503, naming the limit) before its response starts; replays of existing runs are not
counted, and the check and the start happen with no await between them, so the cap is exact.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException

from hvsync_backend.sse.frames import Frame, encode_comment, encode_frame, failed_complete
from hvsync_backend.wire.redaction import sweep_text

log = logging.getLogger("hvsync_backend.sse")

RunBody = Callable[["Run"], Awaitable[None]]

RUN_LIMIT = (
    "too many sync runs at once: {limit} are running (HVSYNC_MAX_CONCURRENT_RUNS); retry when one ends"
)


class RunLimitReached(HTTPException):
    """`max_active` runs are unfinished: answered 503 with the limit named and `Retry-After`."""

    def __init__(self, limit: int) -> None:
        super().__init__(503, RUN_LIMIT.format(limit=limit), headers={"Retry-After": "5"})


class Run:
    """One execution of a stage (or the full update); frames get ids 1, 2, 3..."""

    def __init__(self, signature: str, buffer_size: int) -> None:
        self.id = uuid.uuid4().hex[:16]
        self.signature = signature
        self._frames: deque[Frame] = deque(maxlen=buffer_size)
        self._seq = 0
        self._changed = asyncio.Condition()
        self.finished = False
        self.finished_at: float | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def last_id(self) -> int:
        return self._seq

    async def emit(self, event: str, data: dict[str, Any]) -> Frame:
        if self.finished:
            raise RuntimeError("run already completed")
        self._seq += 1
        frame = Frame(event, str(self._seq), data)
        self._frames.append(frame)
        if event == "complete":
            self.finished = True
            self.finished_at = time.monotonic()
        async with self._changed:
            self._changed.notify_all()
        return frame

    def can_replay_after(self, seq: int) -> bool:
        """True when every frame after `seq` is still buffered."""
        if seq >= self._seq:
            return True
        return bool(self._frames) and int(self._frames[0].id) <= seq + 1

    async def follow(self, after: int, keepalive: float) -> AsyncIterator[str]:
        """Encoded frames after id `after`, then live ones; keep-alive comments while idle."""
        sent = after
        while True:
            pending = [f for f in self._frames if int(f.id) > sent]
            for frame in pending:
                sent = int(frame.id)
                yield encode_frame(frame)
                if frame.event == "complete":
                    return
            if self.finished and sent >= self._seq:
                return
            if self._seq > sent:
                continue  # frames arrived while the last ones were being sent
            async with self._changed:
                if self._seq == sent:
                    try:
                        await asyncio.wait_for(self._changed.wait(), timeout=keepalive)
                    except TimeoutError:
                        yield encode_comment()


class RunRegistry:
    """Live and recently finished runs, bounded in number and age."""

    def __init__(
        self, buffer_size: int = 5000, keep_seconds: float = 600.0, max_runs: int = 64, max_active: int = 8
    ) -> None:
        self.buffer_size = buffer_size
        self.keep_seconds = keep_seconds
        self.max_runs = max_runs
        self.max_active = max_active
        self._runs: dict[str, Run] = {}

    def active(self) -> int:
        """Runs not finished yet."""
        return sum(1 for r in self._runs.values() if not r.finished)

    def _prune(self) -> None:
        now = time.monotonic()
        for run_id, run in list(self._runs.items()):
            if run.finished_at is not None and now - run.finished_at > self.keep_seconds:
                del self._runs[run_id]
        finished = [r for r in self._runs.values() if r.finished]
        while len(self._runs) > self.max_runs and finished:
            del self._runs[finished.pop(0).id]

    def find(self, run_id: str | None, signature: str) -> Run | None:
        """A run by explicit id, else the newest run started by the same request."""
        self._prune()
        if run_id:
            return self._runs.get(run_id)
        matches = [r for r in self._runs.values() if r.signature == signature]
        return matches[-1] if matches else None

    def start(self, signature: str, body: RunBody) -> Run:
        """Start a run now (a task on the running loop); `RunLimitReached` when `max_active` are running."""
        self._prune()
        if self.active() >= self.max_active:
            raise RunLimitReached(self.max_active)
        run = Run(signature, self.buffer_size)
        self._runs[run.id] = run

        async def _drive() -> None:
            try:
                await body(run)
            except Exception as exc:  # the stream must still end with `complete`
                trace = "".join(traceback.format_exception(exc))
                log.error(
                    "stream run %s (%s) failed:\n%s", run.id, signature.split("?")[0], sweep_text(trace)
                )
                if not run.finished:
                    problem = {
                        "source": "backend",
                        "status": None,
                        "detail": f"internal error: {type(exc).__name__}",
                    }
                    data = failed_complete(signature.split("?")[0], problem, errors=[])
                    await run.emit("complete", {**data, "run_id": run.id})

        run.task = asyncio.create_task(_drive())
        return run

    def stream(
        self,
        signature: str,
        body: RunBody,
        *,
        last_event_id: str | None,
        run_id: str | None,
        keepalive: float = 15.0,
    ) -> AsyncIterator[str]:
        """The SSE body for one request: replay-and-follow, or restart, or a fresh run. Decided (and a new
        run started, or refused with `RunLimitReached`) when called, before any response is sent; must be
        called with the event loop running."""
        restart: Frame | None = None
        if last_event_id is not None:
            run = self.find(run_id, signature)
            try:
                seq = int(last_event_id)
            except ValueError:
                seq = -1
            if run is not None and seq >= 0 and run.can_replay_after(seq):
                return run.follow(seq, keepalive)
            reason = "unknown_stream" if run is None else "replay_unavailable"
            restart = Frame("restart", "0", {"reason": reason, "last_event_id": last_event_id})
        return self._fresh(self.start(signature, body), restart, keepalive)

    @staticmethod
    async def _fresh(run: Run, restart: Frame | None, keepalive: float) -> AsyncIterator[str]:
        if restart is not None:
            yield encode_frame(restart)
        async for chunk in run.follow(0, keepalive):
            yield chunk
