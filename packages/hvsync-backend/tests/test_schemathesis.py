"""Property-based run over every operation of the backend's own OpenAPI, in process (ASGI): no input and no
sequence of calls produces a server error, and responses match the documented status codes and schemas.

All phases run with a fixed seed: examples, coverage (every boundary and negative value the schema
defines), fuzzing (EXAMPLES cases per operation; STREAM_EXAMPLES for the sync-stage streams, each of which
runs a stage) and stateful (SCENARIOS call sequences that create, read and change keys and endpoints).

Stage runs reach their end: NetBox is `FakeNetBox` (empty lists, writes echoed), every Proxmox call
answers an empty list. A stream whose run died of an unexpected exception still ends with a `complete`
(`internal error: <Exception>`, see `sse/runs.py`); `stream_completes_without_internal_error` fails on it.
HVSYNC_FUZZ_EXAMPLES raises the fuzzing count (the others scale with it) for a longer local run.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import schemathesis
from fake_netbox import FakeNetBox
from hvsync_backend.app import create_app
from hvsync_backend.auth.lockout import LockoutTracker
from hvsync_backend.config import Settings
from hvsync_backend.db.models import ApiKey, HvEndpoint, InventoryEndpoint, RunLease
from hvsync_backend.endpoints.schemas import HvEndpointCreate, HvEndpointUpdate, InventoryEndpointCreate
from hvsync_backend.sse.frames import Frame
from hvsync_backend.sse.runs import Run, RunRegistry
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from schemathesis.checks import not_a_server_error, response_schema_conformance, status_code_conformance
from schemathesis.config import SchemathesisConfig
from sqlalchemy import delete, select, text, update
from support import HV, INV, parse_stream

SEED = 20261125
#: Fuzzing-phase cases per operation.
EXAMPLES = int(os.environ.get("HVSYNC_FUZZ_EXAMPLES", "25"))
#: Fuzzing-phase cases per stage stream: each one that passes validation runs a stage (or all 13).
STREAM_EXAMPLES = max(1, EXAMPLES // 3)
#: Stateful scenarios (sequences of up to STEPS calls, following the links schemathesis infers).
SCENARIOS = EXAMPLES * 8 // 5
STEPS = 10
STREAMS = r"/stream$"
CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": EXAMPLES, "deterministic": True},
        # A run's frames are few (no Proxmox data): read every stream to its `complete`.
        "max-stream-events": 10_000,
        "request-timeout": 60,
        "phases": {"stateful": {"max-steps": STEPS}},
        "operations": [{"include-path-regex": STREAMS, "generation": {"max-examples": STREAM_EXAMPLES}}],
    }
)

KEY = "schemathesis-" + "q" * 40
_DATA = Path(tempfile.mkdtemp(prefix="hvsync-st-"))
app = create_app(Settings(data_dir=_DATA, bcrypt_rounds=4))
ctx = app.state.context
#: Proxmox answers objects on these paths and lists elsewhere (an answer of the wrong shape is a 502 by
#: design: Proxmox misbehaving).
PROXMOX_OBJECTS = ("/options", "/config", "/version", "/status/current")


def fake_proxmox(request: httpx.Request) -> httpx.Response:
    """Every Proxmox cluster is empty: no nodes, guests, storage, tasks or firewall rules."""
    return httpx.Response(200, json={"data": {} if request.url.path.endswith(PROXMOX_OBJECTS) else []})


ctx.proxmox.transport_factory = lambda target: httpx.MockTransport(fake_proxmox)
#: The one Proxmox endpoint the run starts with (the id is the same after every `_fresh_state`).
HV_ID = 1
#: HV's name ends in "(inv:7)": the plugin's record for it, which plugin records and sidecars hang on.
PLUGIN_RECORD = {"id": 7, "name": HV["name"], "backend_id": HV_ID}
netbox = FakeNetBox(rows={"plugins/hvsync/hv-endpoints": [PLUGIN_RECORD]})
ctx.netbox_transport = netbox.transport
#: Besides HV_ID, the newest endpoints the fuzzer created stay enabled: stage runs read their (fuzzed)
#: names and site slugs, and a run stays short.
FUZZED_HV_ENABLED = 2
HV_USABLE = HvEndpointUpdate(**HV, access_methods=["token"], enabled=True)


def _fresh_state() -> None:
    """The database as the run starts: our key, the NetBox endpoint and HV, ids from 1, no leases or runs.
    Every stateful scenario starts here: hypothesis replays a scenario's choices and needs the same
    answers (a 409 instead of a 201 changes which calls can follow)."""
    with ctx.session_factory() as session:
        for model in (RunLease, ApiKey, HvEndpoint, InventoryEndpoint):
            session.execute(delete(model))
        session.execute(text("DELETE FROM sqlite_sequence"))
        session.commit()
    ctx.keys.cache.clear()
    app.state.sync_runs = RunRegistry()
    ctx.keys.register_bootstrap(KEY, "schemathesis")
    ctx.registry.create_inventory(InventoryEndpointCreate(**INV))
    assert ctx.registry.create_hv(HvEndpointCreate(**HV)).id == HV_ID


_fresh_state()
schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)


def _reset(unlock: bool = False) -> None:
    """The fuzzer may deactivate or delete our key and disable or change the endpoints; start every case
    with a working key and a usable NetBox and Proxmox endpoint. Only the run without the key clears the
    lockout: with the key every call authenticates, and a 429 fails the run (`not_locked_out`)."""
    if unlock:
        ctx.lockout = LockoutTracker(5, 300)
    if ctx.keys.verify(KEY) is None:
        ctx.keys.create(label="schemathesis", raw_key=KEY)
    ctx.registry.update_hv(HV_ID, HV_USABLE)
    with ctx.session_factory() as session:
        session.execute(update(InventoryEndpoint).values(enabled=True))
        newest = session.scalars(
            select(HvEndpoint.id)
            .where(HvEndpoint.id != HV_ID)
            .order_by(HvEndpoint.id.desc())
            .limit(FUZZED_HV_ENABLED)
        ).all()
        session.execute(update(HvEndpoint).values(enabled=HvEndpoint.id.in_([HV_ID, *newest])))
        session.commit()


#: How the engine reports a Proxmox read that failed (`sync/proxmox.py`); the kind is a `ProxmoxError` unless
#: the client itself broke (the reader turns every exception into such a problem).
PROXMOX_PROBLEM = re.compile(r"Proxmox endpoint \d+ GET \S*: (\w+):")


def internal_errors(frames: list[Frame]) -> list[str]:
    """Problems in a stream that only a bug produces: an exception the sync engine did not expect."""
    found = []
    for frame in frames:
        problems = [frame.data.get("error"), frame.data.get("problem"), *(frame.data.get("errors") or [])]
        for problem in problems:
            detail = str(problem.get("detail", "")) if isinstance(problem, dict) else ""
            kind = PROXMOX_PROBLEM.match(detail)
            if detail.startswith("internal error") or (kind and not kind.group(1).startswith("Proxmox")):
                found.append(f"{frame.event} frame {frame.id}: {detail}")
    return found


@schemathesis.check
def stream_completes_without_internal_error(ctx: Any, response: Any, case: Any) -> bool | None:
    """A stage stream ends with `complete`, and no frame reports an internal error (the stream's
    equivalent of a 500: the response status was sent before the run started)."""
    if not response.headers.get("content-type", [""])[0].startswith("text/event-stream"):
        return None
    frames = parse_stream(response.content.decode("utf-8"))
    if getattr(response, "stream_cut_short", False) or not frames or frames[-1].event != "complete":
        raise AssertionError(f"the stream did not end with `complete` (events: {[f.event for f in frames]})")
    problems = internal_errors(frames)
    if problems:
        raise AssertionError("the run failed internally: " + "; ".join(problems))
    return True


def with_key(case: Any) -> None:
    """Our key in the case itself: schemathesis fills the security scheme's header with generated values,
    which win over the `headers=` of the call (each such call was a counted failure, hidden by a lockout
    reset before every case)."""
    case.headers = {**(case.headers or {}), "X-Service-API-Key": KEY}


@schemathesis.check
def not_locked_out(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every call carries the valid key: the lockout never answers the fuzzer."""
    if response.status_code == 429:
        raise AssertionError(f"429 (lockout) on {case.method} {case.path}")
    return True


