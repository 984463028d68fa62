"""The backend's schemathesis run against a backend configured with a real NetBox and the emulator (issue
39 section 5): every operation of its OpenAPI, all four phases, 0 server errors, and no operation answered
429, so the lockout never hid an operation's logic from the fuzzer.

The in-process run (packages/hvsync-backend/tests/test_schemathesis.py) uses a fake NetBox; here the stage
streams write to a real NetBox (its own instance, tests/e2e/conftest.py) from a small emulated cluster.
All four phases run over every operation, except the coverage phase over the 14 stream routes (each of
their cases runs a stage; the in-process run covers their boundaries).
Every call carries the valid key, and nothing resets the lockout between cases: a 429 would mean the
fuzzer's own address had been locked. Before each case the key is made active again, and the NetBox and
Proxmox endpoints the fuzzer may have moved or disabled are restored (other Proxmox endpoints it created
are disabled: their fuzzed hosts would only time out). Bounded: a few cases per operation and phase.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from conftest import NetBox, add_plugin_endpoint, parse_stream
from hvsync_backend.app import create_app
from hvsync_backend.config import Settings
from hvsync_backend.db.models import HvEndpoint
from hvsync_backend.endpoints.schemas import (
    HvEndpointCreate,
    HvEndpointUpdate,
    InventoryEndpointCreate,
    InventoryEndpointUpdate,
)
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from pve_emulator.testing import running_emulator
from schemathesis.checks import not_a_server_error, response_schema_conformance, status_code_conformance
from schemathesis.config import SchemathesisConfig
from sqlalchemy import update

SEED = 20261202
EXAMPLES = int(os.environ.get("HVSYNC_E2E_FUZZ_EXAMPLES", "3"))
SCENARIOS = max(2, EXAMPLES)
STEPS = 5
KEY = "e2e-fuzz-" + "f" * 40
HEADERS = {"X-Service-API-Key": KEY}
CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": EXAMPLES, "deterministic": True},
        "max-stream-events": 100_000,
        "request-timeout": 300,
        "phases": {"stateful": {"max-steps": STEPS}},
        # Each stream case that passes validation runs a stage against NetBox: one fuzzed case each, and no
        # coverage phase for them here (its every-boundary cases run in process against the fake NetBox,
        # packages/hvsync-backend/tests/test_schemathesis.py), so the file stays within a few minutes.
        "operations": [
            {
                "include-path-regex": r"/stream$",
                "generation": {"max-examples": 1},
                "phases": {"coverage": {"enabled": False}},
            }
        ],
    }
)
HYPOTHESIS = {"deadline": None, "suppress_health_check": list(HealthCheck), "derandomize": True}


class Live:
    """The backend app, its context and the bodies that restore its two endpoints."""

    app: Any = None
    inventory: dict[str, Any] = {}
    hv: dict[str, Any] = {}
    inventory_id = 0
    hv_id = 0


LIVE = Live()
_DATA = Path(tempfile.mkdtemp(prefix="hvsync-e2e-fuzz-"))
LIVE.app = create_app(
    Settings(data_dir=_DATA, database_url=f"sqlite:///{_DATA / 'hvsync.db'}", bcrypt_rounds=4)
)
schema = schemathesis.openapi.from_asgi("/openapi.json", LIVE.app, config=CONFIG)


@pytest.fixture(scope="module", autouse=True)
def configured(netbox: NetBox) -> Iterator[None]:
    """NetBox and a 4-guest emulated cluster registered with the backend, as the plugin would push them."""
    ctx = LIVE.app.state.context
    with running_emulator(scenario="large", vms=4, nodes=1) as emu:
        pk = add_plugin_endpoint(netbox, "fuzz cluster")
        key, token = netbox.token_parts
        host, port = netbox.url.split("//", 1)[1].split(":")
        LIVE.inventory = {
            "name": "netbox",
            "ip_address": host,
            "port": int(port),
            "scheme": "http",
            "token_version": 2,
            "token": token,
            "token_key": key,
            "verify_ssl": False,
            "enabled": True,
        }
        user, token_name = emu.token_id.split("!")
        LIVE.hv = {
            "name": f"fuzz cluster (inv:{pk})",
            "ip_address": "127.0.0.1",
            "domain": "",
            "port": emu.port,
            "scheme": "http",
            "username": user,
            "token_name": token_name,
            "token_value": emu.token_secret,
            "access_methods": ["token"],
            "verify_ssl": False,
            "enabled": True,
            "timeout": 30,
            "max_retries": 1,
        }
        ctx.keys.register_bootstrap(KEY, "fuzzer")
        LIVE.inventory_id = ctx.registry.create_inventory(InventoryEndpointCreate(**LIVE.inventory)).id
        LIVE.hv_id = ctx.registry.create_hv(HvEndpointCreate(**LIVE.hv)).id
        yield
    ctx.engine.dispose()


def _restore() -> None:
    """Our key active, our two endpoints pointing where they belong; the lockout is left alone."""
    ctx = LIVE.app.state.context
    if ctx.keys.verify(KEY) is None:
        ctx.keys.create(label="fuzzer", raw_key=KEY)
    ctx.registry.update_inventory(LIVE.inventory_id, InventoryEndpointUpdate(**LIVE.inventory))
    ctx.registry.update_hv(LIVE.hv_id, HvEndpointUpdate(**LIVE.hv))
    with ctx.session_factory() as session:
        session.execute(update(HvEndpoint).values(enabled=HvEndpoint.id == LIVE.hv_id))
        session.commit()


def with_key(case: Any) -> None:
    """The valid key in the case itself: schemathesis fills the security scheme's header with generated
    values, which win over the `headers=` of the call (every such call was a counted failure, and the
    lockout engaged on the fuzzer's own address: issue 39's 19 operations answered 429)."""
    case.headers = {**(case.headers or {}), **HEADERS}


@schemathesis.check
def not_locked_out(ctx: Any, response: Any, case: Any) -> bool | None:
    """The fuzzer's own address is never locked: its key is valid on every call."""
    if response.status_code == 429:
        raise AssertionError(f"429 (lockout) on {case.method} {case.path}: {response.text[:200]}")
    return True


