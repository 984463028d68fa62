"""The HTTP wire helpers both modes share: one public module, and what each helper does to data."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from pve_emulator import wire
from pve_emulator.errors import ApiError
from pve_emulator.schema import load_schema

PACKAGE = Path(wire.__file__).resolve().parent


def _imports_from_package(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pve_emulator")
        for alias in node.names
    ]


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}: from {module} import {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for module, name in _imports_from_package(path)
        if name.startswith("_")
    ]
    assert offenders == []


@pytest.mark.parametrize("module", ["app.py", "proxy/app.py"])
def test_both_modes_read_and_answer_through_the_wire_module(module: str) -> None:
    # each mode builds on the one front half both share (front.py), which reads requests through wire
    imports = _imports_from_package(PACKAGE / module)
    assert ("pve_emulator.front", "Front") in imports
    imported = {
        name
        for source, name in [*imports, *_imports_from_package(PACKAGE / "front.py")]
        if source == "pve_emulator.wire"
    }
    assert {"parse_pairs", "read_body", "take_paging", "bare_answer", "request_headers"} <= imported
    assert not any(source == "pve_emulator.app" for source, _ in imports)


def test_every_public_wire_function_explains_itself() -> None:
    functions = [
        (name, obj)
        for name, obj in vars(wire).items()
        if inspect.isfunction(obj) and obj.__module__ == wire.__name__
    ]
    assert len(functions) >= 10
    assert [name for name, obj in functions if name.startswith("_") or not inspect.getdoc(obj)] == []


def test_split_path_strips_the_real_prefix_and_keeps_encoded_slashes() -> None:
    scope: dict[str, Any] = {"path": "/api2/json/nodes/pve1/storage/local/content/local:backup/x"}
    scope["raw_path"] = b"/api2/json/nodes/pve1/storage/local/content/local%3Abackup%2Fx?x=1"
    assert wire.split_path(scope) == ("/nodes/pve1/storage/local/content/local%3Abackup%2Fx", True)
    assert wire.split_path({"path": "/api2/json"}) == ("/", True)
    assert wire.split_path({"path": "/version"}) == ("/version", False)


def test_parse_pairs_keeps_repeats_in_order_and_blank_values() -> None:
    assert wire.parse_pairs("a=1&b=&a=2&a=3") == {"a": ["1", "2", "3"], "b": ""}


def test_request_headers_and_cookie_value() -> None:
    headers = wire.request_headers({"headers": [(b"Cookie", b"x=1; PVEAuthCookie=PVE:abc==; y=2")]})
    assert headers == {"cookie": "x=1; PVEAuthCookie=PVE:abc==; y=2"}
    assert wire.cookie_value(headers["cookie"], "PVEAuthCookie") == "PVE:abc=="
    assert wire.cookie_value(headers["cookie"], "missing") is None


async def test_read_body_json_form_and_refusals() -> None:
    def receiver(*chunks: bytes):
        messages = [{"body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

        async def receive() -> dict[str, Any]:
            return messages.pop(0)

        return receive

    assert await wire.read_body(receiver(b'{"a": ', b"[1, 2]}"), {"content-type": "application/json"}) == {
        "a": [1, 2]
    }
    assert await wire.read_body(receiver(b"net0=virtio&tags=a&tags=b"), {}) == {
        "net0": "virtio",
        "tags": ["a", "b"],
    }
    with pytest.raises(ApiError) as bad:
        await wire.read_body(receiver(b"[1]"), {"content-type": "application/json"})
    assert bad.value.status == 400 and [e.field for e in bad.value.errors] == ["body"]
    big = b"x" * (wire.MAX_BODY // 2 + 1)
    with pytest.raises(ApiError) as large:
        await wire.read_body(receiver(big, big), {})
    assert large.value.status == 413


def test_take_paging_only_on_list_gets_that_do_not_declare_it() -> None:
    schema = load_schema()
    qemu = schema.by_key["GET /nodes/{node}/qemu"]
    raw: dict[str, Any] = {"node": "pve1", "start": "2", "limit": "5"}
    assert wire.take_paging(qemu, raw) == (2, 5) and raw == {"node": "pve1"}
    with pytest.raises(ApiError) as bad:
        wire.take_paging(qemu, {"limit": "-1"})
    assert [e.field for e in bad.value.errors] == ["limit"]
    for text in ("²", "\u0661", "1.5", "9" * 5000):  # "²".isdigit() is true, int("²") is not; 500 before
        with pytest.raises(ApiError) as bad:
            wire.take_paging(qemu, {"start": text})
        assert bad.value.status == 400 and [e.field for e in bad.value.errors] == ["start"]
    assert wire.take_paging(schema.by_key["GET /version"], {"limit": "1"}) is None
    tasks = schema.by_key["GET /nodes/{node}/tasks"]  # declares its own start/limit
    raw = {"start": "1", "limit": "3"}
    assert wire.take_paging(tasks, raw) == (0, None) and raw == {"start": "1", "limit": "3"}


def test_bare_answer_shapes() -> None:
    schema = load_schema()
    config = schema.by_key["GET /nodes/{node}/qemu/{vmid}/config"]
    assert wire.bare_answer(config, {"boot": "order=scsi0;net0", "cores": 2}, {"vmid": 100}) == (
        200,
        {"vmid": 100, "bootdisk": "scsi0", "boot": "order=scsi0;net0", "cores": 2},
    )
    create = schema.by_key["POST /nodes/{node}/qemu"]
    assert wire.bare_answer(create, "UPID:pve1:x", {"vmid": 105}) == (
        201,
        {"success": True, "vmid": 105, "task": "UPID:pve1:x"},
    )
    start = schema.by_key["POST /nodes/{node}/qemu/{vmid}/status/start"]
    assert wire.bare_answer(start, "UPID:pve1:y", {}) == (200, {"success": True, "task": "UPID:pve1:y"})


def test_error_body_in_both_styles() -> None:
    from pve_emulator.errors import FieldError

    exc = ApiError(400, "Parameter verification failed.", [FieldError("vmid", "bad")])
    assert wire.error_body(exc, real=True) == {
        "data": None,
        "message": "Parameter verification failed.\n",
        "errors": {"vmid": "bad"},
    }
    assert wire.error_body(exc, real=False) == {
        "detail": "Parameter verification failed.",
        "errors": [{"field": "vmid", "message": "bad"}],
    }
