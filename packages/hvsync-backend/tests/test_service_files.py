"""deploy/: the systemd units pass `systemd-analyze verify`, the env example names only settings the
backend knows, and the units point at the env file and at the queue the NetBox plugin declares."""

from __future__ import annotations

import ast
import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hvsync_backend.config import CONFIG_FILE_ENV, Settings

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
BACKEND_UNIT = DEPLOY / "systemd" / "hvsync-backend.service"
RQ_UNIT = DEPLOY / "systemd" / "netbox-hvsync-rq.service"
ENV_EXAMPLE = DEPLOY / "backend.env.example"
PLUGIN_INIT = REPO / "packages" / "netbox-hvsync" / "src" / "netbox_hvsync" / "__init__.py"
PLUGIN_QUEUE_MODULE = REPO / "packages" / "netbox-hvsync" / "src" / "netbox_hvsync" / "queue.py"

#: Installed paths in the units, replaced by executables in a temp dir (verify checks they exist).
INSTALLED = {
    "/opt/hvsync-backend/bin/hvsync-backend": "hvsync-backend",
    "/opt/netbox/venv/bin/python3": "python3",
}


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read_string(path.read_text())
    return parser


def env_names(text: str) -> list[str]:
    """Every variable the example sets or shows commented out (`NAME=` or `#NAME=`)."""
    return re.findall(r"^#?([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE)


def known_env_names() -> set[str]:
    prefix = Settings.model_config.get("env_prefix", "")
    return {f"{prefix}{name}".upper() for name in Settings.model_fields} | {CONFIG_FILE_ENV}


def plugin_queue() -> str:
    """`<plugin name>.<queue>` as NetBox names a plugin's queue, read from the plugin's source."""
    init = ast.parse(PLUGIN_INIT.read_text())
    config = next(n for n in ast.walk(init) if isinstance(n, ast.ClassDef) and n.name == "HvsyncConfig")
    values = {
        t.id: s.value
        for s in config.body
        if isinstance(s, ast.Assign)
        for t in s.targets
        if isinstance(t, ast.Name)
    }
    name = ast.literal_eval(values["name"])
    (queue,) = [
        ast.literal_eval(n.value)
        for n in ast.parse(PLUGIN_QUEUE_MODULE.read_text()).body
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "PLUGIN_QUEUE" for t in n.targets)
    ]
    assert isinstance(values["queues"], ast.List) and [e.id for e in values["queues"].elts] == [
        "PLUGIN_QUEUE"
    ]  # type: ignore[attr-defined]
    return f"{name}.{queue}"


def verify(tmp_path: Path, *units: Path) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is required for this test (Debian: apt-get install systemd)"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    copies = []
    for path in units:
        text = path.read_text()
        for installed, name in INSTALLED.items():
            fake = bin_dir / name
            fake.write_text("#!/bin/sh\nexit 0\n")
            fake.chmod(0o755)
            text = text.replace(installed, str(fake))
        text = text.replace("/opt/netbox", str(tmp_path))
        copy = tmp_path / path.name
        copy.write_text(text)
        copies.append(copy)
    return subprocess.run(
        [analyze, "verify", *map(str, copies)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )


def test_units_verify_without_warnings(tmp_path: Path):
    result = verify(tmp_path, BACKEND_UNIT, RQ_UNIT)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert not [line for line in output.splitlines() if ".service" in line], output


def test_verify_catches_a_misspelt_key(tmp_path: Path):
    """The check above can fail: a unit systemd would partly ignore is reported."""
    broken = tmp_path / "src" / BACKEND_UNIT.name
    broken.parent.mkdir()
    broken.write_text(BACKEND_UNIT.read_text().replace("ProtectSystem=", "ProtectSytem="))
    result = verify(tmp_path, broken)
    assert "Unknown key 'ProtectSytem'" in result.stdout + result.stderr


def test_backend_unit_runs_serve_as_its_user_with_the_env_file_and_hardening():
    service = unit(BACKEND_UNIT)["Service"]
    assert service["ExecStart"].split() == ["/opt/hvsync-backend/bin/hvsync-backend", "serve"]
    assert service["User"] == "hvsync" and service["EnvironmentFile"] == "/etc/hvsync/backend.env"
    assert service["NoNewPrivileges"] == "true" and service["ProtectSystem"] == "strict"
    assert service["PrivateTmp"] == "true" and service["Restart"] == "on-failure"
    assert service["StateDirectory"] == "hvsync" and service["Environment"] == "HVSYNC_DATA_DIR=%S/hvsync"


def test_rq_unit_serves_the_queue_the_plugin_declares():
    queue = plugin_queue()
    assert queue == "netbox_hvsync.sync"
    argv = unit(RQ_UNIT)["Service"]["ExecStart"].split()
    assert argv[1:] == ["/opt/netbox/netbox/manage.py", "rqworker", queue]


def test_env_example_names_only_known_settings():
    names = env_names(ENV_EXAMPLE.read_text())
    assert len(names) == len(set(names)), names
    assert set(names) <= known_env_names(), set(names) - known_env_names()
    # every setting an operator may set is shown
    assert known_env_names() <= set(names), known_env_names() - set(names)


def test_env_example_values_are_accepted_by_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    active = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", ENV_EXAMPLE.read_text(), flags=re.MULTILINE))
    shown = dict(re.findall(r"^#([A-Z][A-Z0-9_]*)=(.*)$", ENV_EXAMPLE.read_text(), flags=re.MULTILINE))
    for name, value in {**shown, **active}.items():
        if name != CONFIG_FILE_ENV and value:
            monkeypatch.setenv(
                name, value[1:-1] if value[:1] == value[-1:] == "'" else value
            )  # systemd unquotes
    settings = Settings()
    assert settings.host == "127.0.0.1" and settings.port == 8800
    assert settings.data_dir == Path("/var/lib/hvsync") and settings.lockout_threshold == 5
    assert settings.trusted_proxies == ["127.0.0.1", "10.0.0.0/8"]
    assert settings.database_url is not None and settings.database_url.startswith("postgresql+psycopg://")


def test_env_example_is_not_the_shell_syntax_systemd_rejects():
    for line in ENV_EXAMPLE.read_text().splitlines():
        assert not line.startswith("export "), line
