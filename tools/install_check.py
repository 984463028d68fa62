#!/usr/bin/env python3
"""The plugin installed as an operator installs it, into a NetBox our tooling did not configure.

What it does, as docs/plugin.md's "Install into an existing NetBox" says:
  1. builds the plugin wheel (`uv build`), as a release would publish it;
  2. installs NetBox 4.7.0 from the Python registry into a venv of its own (psycopg's binary build, as
     everywhere on these machines) and runs NetBox's own `netbox setup` for the instance root;
  3. edits only what NetBox's docs say to edit in `conf/configuration.py` (ALLOWED_HOSTS, DATABASES,
     REDIS, SECRET_KEY, API_TOKEN_PEPPERS) and adds `PLUGINS = ["netbox_hvsync"]` and `PLUGINS_CONFIG`;
     lists the wheel in `local_requirements.txt` and installs it from there;
  4. `netbox migrate`, `netbox collectstatic`, `netbox createsuperuser`, a token provisioned through
     NetBox's REST API with the user's password, gunicorn and `netbox rqworker` started;
  5. writes an env file for the orchestration tests (`--env-out`), which then sync the demo cluster
     through this NetBox.

The existing NetBox's database is a copy of the migrated NetBox 4.7.0 template (core migrations from
scratch take 5-7 minutes here; an operator's NetBox already has its database). `stop` ends the processes
and drops the database.

Usage: install_check.py up --env-out FILE | install_check.py stop
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import netbox_instance as tool

VERSION = "4.7.0"
WORK = tool.STATE / "install-check"
VENV = WORK / "venv"
ROOT = WORK / "root"
DB = "hvsync_install_check"
NAME = "install-check"  # the tool's slot allocator gives it its own port and Redis databases
ADMIN, PASSWORD = "operator", "operator-" + "pw"


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=True, text=True, **kwargs)  # type: ignore[call-overload]


def netbox_env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NETBOX_CONFIGURATION")
    }
    env.update({"NETBOX_ROOT": str(ROOT), "PATH": f"{VENV / 'bin'}:{env.get('PATH', '')}"})
    return env


def build_wheel() -> Path:
    dist = WORK / "dist"
    for old in dist.glob("*.whl"):
        old.unlink()
    tool.ensure_uv()
    run([str(tool.UV), "build", "-q", "--wheel", "-o", str(dist), str(tool.PLUGIN_DIR)])
    [wheel] = dist.glob("netbox_hvsync-*.whl")
    return wheel


def install_netbox(wheel: Path) -> None:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    if not (VENV / "bin" / "python").exists():
        run([str(tool.UV), "venv", "-q", "--python", tool.python_312(), str(VENV)], env=env)
    overrides = WORK / "overrides.txt"
    overrides.write_text("psycopg[binary,pool]\n")
    py = ["--python", str(VENV / "bin" / "python")]
    run(
        [str(tool.UV), "pip", "install", "-q", *py, "--override", str(overrides), f"netbox=={VERSION}"],
        env=env,
    )
    tool.pin_binary_psycopg(VENV / "bin" / "python", env)
    if not (ROOT / "conf" / "configuration.py").exists():
        run(
            [str(VENV / "bin" / "netbox"), "setup", "--target", str(ROOT)],
            env=netbox_env(),
            capture_output=True,
        )
    # NetBox's documented place for plugins: local_requirements.txt, installed with pip
    (ROOT / "local_requirements.txt").write_text(f"netbox-hvsync @ {wheel.as_uri()}\n")
    run(
        [
            str(tool.UV),
            "pip",
            "install",
            "-q",
            *py,
            "--reinstall-package",
            "netbox-hvsync",
            "-r",
            str(ROOT / "local_requirements.txt"),
        ],
        env=env,
    )


def configure(port: int, redis_base: int) -> None:
    conf = ROOT / "conf" / "configuration.py"
    text = conf.read_text().split("\n# --- hvsync install check ---\n")[0]
    text += "\n# --- hvsync install check ---\n" + "\n".join(
        [
            'ALLOWED_HOSTS = ["*"]',
            f'DATABASES["default"].update(NAME="{DB}", USER="postgres", HOST="127.0.0.1", PORT="5432")',
            f'REDIS["tasks"].update(HOST="127.0.0.1", DATABASE={redis_base})',
            f'REDIS["caching"].update(HOST="127.0.0.1", DATABASE={redis_base + 1})',
            f'SECRET_KEY = "{tool.secret_value("install-check-secret-key", 60)}"',
            f'API_TOKEN_PEPPERS = {{1: "{tool.secret_value("install-check-pepper", 60)}"}}',
            'PLUGINS = ["netbox_hvsync"]',
            'PLUGINS_CONFIG = {"netbox_hvsync": {"stream_read_timeout": 45}}',
            "",
        ]
    )
    conf.write_text(text)


def provision_token(url: str) -> str:
    """A v2 token, provisioned as an operator's script would: username and password over REST."""
    body = json.dumps({"username": ADMIN, "password": PASSWORD}).encode()
    req = urllib.request.Request(
        url + "/api/users/tokens/provision/", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        made = json.load(resp)
    return f"Bearer nbt_{made['key']}.{made['token']}"


def up(env_out: Path) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    port, redis_base = tool.instance_slot(NAME)
    stop()
    t0 = time.monotonic()
    wheel = build_wheel()
    install_netbox(wheel)
    configure(port, redis_base)
    tool.claim_redis(NAME, redis_base, fresh=True)
    # the operator's existing NetBox 4.7.0 database (see the module docstring)
    template = tool.RELEASES[VERSION].template_db
    if not (tool.db_exists(template) and tool.db_comment(template) == tool.TEMPLATE_DONE):
        run(
            [sys.executable, str(Path(__file__).with_name("netbox_instance.py")), "template"],
            env={**os.environ, "NETBOX_VERSION": VERSION},
        )
    tool.drop_db(DB)
    tool.psql(f'CREATE DATABASE "{DB}" TEMPLATE "{template}"')
    env = netbox_env()
    nb = str(VENV / "bin" / "netbox")
    run([nb, "migrate", "--no-input"], env=env, capture_output=True)
    run([nb, "collectstatic", "--no-input", "-v", "0"], env=env)
    run(
        [nb, "createsuperuser", "--no-input", "--username", ADMIN, "--email", "ops@example.com"],
        env={**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
    )
    logs = WORK / "logs"
    logs.mkdir(exist_ok=True)
    pids = {}
    for name, argv in {
        "gunicorn": [
            str(VENV / "bin" / "gunicorn"),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "3",
            "--threads",
            "2",
            "--timeout",
            "300",
            "netbox.wsgi",
        ],
        "rqworker": [nb, "rqworker", "high", "default", "low"],
    }.items():
        pids[name] = tool.spawn(argv, env, WORK, logs / f"{name}.log")
    (WORK / "pids.json").write_text(json.dumps(pids))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while not tool.http_ok(url + "/login/"):
        if time.monotonic() > deadline:
            raise SystemExit(f"NetBox {VERSION} did not answer on {url}; see {logs}")
        time.sleep(0.5)
    auth = provision_token(url)
    env_out.parent.mkdir(parents=True, exist_ok=True)
    env_out.write_text(
        f"NETBOX_URL={shlex.quote(url)}\nNETBOX_AUTH_HEADER={shlex.quote(auth)}\nNETBOX_VERSION={VERSION}\n"
        f"NETBOX_ADMIN_USER={ADMIN}\nNETBOX_ADMIN_PASSWORD={PASSWORD}\n"
    )
    env_out.chmod(0o600)
    tool.log(
        f"plugin wheel {wheel.name} installed into NetBox {VERSION} at {url} ({time.monotonic() - t0:.0f}s)"
    )


def stop() -> None:
    pid_file = WORK / "pids.json"
    if pid_file.exists():
        for pid in json.loads(pid_file.read_text()).values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        time.sleep(2)
        pid_file.unlink()
    tool.drop_db(DB)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--env-out", type=Path, required=True)
    sub.add_parser("stop")
    ns = parser.parse_args()
    if ns.command == "up":
        up(ns.env_out)
    else:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
