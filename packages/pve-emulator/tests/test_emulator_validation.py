"""Parameter validation and return checking work on plain data (real mode reuses them)."""

from __future__ import annotations

import copy
import time
from typing import Any

import httpx
import pytest
from pve_emulator.errors import ParameterError
from pve_emulator.returns import check_response
from pve_emulator.schema import load_schema
from pve_emulator.testing import EmulatorHandle
from pve_emulator.validation import compiled_pattern, python_regex, validate_params

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


# -- found by the schemathesis run (test_emulator_schemathesis.py): each is a 400 naming the field, nothing
# -- written. `pve` and `api` are this package's running demo emulator and a token client on it.


def _refused(pve: EmulatorHandle, api: httpx.Client, method: str, path: str, **body: Any) -> dict[str, str]:
    """Send a request that must be refused with 400; return its `errors` after checking nothing changed."""
    before = copy.deepcopy(pve.state)
    resp = api.request(method, path, data=body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["data"] is None
    assert pve.state == before
    return resp.json()["errors"]


def test_compiled_bounds_and_flags_are_numbers() -> None:
    """Proxmox's dump writes some numbers as strings (`"minimum": "0"` on every `bwlimit`, `"optional": "1"`,
    an integer enum of "1", "2", ...): compared as they were, a request raised TypeError (a 500) and the
    OpenAPI document was invalid. The compiler writes them as numbers and drops `"enum": null`."""
    for release in ("9.1", "8.4"):
        for op in load_schema(release).operations:
            for where, spec in _specs(op):
                for key in ("minimum", "maximum", "minLength", "maxLength", "optional"):
                    assert not isinstance(spec.get(key), str), (op.key, where, key, spec[key])
                assert "enum" not in spec or isinstance(spec["enum"], list), (op.key, where)
                if spec.get("type") in ("integer", "number") and "enum" in spec:
                    assert all(isinstance(v, int | float) for v in spec["enum"]), (op.key, where)


def _specs(op: Any) -> Any:
    """Every parameter schema of an operation, nested ones (property strings, items, oneOf) included."""
    stack = [(name, spec) for name, spec in op.params.items()]
    while stack:
        where, spec = stack.pop()
        if not isinstance(spec, dict):
            continue
        yield where, spec
        for key in ("format", "properties"):
            if isinstance(spec.get(key), dict):
                stack += [(f"{where}.{k}", v) for k, v in spec[key].items()]
        stack += [(f"{where}[]", spec.get("items"))]
        stack += [(f"{where}|", s) for s in spec.get("oneOf") or []]


def test_a_bound_given_as_a_string_is_checked(pve: EmulatorHandle, api: httpx.Client) -> None:
    errors = _refused(pve, api, "POST", "/nodes/pve1/qemu", vmid="150", bwlimit="-1")
    assert set(errors) == {"bwlimit"} and "minimum" in errors["bwlimit"]
    errors = _refused(pve, api, "POST", "/nodes/pve1/qemu/100/migrate", target="pve2", bwlimit="-5")
    assert set(errors) == {"bwlimit"}
    # inside a property string: bwlimit=clone=<number, minimum "0">
    errors = _refused(pve, api, "PUT", "/cluster/options", bwlimit="clone=-1")
    assert set(errors) == {"bwlimit"} and "minimum" in errors["bwlimit"]
    errors = _refused(pve, api, "POST", "/nodes/pve1/ceph/osd", dev="/dev/sdb", **{"osds-per-device": "0"})
    assert set(errors) == {"osds-per-device"}


def test_an_enum_given_as_null_constrains_nothing(pve: EmulatorHandle, api: httpx.Client) -> None:
    """`compression` of download-url has `"enum": null` in the dump; checking a value against it raised
    TypeError. It now names only the fields that are wrong."""
    errors = _refused(
        pve,
        api,
        "POST",
        "/nodes/pve1/storage/local/download-url",
        url="https://example.invalid/x.iso",
        content="iso",
        filename="x.iso",
        compression="zst",
        **{"verify-certificates": "maybe"},
    )
    assert set(errors) == {"verify-certificates"}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        # (?^:[^\x00-\x08\x10-\x1F\x7F]+): no control characters
        ("PUT", "/nodes/pve1/lxc/200/config", {"entrypoint": "/sbin/init\x01"}, "entrypoint"),
        # (?:(?^i:[a-z0-9_][a-z0-9_\-\+\.]*);)*(?^i:...): a ;-separated tag list
        ("PUT", "/cluster/options", {"registered-tags": "ok;not a tag"}, "registered-tags"),
        # (?^:[A-Za-z0-9\.\-_]+)
        (
            "POST",
            "/access/domains",
            {
                "realm": "oidc1",
                "type": "openid",
                "issuer-url": "https://x.invalid",
                "client-id": "c",
                "groups-claim": "a b",
            },
            "groups-claim",
        ),
    ],
)
def test_perl_patterns_are_enforced(
    pve: EmulatorHandle, api: httpx.Client, method: str, path: str, body: dict[str, str], field: str
) -> None:
    """The schema's patterns are Perl regexes; `(?^:...)` and `(?^i:...)` (how Perl prints a compiled regex)
    did not compile in Python and went unchecked. They are translated to scoped flag groups and enforced."""
    errors = _refused(pve, api, method, path, **body)
    assert set(errors) == {field} and "regex" in errors[field]


