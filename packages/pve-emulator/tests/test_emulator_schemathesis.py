"""Property-based run over the emulator's own OpenAPI document (all 646 operations, in-process ASGI, mock
mode, logged in as root@pam with a ticket): no input and no sequence of calls produces a server error.

All four schemathesis phases run with a fixed seed, derandomized: examples, coverage (boundary and invalid
values of every parameter, unexpected methods, missing required fields), fuzzing, and stateful sequences
along the links schemathesis infers between operations. Every case (and every stateful scenario) starts
from its own copy of the demo cluster, so what one case changed cannot steer another and the run is the same
on every machine. Cases whose path values are not the invalid input under test address objects that exist
in that cluster (`pve1`, VM 100, the storage `local`, ...; in the fuzzing phase, half of them), so they
reach the handlers instead of stopping at 404.

A 5xx fails the run unless it is one Proxmox VE itself answers, recognised by exact status and exact
message (`PARITY`); any other 5xx, including the same status with another message, still fails.
"""

from __future__ import annotations

import os
import pickle
import zlib
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pve_emulator.config import (
    DEFAULT_PASSWORD,
    DEFAULT_TOKEN_ID,
    DEFAULT_TOKEN_SECRET,
    DEFAULT_USER,
    EmulatorConfig,
)
from pve_emulator.mock.scenarios import demo
from pve_emulator.mock.state import ClusterState
from pve_emulator.server import create_app
from pve_emulator.validation import decimal
from pve_refusals import is_lifecycle_refusal
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.meta import TestPhase
from schemathesis.generation.modes import GenerationMode
from schemathesis.python import asgi

SEED = 20261125
#: Examples per operation in the fuzzing phase (PVE_FUZZ_EXAMPLES raises it for a longer local run).
EXAMPLES = int(os.environ.get("PVE_FUZZ_EXAMPLES", "3"))
#: Stateful scenarios (sequences of linked calls) and the most calls in one.
SCENARIOS = int(os.environ.get("PVE_FUZZ_SCENARIOS", "60"))
STEPS = 10
CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": EXAMPLES, "deterministic": True},
        "phases": {"stateful": {"max-steps": STEPS}},
    }
)

APP = create_app(EmulatorConfig(response_cache=False))
#: A ticket rather than the API token: operations flagged `allowtoken: 0` (password and token changes)
#: refuse tokens with 403 and would never reach their validation and handlers.
AUTH: dict[str, Any] = {
    "cookies": {"PVEAuthCookie": APP.signer.issue(DEFAULT_USER)},
    "headers": {"CSRFPreventionToken": APP.signer.csrf_token(DEFAULT_USER)},
}

#: 5xx answers Proxmox VE gives itself, so the emulator gives them too: (status, operation, or None for
#: any path, the exact message with `{method}`, `{path}` and `{vmid}` filled in from the request).
PARITY: list[tuple[int, str | None, str]] = [
    # pve-http-server: a method the path does not define (the coverage phase sends PATCH, TRACE, ...).
    (501, None, "Method '{method} {path}' not implemented\n"),
    # PVE::QemuServer::Agent: the agent of a stopped VM, or of one without `agent: 1`, cannot be asked.
    (500, "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces", "VM {vmid} is not running\n"),
    (500, "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces", "No QEMU guest agent configured\n"),
    # PVE::API2::LXC: the interfaces of a stopped container.
    (500, "GET /nodes/{node}/lxc/{vmid}/interfaces", "CT {vmid} not running\n"),
]


def demo_cluster() -> ClusterState:
    return demo(DEFAULT_USER, DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET)


#: The demo cluster built once: every case unpickles a copy of its own, which shares nothing with another
#: case's and is quicker than building the cluster again (that runs its replication jobs every time).
DEMO = pickle.dumps(demo_cluster())


def fresh_state() -> None:
    """A new demo cluster for the next case."""
    APP.backend.state = pickle.loads(DEMO)


def known_objects(state: ClusterState) -> list[tuple[str, dict[str, str]]]:
    """(a path fragment, path values that name existing objects together) for the demo cluster."""
    out: list[tuple[str, dict[str, str]]] = [("/nodes/", {"node": node}) for node in state.nodes]
    for guest in state.guests.values():
        ids = {"node": guest.node, "vmid": str(guest.vmid)}
        out.append((f"/{guest.kind}/", ids))
        out += [(f"/{guest.kind}/", {**ids, "snapname": name}) for name in guest.snapshots]
    for node in state.nodes:
        out += [("/nodes/", {"node": node, "storage": storage}) for storage in state.storages]
        out += [("/network/", {"node": node, "iface": iface}) for iface in state.networks.get(node, {})]
    for volume in state.volumes.values():
        ids = {"node": volume.node or "pve1", "storage": volume.storage, "volume": volume.volid}
        out.append(("/content/", ids))
    out += [("/tasks/", {"node": task.node, "upid": task.upid}) for task in state.tasks.values()]
    for user in state.users.values():
        out.append(("/users/", {"userid": user.userid}))
        out += [("/token/", {"userid": user.userid, "tokenid": name}) for name in user.tokens]
    out += [("/storage/", {"storage": name}) for name in state.storages]
    out += [("/pools/", {"poolid": name}) for name in state.pools]
    out += [("/groups/", {"groupid": name}) for name in state.groups]
    out += [("/zones/", {"zone": name}) for name in state.sdn_zones]
    out += [("/vnets/", {"vnet": name}) for name in state.sdn_vnets]
    for vnet, subnets in state.sdn_subnets.items():
        out += [("/subnets/", {"vnet": vnet, "subnet": name}) for name in subnets]
    out += [("/cluster/backup/", {"id": name}) for name in state.backup_jobs]
    out += [("/cluster/replication/", {"id": name}) for name in state.replication_jobs]
    return out