CHECKS = [
    not_locked_out,
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    stream_completes_without_internal_error,
]
HYPOTHESIS = {"deadline": None, "suppress_health_check": list(HealthCheck), "derandomize": True}


@schema.parametrize()
@settings(**HYPOTHESIS)
def test_api_authenticated(case) -> None:
    _reset()
    with_key(case)
    case.call_and_validate(headers={"X-Service-API-Key": KEY}, checks=CHECKS)


def test_no_sequence_of_calls_is_a_server_error() -> None:
    base = schema.as_state_machine()

    class Calls(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            _fresh_state()

        def before_call(self, case: Any) -> None:
            _reset()
            with_key(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": {"X-Service-API-Key": KEY}}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

    run_state_machine_as_test(
        Calls, settings=settings(max_examples=SCENARIOS, stateful_step_count=STEPS, **HYPOTHESIS)
    )


without_key = schemathesis.openapi.from_asgi(
    "/openapi.json",
    app,
    config=SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": 2, "deterministic": True},
            "phases": {"examples": {"enabled": False}, "coverage": {"enabled": False}},
        }
    ),
)


@without_key.parametrize()
@settings(**HYPOTHESIS)
def test_api_without_key(case) -> None:
    """Without the key every protected route answers 401 (or 429, 503) before it looks at the input."""
    _reset(unlock=True)
    case.call_and_validate(checks=[not_a_server_error, status_code_conformance])


def test_the_stream_check_fails_on_a_run_that_crashed() -> None:
    """The custom check reads the body `RunRegistry` sends when a stage body raises, and fails on it."""

    async def crashes(run: Run) -> None:
        await run.emit("step", {"stage": "devices", "phase": "start", "message": "starting"})
        raise KeyError("node")

    async def body() -> str:
        chunks = RunRegistry().stream(
            "/dcim/devices/create/stream?", crashes, last_event_id=None, run_id=None
        )
        return "".join([chunk async for chunk in chunks])

    crashed = SimpleNamespace(
        headers={"content-type": ["text/event-stream"]}, content=asyncio.run(body()).encode()
    )
    with pytest.raises(AssertionError, match="internal error: KeyError"):
        stream_completes_without_internal_error(None, crashed, None)
    masked = 'id: 1\nevent: complete\ndata: {"ok":false,"error":{"source":"proxmox","status":null,"detail":"Proxmox endpoint 1 GET nodes: TypeError: x"}}\n\n'
    with pytest.raises(AssertionError, match="TypeError"):
        stream_completes_without_internal_error(
            None, SimpleNamespace(headers=crashed.headers, content=masked.encode()), None
        )
    cut = SimpleNamespace(headers=crashed.headers, content=b"id: 1\nevent: step\ndata: {}\n\n")
    with pytest.raises(AssertionError, match="did not end with `complete`"):
        stream_completes_without_internal_error(None, cut, None)
