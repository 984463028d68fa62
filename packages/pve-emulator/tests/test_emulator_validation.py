"""Parameter validation and return checking work on plain data (real mode reuses them)."""

from __future__ import annotations

import pytest
from pve_emulator.returns import check_response
from pve_emulator.schema import load_schema
from pve_emulator.validation import ParameterError, validate_params

SCHEMA = load_schema()


def _errors(method: str, path: str, params: dict) -> dict[str, str]:
    with pytest.raises(ParameterError) as info:
        validate_params(SCHEMA.operation(method, path), params)
    return {e.field: e.message for e in info.value.errors}


def test_coerces_form_strings_to_schema_types() -> None:
    out = validate_params(
        SCHEMA.operation("POST", "/nodes/{node}/qemu"),
        {"node": "pve1", "vmid": "120", "cores": "2", "onboot": "true", "net0": "virtio,bridge=vmbr0"},
    )
    assert out == {"node": "pve1", "vmid": 120, "cores": 2, "onboot": 1, "net0": "virtio,bridge=vmbr0"}


def test_names_each_bad_field() -> None:
    errors = _errors(
        "POST", "/nodes/{node}/qemu", {"node": "pve1", "vmid": "12", "cores": "many", "bogus": "1"}
    )
    assert set(errors) == {"vmid", "cores", "bogus"}
    assert "integer" in errors["cores"] and "not defined" in errors["bogus"]


def test_required_enum_range_pattern_and_property_strings() -> None:
    assert "missing" in _errors("POST", "/nodes/{node}/qemu", {"node": "pve1"})["vmid"]
    assert (
        "enumeration"
        in _errors("POST", "/nodes/{node}/qemu", {"node": "pve1", "vmid": 150, "ostype": "beos"})["ostype"]
    )
    assert (
        "minimum" in _errors("POST", "/nodes/{node}/qemu", {"node": "pve1", "vmid": 150, "cores": 0})["cores"]
    )
    assert (
        "format"
        in _errors(
            "POST", "/nodes/{node}/qemu", {"node": "pve1", "vmid": 150, "net0": "virtio,bridge=vmbr0,wat=1"}
        )["net0"]
    )
    assert "format" in _errors("GET", "/nodes/{node}/qemu", {"node": "bad node!"})["node"]


def test_check_returns_reports_shape_problems() -> None:
    op = SCHEMA.operation("GET", "/version")
    assert check_response(op, {"version": "9.1.2", "release": "9.1", "repoid": "abcdef12"}) == []
    problems = [str(drift) for drift in check_response(op, {"version": 9, "repoid": "abcdef12"})]
    assert any("version" in p for p in problems) and any("release" in p for p in problems)


@pytest.mark.parametrize("text", ["²", "\u0663", "\uff11", "9" * 5000])
def test_integers_are_ascii_digits_and_bounded(text: str) -> None:
    """`int()` takes "\u0663" and refuses "²" and 5,000 digits; the wire takes ASCII digits, a 400 otherwise."""
    errors = _errors("POST", "/nodes/{node}/qemu", {"node": "pve1", "vmid": text, "cores": text})
    assert set(errors) == {"vmid", "cores"}


@pytest.mark.parametrize("text", ["nan", "inf", "-Infinity"])
def test_numbers_must_be_finite(text: str) -> None:
    """JSON cannot carry NaN or infinity, so storing one would break every later read of the guest."""
    errors = _errors("POST", "/nodes/{node}/qemu", {"node": "pve1", "vmid": "150", "cpulimit": text})
    assert set(errors) == {"cpulimit"}