KNOWN = known_objects(pickle.loads(DEMO))


def known_values(path: str) -> list[dict[str, str]]:
    """The value sets naming the most path variables of `path` at once (empty if none applies)."""
    variables = {part[1:-1] for part in path.split("/") if part.startswith("{")}
    fitting = [values for fragment, values in KNOWN if fragment in path and set(values) <= variables]
    most = max((len(values) for values in fitting), default=0)
    return [values for values in fitting if len(values) == most]


def fuzzed_document() -> dict[str, Any]:
    """The emulator's `/openapi.json` without its security schemes: the run logs in itself (`AUTH`); left
    in, schemathesis would fill the token header and the cookie with generated values and most cases
    would stop at 401."""
    with asgi.get_client(APP) as client:
        document = client.get("/openapi.json").json()
    document.pop("security", None)
    document["components"].pop("securitySchemes", None)
    for item in document["paths"].values():
        for operation in item.values():
            operation.pop("security", None)
    return document


schema = schemathesis.openapi.from_dict(fuzzed_document(), config=CONFIG)
schema.app = APP


@schema.hook
def map_case(context: Any, case: Any) -> Any:
    """Point the path at existing objects (`KNOWN`) unless the path values are the invalid input under test;
    in the fuzzing phase half of the cases keep their generated values (chosen by a hash of the case, so
    the run stays deterministic). Stateful cases take their path values from earlier answers."""
    meta = case.meta
    known = known_values(case.operation.path.removeprefix("/api2/json"))
    if not known or meta is None or meta.phase.name == TestPhase.STATEFUL:
        return case
    path = meta.components.get(ParameterLocation.PATH)
    if path is not None and path.mode == GenerationMode.NEGATIVE:
        return case
    digest = zlib.crc32(repr((case.method, case.path_parameters, case.query, case.body)).encode())
    if meta.phase.name == TestPhase.FUZZING and digest % 2:
        return case
    case.path_parameters = {**(case.path_parameters or {}), **known[(digest >> 1) % len(known)]}
    return case


def is_parity_answer(response: Any, case: Any) -> bool:
    """Whether a 5xx is one of `PARITY`, by exact status and exact message."""
    if response.status_code < 500:
        return False
    try:
        message = response.json().get("message")
    except ValueError:
        return False
    path = "/" + response.request.url.split("://", 1)[1].split("/", 1)[1].split("?", 1)[0]
    values = {
        "method": response.request.method.upper(),
        "path": path.removeprefix("/api2/json"),
        "vmid": decimal((case.path_parameters or {}).get("vmid")),  # as the validated integer
    }
    operation = f"{case.method.upper()} {case.operation.path.removeprefix('/api2/json')}"
    if is_lifecycle_refusal(operation, response.status_code, message):
        return True
    return any(
        response.status_code == status and label in (None, operation) and message == template.format(**values)
        for status, label, template in PARITY
    )


def check(response: Any, case: Any) -> None:
    if not is_parity_answer(response, case):
        case.validate_response(response, checks=[not_a_server_error])


def test_the_document_has_every_operation() -> None:
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(APP.schema.operations) == 646


def test_the_document_is_valid_json_schema() -> None:
    """Every parameter, body and answer schema is valid JSON Schema (2020-12, what OpenAPI 3.1 uses), and
    every default and enum value it states is a value of that schema."""
    document = fuzzed_document()
    problems = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            shapes = [p["schema"] for p in operation["parameters"]]
            for content in operation.get("requestBody", {}).get("content", {}).values():
                shapes.append(content["schema"])
            for answer in operation["responses"].values():
                shapes += [c["schema"] for c in answer.get("content", {}).values()]
            for shape in shapes:
                try:
                    Draft202012Validator.check_schema(shape)
                except SchemaError as exc:
                    problems.append(f"{method} {path}: {exc.message}")
                for sub in _subschemas(shape):
                    bare = {k: v for k, v in sub.items() if k not in ("default", "enum")}
                    values = [*sub.get("enum", []), *([sub["default"]] if "default" in sub else [])]
                    problems += [
                        f"{method} {path}: {value!r} is not a value of {bare}"
                        for value in values
                        if not Draft202012Validator(bare).is_valid(value)
                    ]
    assert problems == []


def _subschemas(shape: dict[str, Any]) -> Any:
    yield shape
    for key in ("properties", "patternProperties"):
        for sub in (shape.get(key) or {}).values():
            yield from _subschemas(sub)
    if isinstance(shape.get("items"), dict):
        yield from _subschemas(shape["items"])


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_input_is_a_server_error(case: Any) -> None:
    fresh_state()
    check(case.call(**AUTH), case)


def test_no_sequence_of_calls_is_a_server_error() -> None:
    base = schema.as_state_machine()

    class Calls(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            fresh_state()

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return dict(AUTH)

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            check(response, case)

    run_state_machine_as_test(
        Calls,
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