@schemathesis.check
def stream_completes(ctx: Any, response: Any, case: Any) -> bool | None:
    """A stage stream ends with `complete` and no frame reports an internal error."""
    if not response.headers.get("content-type", [""])[0].startswith("text/event-stream"):
        return None
    frames = parse_stream(response.content.decode("utf-8"))
    if not frames or frames[-1].event != "complete":
        raise AssertionError(f"the stream did not end with `complete` ({[f.event for f in frames][-3:]})")
    for frame in frames:
        for problem in (
            frame.data.get("error"),
            frame.data.get("problem"),
            *(frame.data.get("errors") or []),
        ):
            if isinstance(problem, dict) and str(problem.get("detail", "")).startswith("internal error"):
                raise AssertionError(f"{frame.event} frame {frame.id}: {problem['detail']}")
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    not_locked_out,
    stream_completes,
]


@schema.parametrize()
@settings(**HYPOTHESIS)
def test_every_operation_against_real_netbox_and_the_emulator(case) -> None:
    _restore()
    with_key(case)
    case.call_and_validate(headers=HEADERS, checks=CHECKS)


def test_no_sequence_of_calls_is_a_server_error_or_a_lockout() -> None:
    base = schema.as_state_machine()

    class Calls(base):  # type: ignore[misc, valid-type]
        def before_call(self, case: Any) -> None:
            _restore()
            with_key(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": HEADERS}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

    run_state_machine_as_test(
        Calls, settings=settings(max_examples=SCENARIOS, stateful_step_count=STEPS, **HYPOTHESIS)
    )


def test_the_lockout_never_engaged() -> None:
    """After every case above: the fuzzer's address holds no counted failure at all."""
    lockout = LIVE.app.state.context.lockout
    assert lockout.failures("testclient") == 0 and lockout.retry_after("testclient") is None