def test_translated_patterns_compile_and_keep_their_meaning() -> None:
    assert python_regex("(?^:^[^:/\\s]+$)") == "(?-ims:^[^:/\\s]+$)"
    assert python_regex("(?^i:[a-z]+)") == "(?i-ms:[a-z]+)"
    tags = compiled_pattern("(?:(?^i:[a-z0-9_][a-z0-9_\\-\\+\\.]*);)*(?^i:[a-z0-9_][a-z0-9_\\-\\+\\.]*)")
    assert tags is not None and tags.fullmatch("Prod;web") and not tags.fullmatch("prod;;web")
    for release in ("9.1", "8.4"):
        for op in load_schema(release).operations:
            for where, spec in _specs(op):
                if "pattern" in spec:
                    assert compiled_pattern(spec["pattern"]) is not None, (op.key, where, spec["pattern"])


@pytest.mark.parametrize("name", ["net[n]", "net1000", "net01", "net\u0663", "net" + "9" * 5000])
def test_indexed_parameters_take_their_index_in_ascii(
    pve: EmulatorHandle, api: httpx.Client, name: str
) -> None:
    """`net[n]` stands for net0, net1, ...: the template itself was accepted as a parameter (and stored as a
    config key), and so was any run of Unicode digits (5,000 of them make `int()` raise: a 500 on the next
    read of the guest's NICs)."""
    errors = _refused(pve, api, "PUT", "/nodes/pve1/qemu/100/config", **{name: "virtio,bridge=vmbr0"})
    assert set(errors) == {name} and "not defined" in errors[name]
    assert validate_params(
        SCHEMA.operation("PUT", "/nodes/{node}/qemu/{vmid}/config"),
        {"node": "pve1", "vmid": "100", "net31": "virtio,bridge=vmbr0"},
    )["net31"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        # PVE's `storage:SIZE` allocation syntax (GiB): 400 nines made a float infinity when read back
        ("/nodes/pve1/qemu", {"vmid": "150", "scsi0": "local-lvm:" + "9" * 400}, "scsi0"),
        (
            "/nodes/pve1/lxc",
            {"vmid": "150", "ostemplate": "local:vztmpl/x.tar.zst", "rootfs": "local-lvm:" + "9" * 400},
            "rootfs",
        ),
        # the `size=` of a disk (format disk-size): ASCII digits, optional fraction and unit, 64 bits of bytes
        ("/nodes/pve1/qemu", {"vmid": "150", "scsi0": "local-lvm:vm-150-disk-0,size=" + "9" * 5000}, "scsi0"),
        ("/nodes/pve1/qemu", {"vmid": "150", "scsi0": "local-lvm:vm-150-disk-0,size=8589934592G"}, "scsi0"),
        ("/nodes/pve1/qemu", {"vmid": "150", "scsi0": "local-lvm:vm-150-disk-0,size=\u0663G"}, "scsi0"),
        # allocating a volume: 5,000 digits made int() raise (a 500)
        (
            "/nodes/pve1/storage/local-lvm/content",
            {"vmid": "150", "filename": "vm-150-disk-9", "size": "9" * 5000},
            "size",
        ),
        (
            "/nodes/pve1/storage/local-lvm/content",
            {"vmid": "150", "filename": "vm-150-disk-9", "size": "9" * 25 + "G"},
            "size",
        ),
    ],
)
def test_sizes_fit_in_64_bits(
    pve: EmulatorHandle, api: httpx.Client, path: str, body: dict[str, str], field: str
) -> None:
    """A disk size the model could not turn back into bytes was stored, and every later read of the guest
    lists, the storage content or /cluster/resources answered 500 (OverflowError)."""
    assert set(_refused(pve, api, "POST", path, **body)) == {field}
    assert api.get("/cluster/resources").status_code == 200


