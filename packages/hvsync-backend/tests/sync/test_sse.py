"""SSE runs: ids, contract-valid frames, replay after Last-Event-ID, restart signals, keep-alive, and a
final `complete` even when the stage body crashes."""

from __future__ import annotations

import asyncio

from frames_contract import assert_valid_frame
from hvsync_backend.sse.frames import Frame, encode_frame
from hvsync_backend.sse.runs import Run, RunRegistry
from support import parse_stream

ZERO = {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}


def complete(ok: bool = True) -> dict:
    return {"stage": "devices", "ok": ok, "summary": ZERO, "duration_ms": 1.0, "errors": [], "error": None}


async def three_steps(run: Run) -> None:
    for i in range(3):
        await run.emit("step", {"stage": "devices", "phase": "start", "message": f"step {i}"})
    await run.emit("complete", complete())


async def collect(gen) -> str:
    return "".join([chunk async for chunk in gen])


def test_encode_and_parse_round_trip() -> None:
    frame = Frame("step", "4", {"stage": "devices", "phase": "diff", "message": "line\nbreak é"})
    text = encode_frame(frame)
    assert text.startswith("id: 4\nevent: step\ndata: {")
    assert text.endswith("\n\n") and text.count("\n") == 4  # JSON keeps the payload on one data line
    assert parse_stream(": keep-alive\n\n" + text) == [frame]


async def test_fresh_stream_numbers_frames_and_ends_with_complete() -> None:
    registry = RunRegistry()
    text = await collect(registry.stream("sig", three_steps, last_event_id=None, run_id=None))
    frames = parse_stream(text)
    assert [f.id for f in frames] == ["1", "2", "3", "4"]
    assert [f.event for f in frames] == ["step", "step", "step", "complete"]
    for frame in frames:
        assert_valid_frame(frame.as_dict())


async def test_reconnect_with_last_event_id_replays_only_missed_frames() -> None:
    registry = RunRegistry()
    await collect(registry.stream("sig", three_steps, last_event_id=None, run_id=None))
    frames = parse_stream(await collect(registry.stream("sig", three_steps, last_event_id="2", run_id=None)))
    assert [(f.id, f.event) for f in frames] == [("3", "step"), ("4", "complete")]
    assert frames[0].data["message"] == "step 2"


async def test_unknown_run_gets_restart_then_a_fresh_run() -> None:
    registry = RunRegistry()
    frames = parse_stream(
        await collect(registry.stream("other", three_steps, last_event_id="7", run_id=None))
    )
    assert frames[0].event == "restart"
    assert frames[0].data == {"reason": "unknown_stream", "last_event_id": "7"}
    assert [f.id for f in frames[1:]] == ["1", "2", "3", "4"]
    for frame in frames:
        assert_valid_frame(frame.as_dict())


async def test_frames_fallen_out_of_the_buffer_give_replay_unavailable() -> None:
    registry = RunRegistry(buffer_size=2)
    await collect(registry.stream("sig", three_steps, last_event_id=None, run_id=None))
    frames = parse_stream(await collect(registry.stream("sig", three_steps, last_event_id="1", run_id=None)))
    assert frames[0].event == "restart" and frames[0].data["reason"] == "replay_unavailable"
    assert frames[-1].event == "complete"


async def test_run_survives_a_disconnect_and_a_reconnect_tails_it_live() -> None:
    registry = RunRegistry()
    gate = asyncio.Event()

    async def slow(run: Run) -> None:
        await run.emit("step", {"stage": "devices", "phase": "start", "message": "a"})
        await gate.wait()
        await run.emit("complete", complete())

    first = registry.stream("sig", slow, last_event_id=None, run_id=None)
    chunk = await first.__anext__()
    assert chunk.startswith("id: 1\n")
    await first.aclose()  # client went away; the run goes on
    follower = asyncio.ensure_future(collect(registry.stream("sig", slow, last_event_id="1", run_id=None)))
    await asyncio.sleep(0.05)
    gate.set()
    frames = parse_stream(await asyncio.wait_for(follower, 5))
    assert [(f.id, f.event) for f in frames] == [("2", "complete")]


async def test_keepalive_comments_while_idle() -> None:
    registry = RunRegistry()
    gate = asyncio.Event()

    async def idle(run: Run) -> None:
        await gate.wait()
        await run.emit("complete", complete())

    gen = registry.stream("sig", idle, last_event_id=None, run_id=None, keepalive=0.05)
    assert await asyncio.wait_for(gen.__anext__(), 2) == ": keep-alive\n\n"
    gate.set()
    rest = "".join([c async for c in gen])
    assert parse_stream(rest)[-1].event == "complete"


async def test_crashing_body_still_ends_with_a_truthful_complete() -> None:
    registry = RunRegistry()

    async def boom(run: Run) -> None:
        await run.emit("step", {"stage": "devices", "phase": "start", "message": "a"})
        raise RuntimeError("secret-ish internal detail")

    frames = parse_stream(
        await collect(
            registry.stream("/dcim/devices/create/stream?x=1", boom, last_event_id=None, run_id=None)
        )
    )
    last = frames[-1]
    assert last.event == "complete" and last.data["ok"] is False
    assert last.data["error"]["source"] == "backend"
    assert "secret-ish" not in last.data["error"]["detail"]
    for frame in frames:
        assert_valid_frame(frame.as_dict())


async def test_complete_emitted_while_a_slow_client_reads_is_still_delivered() -> None:
    registry = RunRegistry()
    gate = asyncio.Event()

    async def steps_then_wait(run: Run) -> None:
        for i in range(3):
            await run.emit("step", {"stage": "devices", "phase": "start", "message": f"step {i}"})
        await gate.wait()
        await run.emit("complete", complete())

    gen = registry.stream("sig", steps_then_wait, last_event_id=None, run_id=None)
    first = await gen.__anext__()
    while registry.find(None, "sig").last_id != 3:  # type: ignore[union-attr]
        await asyncio.sleep(0.01)
    second = await gen.__anext__()
    gate.set()
    await asyncio.sleep(0.05)  # the run completes while the client is between reads
    rest = [c async for c in gen]
    frames = parse_stream(first + second + "".join(rest))
    assert [f.event for f in frames] == ["step", "step", "step", "complete"]


async def test_a_crashed_stage_body_is_logged_with_its_traceback_and_no_secret(caplog) -> None:
    """Stream-run exceptions reached the client as `internal error` and were never logged."""

    async def crashes(run: Run) -> None:
        await run.emit("step", {"stage": "devices", "phase": "start", "message": "go"})
        raise RuntimeError(
            "NetBox said no; Authorization: Token 0123456789abcdef0123 password=hunter2-planted"
        )

    registry = RunRegistry()
    with caplog.at_level("ERROR", logger="hvsync_backend.sse"):
        frames = parse_stream(
            await collect(registry.stream("/dcim/x?a=1", crashes, last_event_id=None, run_id=None))
        )
    assert frames[-1].event == "complete" and frames[-1].data["ok"] is False
    assert frames[-1].data["error"]["detail"] == "internal error: RuntimeError"
    [record] = [r for r in caplog.records if r.name == "hvsync_backend.sse"]
    text = record.getMessage()
    assert "/dcim/x" in text and "Traceback" in text and "RuntimeError: NetBox said no" in text
    assert "in crashes" in text  # the frame that raised
    assert "0123456789abcdef0123" not in text and "hunter2-planted" not in text
