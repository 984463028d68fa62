"""`hvsync-backend sync` against a real backend on a free port (uvicorn in a thread): NetBox is
`FakeNetBox`, Proxmox a mock transport with one node and two guests. The runner's JSON must say what the
backend's `complete` frames said; failures, a wrong key and an unreachable backend give their exit codes
with messages that never hold the key."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fake_netbox import FakeNetBox
from hvsync_backend.app import create_app
from hvsync_backend.cli import build_parser, main
from hvsync_backend.config import Settings
from hvsync_backend.endpoints.schemas import HvEndpointCreate, InventoryEndpointCreate
from hvsync_backend.sse.runs import Run
from hvsync_backend.terminal.client import BackendClient
from hvsync_backend.terminal.command import execute
from hvsync_backend.terminal.config import ConfigError, resolve
from support import HV, INV

KEY = "runner-" + "z" * 40
HV_ID = 1
PLUGIN_RECORD = {"id": 7, "name": HV["name"], "backend_id": HV_ID}
HVSYNC_BIN = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "hvsync-backend"
GUESTS = [
    {"vmid": 100, "name": "web", "node": "pve1", "type": "qemu", "status": "running", "template": 0},
    {"vmid": 101, "name": "db", "node": "pve1", "type": "qemu", "status": "stopped", "template": 0},
]


def fake_proxmox(request: httpx.Request) -> httpx.Response:
    """One node, two VMs; every other list is empty and every object path an empty object."""
    path = request.url.path.removeprefix("/api2/json")
    if path == "/nodes":
        return httpx.Response(200, json={"data": [{"node": "pve1", "status": "online", "maxcpu": 4}]})
    if path == "/cluster/resources":
        kind = request.url.params.get("type")
        return httpx.Response(200, json={"data": GUESTS if kind in (None, "vm") else []})
    if path == "/nodes/pve1/qemu":
        return httpx.Response(200, json={"data": [{**g, "node": None} for g in GUESTS]})
    empty: Any = {} if path.endswith(("/options", "/config", "/version", "/status/current")) else []
    return httpx.Response(200, json={"data": empty})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """The backend on a port, and every `complete` payload its runs emitted, in order."""

    def __init__(self, url: str, completes: list[dict[str, Any]]) -> None:
        self.url = url
        self.completes = completes


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("runner"), bcrypt_rounds=4))
    ctx = app.state.context
    ctx.proxmox.transport_factory = lambda target: httpx.MockTransport(fake_proxmox)
    ctx.netbox_transport = FakeNetBox(rows={"plugins/hvsync/hv-endpoints": [PLUGIN_RECORD]}).transport
    ctx.keys.register_bootstrap(KEY, "runner-test")
    ctx.registry.create_inventory(InventoryEndpointCreate(**INV))
    assert ctx.registry.create_hv(HvEndpointCreate(**HV)).id == HV_ID

    completes: list[dict[str, Any]] = []
    original = Run.emit

    async def recording(self: Run, event: str, data: dict[str, Any]) -> Any:
        if event == "complete":
            completes.append(data)
        return await original(self, event, data)

    Run.emit = recording  # type: ignore[method-assign]
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "backend did not start"
        time.sleep(0.05)
    try:
        yield Served(f"http://127.0.0.1:{port}", completes)
    finally:
        server.should_exit = True
        thread.join(10)
        Run.emit = original  # type: ignore[method-assign]
        ctx.engine.dispose()


@pytest.fixture
def env(served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """A clean environment: the backend's URL and key, no config file found by default."""
    for name in ("HVSYNC_URL", "HVSYNC_API_KEY", "HVSYNC_RUNNER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HVSYNC_URL", served.url)
    monkeypatch.setenv("HVSYNC_API_KEY", KEY)
    return dict(os.environ)


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["sync", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_one_stage_json_equals_the_complete_frame(served: Served, env, capsys) -> None:
    before = len(served.completes)
    code, doc, err = run_json(capsys, "vms")
    assert code == 0, doc
    assert err == ""
    assert len(served.completes) == before + 1
    sent = served.completes[-1]
    [run] = doc["runs"]
    assert run["name"] == "virtual-machines" and run["kind"] == "stage" and run["ok"] is True
    assert run["complete"] == sent
    assert run["complete"]["summary"]["created"] == 2  # two guests, NetBox empty
    assert run["rows"] == [
        {
            "stage": "virtual-machines",
            "status": "ok",
            **{n: sent["summary"][n] for n in ("created", "updated", "unchanged", "deleted", "failed")},
            "duration_ms": sent["duration_ms"],
        }
    ]
    assert doc["ok"] is True and doc["exit_code"] == 0 and KEY not in json.dumps(doc)


def test_several_stages_run_in_pipeline_order_with_aliases(served: Served, env, capsys) -> None:
    before = len(served.completes)
    code, doc, _ = run_json(capsys, "vms", "clusters", "nodes", "--dry-run")
    assert code == 0, doc
    assert [r["name"] for r in doc["runs"]] == ["devices", "virtual-machines"]
    sent = served.completes[before:]
    assert [r["complete"] for r in doc["runs"]] == sent
    assert all(c["dry_run"] is True for c in sent)


def test_full_update_uses_the_full_update_route(served: Served, env, capsys) -> None:
    before = len(served.completes)
    code, doc, _ = run_json(capsys, "--all", "--dry-run", "--endpoint", str(HV_ID))
    [run] = doc["runs"]
    sent = served.completes[before:]
    assert len(sent) == 1 and run["complete"] == sent[0] and sent[0]["stage"] == "full-update"
    assert [row["stage"] for row in run["rows"]] == [s["stage"] for s in sent[0]["stages"]]
    assert len(run["rows"]) == 13
    assert code == (0 if sent[0]["ok"] else 1)


def test_selected_vm_sync_goes_through_the_individual_route(served: Served, env, capsys) -> None:
    code, doc, _ = run_json(capsys, "--vm", f"{HV_ID}:100")
    [run] = doc["runs"]
    assert run["kind"] == "individual" and run["http_status"] == 200 and code == 0, doc
    assert run["complete"]["stage"] == "individual-vm"
    code, doc, _ = run_json(capsys, "--vm", f"{HV_ID}:555")
    assert code == 1 and doc["runs"][0]["http_status"] == 404
    assert "555" in doc["runs"][0]["error"]


def test_a_failing_stage_exits_1_with_the_backend_problem(served: Served, env, capsys) -> None:
    code, doc, _ = run_json(capsys, "devices", "--endpoint", "99")
    assert code == 1
    [run] = doc["runs"]
    assert run["ok"] is False and run["rows"][0]["status"] == "failed"
    assert run["complete"]["error"]["status"] == 404 and "99" in run["error"]


def test_wrong_key_exits_3_and_never_shows_a_key(served: Served, env, monkeypatch, capsys) -> None:
    wrong = "wrong-" + "w" * 40
    monkeypatch.setenv("HVSYNC_API_KEY", wrong)
    code = main(["sync", "vms", "--plain"])
    captured = capsys.readouterr()
    assert code == 3
    assert "refused the API key" in captured.err and "Invalid API key" in captured.err
    assert wrong not in captured.err + captured.out and KEY not in captured.err + captured.out


def test_unreachable_backend_exits_3(env, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HVSYNC_URL", f"http://127.0.0.1:{free_port()}")
    code, doc, _ = run_json(capsys, "vms")
    assert code == 3 and doc["exit_code"] == 3 and "unreachable" in doc["error"]
    assert KEY not in json.dumps(doc)


def test_usage_errors_exit_2(env, capsys) -> None:
    assert main(["sync"]) == 2
    assert "nothing to run" in capsys.readouterr().err
    assert main(["sync", "no-such-stage"]) == 2
    assert "unknown stage 'no-such-stage'" in capsys.readouterr().err
    assert main(["sync", "--vm", "100"]) == 2
    assert "<endpoint id>" in capsys.readouterr().err


def test_backend_422_is_a_usage_error(served: Served, env, capsys) -> None:
    code, doc, _ = run_json(capsys, "vms", "--branch", "bad branch!")
    assert code == 2 and "inventory_branch_schema_id" in doc["error"]


def test_config_file_env_and_flag_precedence(served: Served, env, monkeypatch, tmp_path, capsys) -> None:
    toml = tmp_path / "runner.toml"
    toml.write_text(f'[runner]\nurl = "{served.url}"\napi_key = "{KEY}"\ntimeout = 30\n')
    monkeypatch.delenv("HVSYNC_URL")
    monkeypatch.delenv("HVSYNC_API_KEY")
    config = resolve(
        url=None, api_key_file=None, config=str(toml), ca_bundle=None, insecure=False,
        timeout=None, request_timeout=None, environ=os.environ,
    )  # fmt: skip
    assert (config.url, config.api_key, config.timeout, config.verify) == (served.url, KEY, 30.0, True)
    assert KEY not in repr(config)
    # the config file alone is enough to run
    assert main(["sync", "vms", "--config", str(toml), "--json"]) == 0
    capsys.readouterr()
    # environment beats the file: a dead URL in the env wins
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HVSYNC_URL", dead)
    code, doc, _ = run_json(capsys, "vms", "--config", str(toml))
    assert code == 3 and doc["backend"] == dead
    # a flag beats the environment
    code, doc, _ = run_json(capsys, "vms", "--config", str(toml), "--url", served.url)
    assert code == 0 and doc["backend"] == served.url
    # the default file (XDG_CONFIG_HOME/hvsync/runner.toml), in INI form via --config
    ini = tmp_path / "runner.ini"
    ini.write_text(f"[runner]\nurl = {served.url}\napi_key = wrong-key-from-ini\ninsecure = true\n")
    monkeypatch.delenv("HVSYNC_URL")
    code = main(["sync", "vms", "--config", str(ini), "--plain"])
    err = capsys.readouterr().err
    assert code == 3 and "wrong-key-from-ini" not in err
    monkeypatch.setenv("HVSYNC_API_KEY", KEY)  # env key beats the file's wrong key
    assert main(["sync", "vms", "--config", str(ini), "--json"]) == 0
    capsys.readouterr()
    default = Path(os.environ["XDG_CONFIG_HOME"]) / "hvsync" / "runner.toml"
    default.parent.mkdir(parents=True)
    default.write_text(f'url = "{served.url}"\n')
    code, doc, _ = run_json(capsys, "vms")
    assert code == 0 and doc["backend"] == served.url
    assert main(["sync", "vms", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err


def test_subprocess_non_tty_prints_lines_and_the_summary_rows(served: Served, env, tmp_path) -> None:
    assert HVSYNC_BIN.is_file(), f"console script missing: {HVSYNC_BIN}"
    before = len(served.completes)
    child_env = {**env, "HVSYNC_URL": served.url, "HVSYNC_API_KEY": KEY, "COLUMNS": "200"}
    proc = subprocess.run(
        [str(HVSYNC_BIN), "sync", "clusters", "vms"],
        capture_output=True,
        text=True,
        env=child_env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out and "\r" not in out  # no live redraw, no colours
    assert KEY not in out + proc.stderr
    lines = out.splitlines()
    assert any(line.endswith("devices: Nodes and clusters: starting") for line in lines), out
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["stage", "status"])
    assert lines[header].split() == [
        "stage", "status", "created", "updated", "unchanged", "deleted", "failed", "duration",
    ]  # fmt: skip
    rows = [line.split() for line in lines[header + 1 :]]
    sent = served.completes[before:]
    assert [row[:7] for row in rows] == [
        [
            c["stage"],
            "ok",
            *(str(c["summary"][n]) for n in ("created", "updated", "unchanged", "deleted", "failed")),
        ]
        for c in sent
    ]


class Terminal(io.StringIO):
    """A stdout that says it is a terminal, so the runner draws its Rich live display."""

    def isatty(self) -> bool:
        return True


def test_terminal_output_is_a_live_display_and_a_summary_table(served: Served, env, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    args = build_parser().parse_args(["sync", "vms", "--vm", f"{HV_ID}:100"])
    out, err = Terminal(), io.StringIO()
    before = len(served.completes)
    assert execute(args, out, err, os.environ) == 0, err.getvalue()
    text = out.getvalue()
    assert "/s" in text and "hvsync sync summary" in text
    [sent] = served.completes[before:]  # the selected-object sync is a POST, not a stream
    row = next(line for line in text.splitlines() if "virtual-machines" in line and "│" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[:7] == [
        "virtual-machines",
        "ok",
        *(str(sent["summary"][n]) for n in ("created", "updated", "unchanged", "deleted", "failed")),
    ]
    assert any(f"vm {HV_ID}:100" in line and "│" in line for line in text.splitlines())
    assert KEY not in text + err.getvalue()


def _sse(*frames: tuple[str, str, dict[str, Any]]) -> bytes:
    return (
        b"".join(f"id: {i}\nevent: {e}\ndata: {json.dumps(d)}\n\n".encode() for i, e, d in frames)
        + b": keep-alive\n\n"
    )


def test_a_dropped_stream_is_resumed_with_last_event_id() -> None:
    """The first response ends after two frames without `complete`; the runner asks again from id 2."""
    seen: list[str | None] = []
    step = {"stage": "sdn", "phase": "start", "message": "SDN: starting"}
    done = {
        "stage": "sdn",
        "ok": True,
        "summary": {"created": 1},
        "duration_ms": 5,
        "errors": [],
        "error": None,
    }

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Last-Event-ID"))
        assert request.headers["X-Service-API-Key"] == KEY
        if len(seen) == 1:
            return httpx.Response(200, content=_sse(("1", "step", step), ("2", "step", step)))
        return httpx.Response(200, content=_sse(("3", "complete", done)))

    config = resolve(
        url="http://backend.invalid", api_key_file=None, config=None, ca_bundle=None, insecure=False,
        timeout=None, request_timeout=None, environ={"HVSYNC_API_KEY": KEY},
    )  # fmt: skip
    with BackendClient(config, transport=httpx.MockTransport(handler)) as client:
        frames = list(client.stream("/ipam/sdn/create/stream", {"job": "j"}))
    assert seen == [None, "2"]
    assert [(f.id, f.event) for f in frames] == [("1", "step"), ("2", "step"), ("3", "complete")]
    assert frames[-1].data == done


def test_tls_settings_flags_beat_the_file(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    conf = tmp_path / "runner.toml"
    conf.write_text('url = "https://backend.example:8800/"\ninsecure = true\n')

    def verify(**flags: Any) -> bool | str:
        base: dict[str, Any] = dict(
            url=None, api_key_file=None, config=str(conf), ca_bundle=None, insecure=False,
            timeout=None, request_timeout=None, environ={"HVSYNC_API_KEY": KEY},
        )  # fmt: skip
        return resolve(**{**base, **flags}).verify

    assert verify() is False  # the file says insecure
    assert verify(ca_bundle=str(bundle)) == str(bundle)  # a flag's CA bundle wins over the file
    conf.write_text('url = "https://backend.example:8800/"\n')
    assert verify() is True  # verification is on by default
    assert verify(insecure=True) is False
    with pytest.raises(ConfigError, match="not a readable file"):
        verify(ca_bundle=str(tmp_path / "none.pem"))
    with pytest.raises(ConfigError, match="must not carry credentials") as info:
        verify(url=f"https://user:{KEY}@backend.example/")
    assert KEY not in str(info.value)
