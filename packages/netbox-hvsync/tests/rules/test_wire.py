"""The plugin loads the wire data it shares with the backend from contracts/wire (one source)."""

import json
from pathlib import Path

import pytest
from netbox_hvsync import wire
from netbox_hvsync.rules import redaction
from netbox_hvsync.wire import keys

CONTRACTS = Path(__file__).resolve().parents[4] / "contracts"
CASES = json.loads((CONTRACTS / "redaction-cases.json").read_text(encoding="utf-8"))["cases"]


def test_wire_is_the_contracts_folder_and_the_backends_too() -> None:
    backend_wire = CONTRACTS.parent / "packages" / "hvsync-backend" / "src" / "hvsync_backend" / "wire"
    assert Path(wire.__file__).resolve().parent == (CONTRACTS / "wire").resolve() == backend_wire.resolve()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_plugin_redaction_answers_the_shared_cases(case: dict) -> None:
    """Backend and plugin redaction agree: both answer contracts/redaction-cases.json alike."""
    assert redaction.redact(case["input"], case.get("known", [])) == case["expected"]


def test_every_selected_kind_offered_to_the_plugin_has_a_backend_route() -> None:
    offered = {k.kind: k for k in wire.SELECTED_KINDS.values() if k.object_type is not None}
    assert set(offered) == {"vm", "storage", "backup", "snapshot", "task-history"}
    assert all(k.route == f"/sync/individual/{k.kind}" for k in offered.values())


def test_the_vm_key_the_plugin_reads_is_the_one_the_backend_writes() -> None:
    key = keys.format_key("vm", endpoint=keys.endpoint_identity(plugin_pk=4), vmid=123)
    assert keys.parse_key(key) == ("vm", {"endpoint": "inv4", "vmid": "123"})
