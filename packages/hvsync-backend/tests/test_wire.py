"""The backend loads the shared wire data from contracts/wire (one source with the plugin)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hvsync_backend import wire
from hvsync_backend.wire import keys, redaction

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts"
CASES = json.loads((CONTRACTS / "redaction-cases.json").read_text(encoding="utf-8"))["cases"]


def test_wire_is_the_contracts_folder() -> None:
    assert Path(wire.__file__).resolve().parent == (CONTRACTS / "wire").resolve()


def test_wire_json_matches_its_schema() -> None:
    schema = json.loads((CONTRACTS / "wire.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(dict(wire.DATA))
    assert len(wire.STAGES) == 13 and wire.STAGE_SLUGS[0] == "devices"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_shared_redaction_cases(case: dict) -> None:
    assert redaction.redact(case["input"], case.get("known", [])) == case["expected"]


def test_key_format_round_trips() -> None:
    key = keys.format_key("vm_interface", endpoint=keys.endpoint_identity(plugin_pk=3), vmid=101, slot="net0")
    assert key == "inv3|vm|101|nic|net0"
    assert keys.parse_key(key) == ("vm_interface", {"endpoint": "inv3", "vmid": "101", "slot": "net0"})
    assert keys.parse_key("ep7|cluster") == ("cluster", {"endpoint": "ep7"})
    assert keys.parse_key("hand edited") is None


def test_stages_and_selected_kinds_come_from_the_wire_data() -> None:
    from hvsync_backend.sync import individual
    from hvsync_backend.sync.registry import FULL_UPDATE_ROUTE, STAGES

    assert [(s.slug, s.route, s.title) for s in STAGES] == [(w.slug, w.route, w.title) for w in wire.STAGES]
    assert FULL_UPDATE_ROUTE == wire.FULL_UPDATE_ROUTE == "/full-update/stream"
    assert tuple(wire.SELECTED_KINDS) == individual.KINDS


def test_both_wheels_carry_the_wire_data(tmp_path: Path) -> None:
    """`wire` is a symlink in the source tree; a built wheel must hold the files themselves."""
    import subprocess
    import zipfile

    uv = CONTRACTS.parent / ".tools" / "bin" / "uv"
    assert uv.exists(), "make setup installs uv into .tools/"
    for package, module in (("hvsync-backend", "hvsync_backend"), ("netbox-hvsync", "netbox_hvsync")):
        out = tmp_path / package
        subprocess.run(
            [str(uv), "build", "--wheel", "-q", "-o", str(out), str(CONTRACTS.parent / "packages" / package)],
            check=True,
            timeout=120,
        )
        [wheel] = out.glob("*.whl")
        names = zipfile.ZipFile(wheel).namelist()
        for name in ("__init__.py", "keys.py", "numbers.py", "redaction.py", "sse.py", "wire.json"):
            assert f"{module}/wire/{name}" in names, (wheel.name, name)
        with zipfile.ZipFile(wheel).open(f"{module}/wire/wire.json") as packed:
            assert json.load(packed) == dict(wire.DATA)


def test_change_sets_the_backend_builds_match_the_schema_and_parse_back() -> None:
    from hvsync_backend.inventory.apply_path import change_set
    from hvsync_backend.wire import change_sets

    schema = json.loads((CONTRACTS / "wire" / "change-set.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    bodies = [
        change_set("POST", "virtualization/virtual-machines", [{"name": "a", "tags": [{"slug": "hvsync"}]}]),
        change_set("PATCH", "dcim/devices", [{"id": 4, "status": "offline"}]),
        change_set("DELETE", "plugins/hvsync/snapshots", [{"id": 9}]),
    ]
    for body in bodies:
        validator.validate(body)
        parsed = change_sets.parse(body)
        assert parsed.id == body["id"] and [op.op for op in parsed.operations] in (
            ["create"],
            ["update"],
            ["delete"],
        )
    # the schema refuses what parse refuses
    bad = {**bodies[0], "operations": [{"op": "create", "path": "users/users", "data": {}}]}
    assert not validator.is_valid(bad)
    with pytest.raises(change_sets.ChangeSetError) as refused:
        change_sets.parse(bad)
    assert refused.value.field == "operations[0].path"
    with_ref = {
        **bodies[0],
        "operations": [
            {"op": "create", "path": "virtualization/virtual-machines", "ref": "vm", "data": {"name": "a"}},
            {
                "op": "create",
                "path": "virtualization/interfaces",
                "data": {"virtual_machine": {"$ref": "vm"}},
            },
        ],
    }
    validator.validate(with_ref)
    second = change_sets.parse(with_ref).operations[1]
    assert change_sets.resolve_references(second.data, {"vm": 12}) == {"virtual_machine": 12}
    assert change_sets.error_status([400, 403]) == 403 and change_sets.error_status([404, 400]) == 404
