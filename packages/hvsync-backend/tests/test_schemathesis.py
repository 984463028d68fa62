"""Property-based run over the backend's own OpenAPI (in-process ASGI): no input produces a server error,
and responses match the documented schemas and status codes. Proxmox calls go to a fake answering empty lists (retries and backoff are covered in test_hv_client)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import schemathesis
from hvsync_backend.app import create_app
from hvsync_backend.auth.lockout import LockoutTracker
from hvsync_backend.config import Settings
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance, status_code_conformance

KEY = "schemathesis-" + "q" * 40
_DATA = Path(tempfile.mkdtemp(prefix="hvsync-st-"))
app = create_app(Settings(data_dir=_DATA, bcrypt_rounds=4))
ctx = app.state.context
ctx.keys.register_bootstrap(KEY, "schemathesis")
ctx.proxmox.transport_factory = lambda target: httpx.MockTransport(
    lambda request: httpx.Response(200, json={"data": []})
)
# The routes of this issue (service, keys, endpoint registry, Proxmox reads); the sync engine's stage
# routes are fuzzed by their own suite.
OWN_TAGS = ["service", "auth", "inventory endpoint", "hv endpoints", "hv"]
schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(tag=OWN_TAGS)


def _reset() -> None:
    """The fuzzer may deactivate or delete our key and trigger lockouts; start every case clean."""
    ctx.lockout = LockoutTracker(5, 300)
    if ctx.keys.verify(KEY) is None:
        ctx.keys.create(label="schemathesis", raw_key=KEY)


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_authenticated(case) -> None:
    _reset()
    case.call_and_validate(
        headers={"X-Service-API-Key": KEY},
        checks=[not_a_server_error, status_code_conformance, response_schema_conformance],
    )


@schema.parametrize()
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_without_key(case) -> None:
    _reset()
    case.call_and_validate(checks=[not_a_server_error, status_code_conformance])
