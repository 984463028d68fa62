"""The pytest plugin: a fresh TLS emulator per test that clients verify with its CA, faults by marker."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from pve_emulator.testing import EmulatorHandle, running_emulator

pytest_plugins = ["pytester"]


def _client(pve: EmulatorHandle, verify: ssl.SSLContext | bool) -> httpx.Client:
    return httpx.Client(
        base_url=pve.api_url,
        verify=verify,
        timeout=10,
        trust_env=False,  # the machine's CA bundle variables must not decide the test
        headers={"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"},
    )


def test_pve_fresh_is_tls_that_verifies_against_its_own_ca(pve_fresh: EmulatorHandle) -> None:
    assert pve_fresh.scheme == "https" and pve_fresh.ca_file is not None and pve_fresh.ca_file.is_file()
    assert pve_fresh.tls_verify == str(pve_fresh.ca_file)
    with _client(pve_fresh, ssl.create_default_context(cafile=pve_fresh.tls_verify)) as client:
        assert client.get("/version").status_code == 200
        assert {n["node"] for n in client.get("/nodes").json()["data"]} == {"pve1", "pve2", "pve3"}
    # the CA is the emulator's own: the system's trust store does not know it
    with _client(pve_fresh, ssl.create_default_context()) as client, pytest.raises(httpx.ConnectError):
        client.get("/version")
    for name in ("localhost", "127.0.0.1"):  # the certificate names both
        url = f"https://{name}:{pve_fresh.port}/api2/json/version"
        assert (
            httpx.get(url, verify=ssl.create_default_context(cafile=pve_fresh.tls_verify)).status_code == 200
        )


@pytest.mark.pve_faults(
    node_offline=["pve2"], latency={"/nodes/*/qemu/*/config": 0.3}, locked={"100": "backup"}
)
def test_the_marker_starts_pve_fresh_with_its_faults(pve_fresh: EmulatorHandle) -> None:
    assert pve_fresh.faults["node_offline"] == ["pve2"]
    with _client(pve_fresh, ssl.create_default_context(cafile=pve_fresh.tls_verify)) as client:
        assert client.get("/nodes/pve2/status").status_code == 595
        config = client.get("/nodes/pve1/qemu/100/config")
        assert config.status_code == 200 and config.json()["data"]["lock"] == "backup"
        assert config.elapsed.total_seconds() >= 0.3
    # a marker's faults can still change mid-test, in-process
    pve_fresh.set_faults(node_offline=[])
    assert pve_fresh.state.nodes["pve2"].online


@pytest.mark.pve_emulator(tls=False, scenario="empty", nodes=2)
def test_the_options_marker_chooses_the_emulator(pve_fresh: EmulatorHandle) -> None:
    assert pve_fresh.scheme == "http" and pve_fresh.ca_file is None and pve_fresh.tls_verify is True
    assert list(pve_fresh.state.nodes) == ["pve1", "pve2"] and not pve_fresh.state.guests


def test_each_test_gets_a_fresh_emulator_and_the_session_one_is_shared(pytester: pytest.Pytester) -> None:
    """Run an inner session: two tests change their fresh emulator and see none of each other's changes
    (new port, new state, new CA), while the session fixture is one emulator for both."""
    pytester.makepyfile(
        """
        import pytest

        SEEN = []

        @pytest.mark.parametrize("n", [1, 2])
        def test_fresh(pve_fresh, pve_emulator, n):
            assert 100 in pve_fresh.state.guests
            del pve_fresh.state.guests[100]  # gone only in this test's emulator
            SEEN.append((pve_fresh.port, str(pve_fresh.ca_file), pve_fresh.ca_file.read_bytes(), pve_emulator.port))

        def test_compare():
            (port1, ca1, pem1, session1), (port2, ca2, pem2, session2) = SEEN
            assert port1 != port2 and ca1 != ca2 and pem1 != pem2
            assert session1 == session2
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")
    result.assert_outcomes(passed=3)


def test_a_bad_marker_fault_fails_the_test_naming_the_field(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.pve_faults(node_offline=["pve9"])
        def test_bad(pve_fresh):
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ParameterError*"])
    assert "pve9" in result.stdout.str()


def test_running_emulator_over_tls_makes_a_new_ca_each_time() -> None:
    with running_emulator(tls=True) as first, running_emulator(tls=True) as second:
        assert first.ca_file != second.ca_file
        assert first.ca_file is not None and second.ca_file is not None
        assert first.ca_file.read_bytes() != second.ca_file.read_bytes()
        wrong = ssl.create_default_context(cafile=str(second.ca_file))
        with _client(first, wrong) as client, pytest.raises(httpx.ConnectError):
            client.get("/version")
        folder = first.ca_file.parent
    assert not folder.exists()  # removed with the emulator: nothing shared, nothing left


@pytest.mark.pve_faults(drop_rate=1)
def test_a_dropped_connection_over_tls_gets_no_answer(pve_fresh: EmulatorHandle) -> None:
    with _client(pve_fresh, ssl.create_default_context(cafile=pve_fresh.tls_verify)) as client:
        with pytest.raises(httpx.TransportError):
            client.get("/version")
        pve_fresh.set_faults(drop_rate=0)
        assert client.get("/version").status_code == 200


XDIST_TESTS = """
    import json, os, ssl
    from pathlib import Path

    import httpx
    import pytest

    def check(pve, name, pve2_status):
        # a real verifying client: the emulator's own CA, hostname checked, no environment bundles
        context = ssl.create_default_context(cafile=pve.tls_verify)
        headers = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
        with httpx.Client(base_url=pve.api_url, verify=context, trust_env=False, timeout=10, headers=headers) as c:
            status = {n["node"]: n["status"] for n in c.get("/nodes").json()["data"]}
        assert status == {"pve1": "online", "pve2": pve2_status, "pve3": "online"}
        record = {"worker": os.environ["PYTEST_XDIST_WORKER"], "port": pve.port, "pve2": status["pve2"]}
        (Path(os.environ["SEEN_DIR"]) / name).write_text(json.dumps(record))

    @pytest.mark.pve_faults(node_offline=["pve2"])
    @pytest.mark.parametrize("n", [1, 2])
    def test_offline(pve_fresh, n):
        check(pve_fresh, f"offline{n}", "offline")

    @pytest.mark.parametrize("n", [1, 2])
    def test_healthy(pve_fresh, n):
        check(pve_fresh, f"healthy{n}", "online")
"""


def test_pve_fresh_works_under_xdist_with_two_workers(tmp_path: Path) -> None:
    """``pytest -n 2`` in a subprocess: four ``pve_fresh`` tests (two with a marker's fault) spread over
    both workers, each on an emulator of its own (four ports), verified over TLS with its CA."""
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(XDIST_TESTS))
    seen = tmp_path / "seen"
    seen.mkdir()
    env = {
        name: value
        for name, value in os.environ.items()
        # no CA bundle may vouch for the emulator, and an outer xdist/pytest run must not leak in
        if name not in {"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "PYTEST_ADDOPTS"}
        and not name.startswith("PYTEST_XDIST")
        and name != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
    }
    env["SEEN_DIR"] = str(seen)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-p", "no:asyncio", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout, result.stdout
    records = {path.name: json.loads(path.read_text()) for path in seen.iterdir()}
    assert {name: r["pve2"] for name, r in records.items()} == {
        "offline1": "offline",
        "offline2": "offline",
        "healthy1": "online",
        "healthy2": "online",
    }
    assert {r["worker"] for r in records.values()} == {"gw0", "gw1"}
    assert len({r["port"] for r in records.values()}) == 4
