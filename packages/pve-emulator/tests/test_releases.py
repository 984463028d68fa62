"""API releases: the 605-operation capture compiles as release 8.4; ``--api-release`` picks what is served
and validated, in mock mode and in real mode (default: the 646-operation 9.1)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import httpx
import pytest
from pve_emulator.cli import parser
from pve_emulator.config import DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET, EmulatorConfig
from pve_emulator.proxy.testing import running_proxy, serve_in_thread
from pve_emulator.schema import DEFAULT_RELEASE, SCHEMA_DIR, load_schema
from pve_emulator.server import create_app
from schema_compiler import load_compiler

REPO = Path(__file__).resolve().parents[3]
SOURCE_84 = REPO.parent / "shared" / "pve-schema" / "apidoc-2025-06-10.js"
AUTH = {"Authorization": f"PVEAPIToken={DEFAULT_TOKEN_ID}={DEFAULT_TOKEN_SECRET}"}
ONLY_91 = "GET /cluster/ha/rules"


def test_release_84_has_the_605_operations_of_its_capture() -> None:
    old, new = load_schema("8.4"), load_schema()
    assert DEFAULT_RELEASE == "9.1" and new.release == "9.1" and len(new.operations) == 646
    assert old.release == "8.4"
    assert Counter(op.method for op in old.operations) == {"GET": 304, "POST": 155, "PUT": 76, "DELETE": 70}
    assert ONLY_91 in new.by_key and ONLY_91 not in old.by_key
    assert "GET /nodes/{node}/qemu" in old.by_key
    with pytest.raises(ValueError, match=r"unknown API release '7\.0'"):
        load_schema("7.0")


def test_committed_84_schema_equals_compiler_output(tmp_path: Path) -> None:
    if not SOURCE_84.is_file():
        if os.environ.get("HVSYNC_REQUIRE_SOURCE_DATA") == "1":
            pytest.fail(f"source data required but missing: {SOURCE_84}")
        pytest.skip(
            f"source data not present at {SOURCE_84} (set HVSYNC_REQUIRE_SOURCE_DATA=1 to require it)"
        )
    compiler = load_compiler()
    out = tmp_path / "pve-8.4.json"
    assert compiler.main(["--release", "8.4", "--source", str(SOURCE_84), "--output", str(out)]) == 0
    assert out.read_text() == (SCHEMA_DIR / "pve-8.4.json").read_text(), "run `make schema` and commit"
    assert "8.4" in compiler.RELEASES and compiler.main(["--check"]) == 0  # no arguments: every release


def test_cli_accepts_api_release() -> None:
    assert parser().parse_args(["serve", "--api-release", "8.4"]).release == "8.4"
    assert parser().parse_args(["serve"]).release == "9.1"


def test_mock_mode_serves_and_documents_the_chosen_release() -> None:
    with (
        serve_in_thread(create_app(EmulatorConfig(release="8.4"))) as old,
        serve_in_thread(create_app(EmulatorConfig())) as new,
    ):
        spec_old = httpx.get(old + "/openapi.json").json()
        spec_new = httpx.get(new + "/openapi.json").json()
        count = lambda spec: sum(len(v) for v in spec["paths"].values())  # noqa: E731
        assert (count(spec_old), count(spec_new)) == (605, 646)
        assert spec_old["info"]["version"] == "8.4"
        assert httpx.get(old + "/api2/json/cluster/ha/rules", headers=AUTH).status_code == 404
        assert httpx.get(new + "/api2/json/cluster/ha/rules", headers=AUTH).json() == {"data": []}
        vms = httpx.get(old + "/api2/json/nodes/pve1/qemu", headers=AUTH).json()["data"]
        assert 100 in [vm["vmid"] for vm in vms]


def test_real_mode_validates_against_the_chosen_release() -> None:
    op_new = load_schema().operation("GET", "/cluster/metrics/export")
    op_old = load_schema("8.4").operation("GET", "/cluster/metrics/export")
    assert "node-list" in op_new.params and "node-list" not in op_old.params  # the premise
    with (
        serve_in_thread(create_app(EmulatorConfig())) as upstream,
        running_proxy(upstream, release="8.4") as (old, _),
        running_proxy(upstream) as (new, _),
    ):
        spec = httpx.get(old + "/openapi.json").json()
        assert sum(len(v) for v in spec["paths"].values()) == 605
        gone = httpx.get(old + "/api2/json/cluster/ha/rules", headers=AUTH)
        assert gone.status_code == 404 and "API release 8.4" in gone.json()["message"]
        assert httpx.get(new + "/api2/json/cluster/ha/rules", headers=AUTH).json() == {"data": []}
        query = {"node-list": "pve1"}
        refused = httpx.get(old + "/cluster/metrics/export", params=query, headers=AUTH)
        assert refused.status_code == 400
        assert [e["field"] for e in refused.json()["errors"]] == ["node-list"]
        accepted = httpx.get(new + "/cluster/metrics/export", params=query, headers=AUTH)
        assert accepted.status_code == 200, accepted.text