def test_integers_are_64_bit(pve: EmulatorHandle, api: httpx.Client) -> None:
    """Beyond 64 bits Perl (Proxmox) has only floats and the API's readers (Go, Rust, PostgreSQL) overflow."""
    errors = _refused(pve, api, "POST", "/nodes/pve1/qemu", vmid="150", cores="9" * 25)
    assert errors == {"cores": "value must have a maximum value of 9223372036854775807"}
    errors = _refused(pve, api, "PUT", "/nodes/pve1/qemu/100/config", memory="9" * 20)  # memory=current=...
    assert set(errors) == {"memory"} and "9223372036854775807" in errors["memory"]
    assert (
        validate_params(
            SCHEMA.operation("POST", "/nodes/{node}/qemu"),
            {"node": "pve1", "vmid": "150", "cores": str(2**63 - 1)},
        )["cores"]
        == 2**63 - 1
    )


def test_text_is_unicode_the_wire_can_carry(pve: EmulatorHandle, api: httpx.Client) -> None:
    """JSON can escape a lone surrogate (`"\\ud800"`); UTF-8 cannot encode it, so it must not be stored."""
    before = copy.deepcopy(pve.state)
    resp = api.put(
        "/nodes/pve1/qemu/100/config",
        content=b'{"description": "ok \\ud800"}',
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400 and set(resp.json()["errors"]) == {"description"}
    assert pve.state == before


@pytest.mark.timeout(60)
def test_patterns_match_in_linear_time(pve: EmulatorHandle, api: httpx.Client) -> None:
    """The OCI reference pattern took exponential time in Python's `re` on `"x" * 30 + "!"`: one request
    held the emulator's only event loop for good. Every pattern of the schema now answers long hostile
    inputs at once (the timeout fails this test instead of hanging it)."""
    resp = api.get("/nodes/pve1/query-oci-repo-tags", params={"reference": "x" * 5000 + "!"})
    assert resp.status_code == 400 and set(resp.json()["errors"]) == {"reference"}
    assert (
        api.get(
            "/nodes/pve1/query-oci-repo-tags", params={"reference": "docker.io/library/debian"}
        ).status_code
        == 200
    )
    patterns = {spec["pattern"] for op in SCHEMA.operations for _, spec in _specs(op) if "pattern" in spec}
    runs = ["x", "a-", "a.", "a/", "a_", "0", "0.", "a=b,", " ", "A-", "a:"]
    for pattern in patterns:
        compiled = compiled_pattern(pattern)
        assert compiled is not None
        for run in runs:
            started = time.perf_counter()
            compiled.fullmatch(run * 2000 + "!")
            assert time.perf_counter() - started < 1, (pattern, run)
