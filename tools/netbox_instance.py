#!/usr/bin/env python3
"""A real NetBox for hvsync's tests and demo, of any supported release, prepared idempotently.

`NETBOX_VERSION` picks the release (4.5.8, 4.6.8, 4.7.0 or 4.7.3, the default): 4.7.x installs from the
Python registry, 4.5.8 and 4.6.8 (not on the registry) from NetBox's released sources in
shared/netbox-src. Each release has its own venv under `.netbox/releases/<version>/` (NetBox, the
netbox-branching release made for it, the plugin installed editable), its own configuration and its own
template database. NetBox talks to PostgreSQL and Redis on loopback and is served by gunicorn with an RQ
worker beside it. Migrating NetBox from scratch takes 5-10 minutes on a 2-core machine, so it is done once
per release into a template database that is also dumped into a cache outside the repository; every
instance and every test run clones that template (`CREATE DATABASE ... TEMPLATE ...`, well under a
second) plus the plugin's migrations.

Commands (run with any Python 3.12; only the standard library is used):
  up [--name dev] [--fresh] [--restart] [--port N] [--upgrade-from VERSION]
                                        prepare and start an instance (kept as is when already up)
  down [--name dev]                     stop the processes this tool started for the instance
  status                                show instances and whether they answer
  forget --name NAME                    stop an instance, drop its databases, free its port/Redis slot
  manage [--name dev] ARGS...           run `netbox ARGS` against the instance's database (DEVELOPER=True)
  pytest ARGS...                        run pytest in NetBox's venv against a fresh cloned database
                                        (HVSYNC_PYTEST_REDIS_OF=NAME: on the Redis databases of
                                        instance NAME, which must be down)
  template                              only make sure the migrated template database exists

The default instance `dev` writes `.netbox/env`; other instances write `.netbox/instances/<name>/env`.
Both hold NETBOX_URL and NETBOX_AUTH_HEADER (the whole Authorization header value) in shell syntax.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

EXTRA_REQUIREMENTS = (
    "whitenoise>=6.7",
    "pytest>=8,<9",  # schemathesis 4.32 (from_fixture) reads a node attribute pytest 9 removed
    "pytest-django>=4.9",
    "requests>=2.32",
    "schemathesis==4.32.5",
)

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / ".netbox"
PLUGIN_DIR = REPO / "packages" / "netbox-hvsync"
CACHE = Path(os.environ.get("HVSYNC_CACHE_DIR", Path.home() / ".cache" / "hvsync"))
UV = REPO / ".tools" / "bin" / "uv"
#: NetBox's own released sources of the releases that are not on the Python registry (shared/netbox-src)
NETBOX_SRC = Path(os.environ.get("HVSYNC_NETBOX_SRC", REPO.parent / "shared" / "netbox-src"))
#: migrated core templates made by this tool's `template` (pg_dump -Fc, named as the cache names them),
#: with their sha256 sums in PROVENANCE.md (shared/netbox-dumps; read-only: copied into the cache first)
NETBOX_DUMPS = Path(os.environ.get("HVSYNC_NETBOX_DUMPS", REPO.parent / "shared" / "netbox-dumps"))

PG = {"host": "127.0.0.1", "port": "5432", "user": "postgres"}


@dataclass(frozen=True)
class Release:
    """One supported NetBox release: where it comes from, the netbox-branching release made for it, and
    where its venv, configuration, root and template database live (each release has its own)."""

    version: str
    branching: str
    #: pre-4.7 releases are not on the Python registry: they come from NetBox's released source tarball
    from_source: bool
    #: the older release whose migrated template this release's template starts from, migrated forward
    #: by this release as an operator upgrades (a few dozen migrations instead of all ~300); None: from
    #: an empty database
    upgraded_from: str | None = None

    @property
    def home(self) -> Path:
        return STATE / "releases" / self.version

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    @property
    def root(self) -> Path:
        """NETBOX_ROOT of a registry release (media, scripts, static)."""
        return self.home / "root"

    @property
    def source(self) -> Path:
        """The Django project of a source release (`netbox-<version>/netbox`, the manage.py folder)."""
        return self.home / "src" / f"netbox-{self.version}" / "netbox"

    @property
    def static_dir(self) -> Path:
        # 4.7 collects into NETBOX_ROOT/static; before 4.7 STATIC_ROOT is fixed to the project's static/
        return self.source / "static" if self.from_source else self.root / "static"

    @property
    def template_db(self) -> str:
        return "hvsync_nbtpl_" + f"{self.version}_b{self.branching}".replace(".", "_")

    @property
    def slug(self) -> str:
        return self.version.replace(".", "_")


RELEASES = {
    r.version: r
    for r in (
        Release("4.5.8", branching="1.1.3", from_source=True),
        Release("4.6.8", branching="1.1.3", from_source=True, upgraded_from="4.5.8"),
        Release("4.7.0", branching="1.2.2", from_source=False, upgraded_from="4.6.8"),
        Release("4.7.3", branching="1.2.2", from_source=False),
    )
}
DEFAULT_VERSION = "4.7.3"


def selected_release() -> Release:
    """The release named by NETBOX_VERSION (`make netbox NETBOX_VERSION=4.6.8`), else the default."""
    version = os.environ.get("NETBOX_VERSION") or DEFAULT_VERSION
    if version not in RELEASES:
        raise SystemExit(f"NETBOX_VERSION={version} is not supported; choose one of {', '.join(RELEASES)}")
    return RELEASES[version]


RELEASE = selected_release()
TEMPLATE_DONE = "hvsync template complete"
CONFIG_MODULE = "hvsync_netbox_configuration"
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin"

# name -> (port, first redis database); instances never share RQ queues or caches. Other names get a
# port and a pair of Redis databases allocated once and kept in the instance's directory. `long-sync`
# (make test's long sync, beside its other suites, whose spare slots e2e-sync and install-check hold)
# has bench's Redis databases: `make bench` and `make test` never run together, and `up` refuses while
# a live worker of the other is on them.
INSTANCES = {
    "dev": (8765, 2),
    "test": (8766, 4),
    "demo": (8767, 6),
    "bench": (8768, 8),
    "long-sync": (8769, 8),
}
PYTEST_REDIS_BASE = 10
SPARE_REDIS_BASES = (12, 14)  # Redis has databases 0-15; 0-1 are left to whoever else uses this Redis
SPARE_PORTS = range(8770, 8790)


def log(msg: str) -> None:
    print(f"[netbox] {msg}", flush=True)


#
# Redis: the RQ queues of an instance live in its Redis databases. Two NetBox instances on one pair of
# databases run each other's jobs against the wrong PostgreSQL database (a job row saved by the wrong
# worker is inserted with its foreign id, and NetBox later fails with `core_job_pkey` duplicates).
#

REDIS_ADDRESS = ("127.0.0.1", 6379)


def redis_command(db: int, *command: str) -> object:
    """One command on Redis database `db` over a short-lived socket (RESP; stdlib only)."""

    def encode(*parts: str) -> bytes:
        return f"*{len(parts)}\r\n".encode() + b"".join(
            f"${len(p.encode())}\r\n".encode() + p.encode() + b"\r\n" for p in parts
        )

    def read(stream: object) -> object:
        line = stream.readline().rstrip(b"\r\n")  # type: ignore[attr-defined]
        kind, rest = line[:1], line[1:]
        if kind == b"-":
            raise RuntimeError(f"redis: {rest.decode()}")
        if kind in (b"+", b":"):
            return int(rest) if kind == b":" else rest.decode()
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else stream.read(size + 2)[:-2].decode()  # type: ignore[attr-defined]
        if kind == b"*":
            return [read(stream) for _ in range(int(rest))]
        raise RuntimeError(f"redis: unexpected answer {line!r}")

    try:
        with socket.create_connection(REDIS_ADDRESS, timeout=10) as conn, conn.makefile("rb") as stream:
            conn.sendall(encode("SELECT", str(db)) + encode(*command))
            read(stream)
            return read(stream)
    except OSError as exc:
        raise SystemExit(f"Redis at {REDIS_ADDRESS[0]}:{REDIS_ADDRESS[1]} is not reachable: {exc}") from None


def spawn(argv: Sequence[str], env: dict[str, str], cwd: Path, log_path: Path) -> int:
    """Start a long-lived process in its own session, appending its output to a log; its pid."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            list(argv),
            env=env,
            cwd=str(cwd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        ).pid


def live_rq_workers(redis_base: int) -> list[str]:
    """RQ workers registered on an instance's task database whose heartbeat key has not expired."""
    members = redis_command(redis_base, "SMEMBERS", "rq:workers")
    if not isinstance(members, list):
        return []
    return [m for m in members if isinstance(m, str) and redis_command(redis_base, "EXISTS", m) == 1]


def forget_workers(redis_base: int, pids: set[int]) -> None:
    """Deregister our own stopped workers (a killed worker leaves its heartbeat key for minutes)."""
    try:
        members = redis_command(redis_base, "SMEMBERS", "rq:workers")
        for member in members if isinstance(members, list) else []:
            pid = redis_command(redis_base, "HGET", str(member), "pid")
            if pid is not None and int(str(pid)) in pids:
                redis_command(redis_base, "DEL", str(member))
                redis_command(redis_base, "SREM", "rq:workers", str(member))
    except SystemExit:
        pass  # Redis down: nothing to clean


def claim_redis(name: str, redis_base: int, fresh: bool) -> None:
    """Refuse to start on Redis databases another live worker uses; a fresh database gets empty queues
    (jobs queued against the previous database would otherwise run against the new one)."""
    if workers := live_rq_workers(redis_base):
        raise SystemExit(
            f"Redis database {redis_base} is used by {len(workers)} live RQ worker(s) not started for "
            f"instance '{name}' from this checkout (another NetBox, or a checkout elsewhere); stop it, or "
            "`forget` this instance to get other databases"
        )
    if fresh:
        for db in (redis_base, redis_base + 1):
            redis_command(db, "FLUSHDB")


# --------------------------------------------------------------------------------------------------
# PostgreSQL


def psql(sql: str, db: str = "postgres") -> str:
    out = subprocess.run(
        [
            "psql",
            "-h",
            PG["host"],
            "-p",
            PG["port"],
            "-U",
            PG["user"],
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atqc",
            sql,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.stdout.strip()


def db_exists(name: str) -> bool:
    return psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'") == "1"


def db_comment(name: str) -> str:
    return psql(f"SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = '{name}'")


def drop_db(name: str) -> None:
    psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def file_lock(name: str, where: Path | None = None) -> Iterator[None]:
    """An exclusive lock held for the block; `where` defaults to this checkout's state directory."""
    folder = where or STATE
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------------
# NetBox's venv and configuration


def python_312() -> str:
    return subprocess.run(
        [str(REPO / "tools" / "find-python.sh")], check=True, capture_output=True, text=True
    ).stdout.strip()


def ensure_uv() -> None:
    if UV.exists():
        return
    log("installing uv into .tools")
    subprocess.run([python_312(), "-m", "venv", str(REPO / ".tools")], check=True)
    subprocess.run([str(REPO / ".tools" / "bin" / "pip"), "install", "-q", "uv>=0.5"], check=True)


PSYCOPG = "psycopg"  # NetBox pins psycopg[c,pool]; the binary wheel of the same version skips a C build


def binary_psycopg(requirement: str) -> str:
    """`psycopg[c,pool]==3.3.6` -> `psycopg[binary,pool]==3.3.6` (other requirements unchanged)."""
    name, _, rest = requirement.partition("[")
    if name.strip().lower() != PSYCOPG or "]" not in rest:
        return requirement
    extras, _, spec = rest.partition("]")
    kept = [e.strip() for e in extras.split(",") if e.strip() not in ("c", "binary")]
    return f"{PSYCOPG}[{','.join(['binary', *kept])}]{spec}"


def extract_source(release: Release) -> Path:
    """NetBox's released source of a pre-4.7 release, unpacked once into the release's home."""
    tarball = NETBOX_SRC / f"netbox-{release.version}.tar.gz"
    top = release.source.parent
    if (top / ".hvsync-extracted").exists():
        return top
    if not tarball.exists():
        raise SystemExit(
            f"NetBox {release.version} is not on the Python registry and its source {tarball} is missing "
            "(set HVSYNC_NETBOX_SRC to the folder holding netbox-<version>.tar.gz)"
        )
    log(f"unpacking {tarball.name}")
    shutil.rmtree(top, ignore_errors=True)
    top.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(top.parent, filter="data")
    if not release.source.is_dir():
        raise SystemExit(f"{tarball} has no netbox-{release.version}/netbox folder")
    # the docs NetBox serves are built by mkdocs in a release build; an empty folder keeps the static
    # files check quiet
    (release.source / "project-static" / "docs").mkdir(parents=True, exist_ok=True)
    (top / ".hvsync-extracted").write_text(release.version)
    return top


def netbox_requirements(release: Release) -> list[str]:
    """What to install for NetBox itself: the registry package, or a source release's pinned requirements
    (psycopg switched to its binary build, as for the registry package)."""
    if not release.from_source:
        return [f"netbox=={release.version}"]
    pinned = extract_source(release) / "requirements.txt"
    lines = [line.split("#", 1)[0].strip() for line in pinned.read_text().splitlines()]
    return [binary_psycopg(line) for line in lines if line]


LAUNCHER = """#!/bin/sh
# NetBox {version} from its released source: `netbox ARGS` is `manage.py ARGS` (written by tools/netbox_instance.py)
exec "{python}" "{manage}" "$@"
"""


def link_source(release: Release) -> None:
    """A source release behaves like the registry package: `import netbox` works in its venv (gunicorn,
    pytest-django) and `netbox ARGS` runs manage.py."""
    site = next((release.venv / "lib").glob("python3*/site-packages"))
    (site / "hvsync-netbox-source.pth").write_text(str(release.source) + "\n")
    launcher = release.venv / "bin" / "netbox"
    launcher.write_text(
        LAUNCHER.format(
            version=release.version,
            python=release.venv / "bin" / "python",
            manage=release.source / "manage.py",
        )
    )
    launcher.chmod(0o755)


def pin_binary_psycopg(python: Path, env: dict[str, str]) -> None:
    """The registry package pins psycopg[c]; install the binary build of exactly that version into the
    venv of `python`."""
    pin = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; print(next(r for r in m.requires('netbox') if r.startswith('psycopg')))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(
        [str(UV), "pip", "install", "-q", "--python", str(python), binary_psycopg(pin.split(";")[0].strip())],
        check=True,
        env=env,
    )


def ensure_venv(release: Release | None = None) -> None:
    """NetBox, the matching netbox-branching and the plugin (editable) in the release's own venv.

    Locked: `make test` builds the venvs in the background while its own steps may ask for them too."""
    release = release or RELEASE
    with file_lock(f"venv-{release.version}"):
        _install_venv(release)


def _install_venv(release: Release) -> None:
    wanted = json.dumps(
        {
            "netbox": release.version,
            "branching": release.branching,
            "extra": EXTRA_REQUIREMENTS,
            "plugin_pyproject": (PLUGIN_DIR / "pyproject.toml").read_text(),
        },
        sort_keys=True,
    )
    marker = release.venv / ".hvsync-requirements"
    if marker.exists() and marker.read_text() == wanted:
        return
    ensure_uv()
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    if not (release.venv / "bin" / "python").exists():
        log(f"creating the venv of NetBox {release.version}")
        subprocess.run(
            [str(UV), "venv", "-q", "--python", python_312(), str(release.venv)], check=True, env=env
        )
    requirements = release.home / "requirements.txt"
    requirements.write_text("\n".join(netbox_requirements(release)) + "\n")
    overrides = release.home / "overrides.txt"
    # the registry package pins psycopg[c,pool]: never build it; its exact pin follows the install
    overrides.write_text("" if release.from_source else f"{PSYCOPG}[binary,pool]\n")
    log(f"installing NetBox {release.version}, netbox-branching=={release.branching} and the plugin")
    subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "-q",
            "--python",
            str(release.venv / "bin" / "python"),
            "--override",
            str(overrides),
            "-r",
            str(requirements),
            f"netboxlabs-netbox-branching=={release.branching}",
            *EXTRA_REQUIREMENTS,
            "-e",
            str(PLUGIN_DIR),
        ],
        check=True,
        env=env,
    )
    if release.from_source:
        link_source(release)
    else:
        pin_binary_psycopg(release.venv / "bin" / "python", env)
    marker.write_text(wanted)


def secret_value(name: str, length: int = 60) -> str:
    """A per-checkout secret, made once and kept in .netbox (git-ignored)."""
    path = STATE / f"{name}.secret"
    if not path.exists():
        STATE.mkdir(parents=True, exist_ok=True)
        alphabet = string.ascii_letters + string.digits
        path.write_text("".join(secrets.choice(alphabet) for _ in range(length)))
        path.chmod(0o600)
    return path.read_text().strip()


CONFIG_TEMPLATE = '''"""NetBox configuration for hvsync's test and demo instances (generated by tools/netbox_instance.py).

Only what an operator following docs/plugin.md's install section has: NetBox's required settings,
netbox-branching's (DynamicSchemaDict, its router), the plugins and a documented plugin setting. Every
other setting is NetBox's default (RQ_DEFAULT_TIMEOUT included: 300 s), so the tests see a stock NetBox.
"""
import os

from netbox_branching.utilities import DynamicSchemaDict

ALLOWED_HOSTS = ["*"]
DATABASES = DynamicSchemaDict({{
    "default": {{
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("HVSYNC_NETBOX_DB", "hvsync_netbox_dev"),
        "USER": "{user}",
        "PASSWORD": "",
        "HOST": "{host}",
        "PORT": "{port}",
        "CONN_MAX_AGE": 300,
    }}
}})
DATABASE_ROUTERS = ["netbox_branching.database.BranchAwareRouter"]
_redis_base = int(os.environ.get("HVSYNC_NETBOX_REDIS_BASE", "2"))
REDIS = {{
    "tasks": {{"HOST": "127.0.0.1", "PORT": 6379, "PASSWORD": "", "DATABASE": _redis_base, "SSL": False}},
    "caching": {{"HOST": "127.0.0.1", "PORT": 6379, "PASSWORD": "", "DATABASE": _redis_base + 1, "SSL": False}},
}}
SECRET_KEY = "{secret_key}"
API_TOKEN_PEPPERS = {{1: "{pepper}"}}
# netbox_branching must be the last plugin; the template database is migrated without hvsync so that
# the plugin's own migrations are applied to each clone.
PLUGINS = ["netbox_branching"] if os.environ.get("HVSYNC_NETBOX_CORE_ONLY") else ["netbox_hvsync", "netbox_branching"]
PLUGINS_CONFIG = {{
    "netbox_hvsync": {{"stream_read_timeout": float(os.environ.get("HVSYNC_STREAM_READ_TIMEOUT", "120"))}}
}}
DEBUG = False
DEVELOPER = bool(os.environ.get("HVSYNC_NETBOX_DEVELOPER"))
TIME_ZONE = "UTC"
'''

WSGI_MODULE = '''"""NetBox's WSGI application with its collected static files served (generated by tools/netbox_instance.py)."""
from netbox.wsgi import application as _netbox
from whitenoise import WhiteNoise

application = WhiteNoise(_netbox, root="{static}", prefix="static/")
'''


def write_config() -> None:
    RELEASE.conf_dir.mkdir(parents=True, exist_ok=True)
    RELEASE.root.mkdir(parents=True, exist_ok=True)
    _replace_file(
        RELEASE.conf_dir / f"{CONFIG_MODULE}.py",
        CONFIG_TEMPLATE.format(
            secret_key=secret_value("secret-key"), pepper=secret_value("token-pepper"), **PG
        ),
    )
    _replace_file(RELEASE.conf_dir / "hvsync_netbox_wsgi.py", WSGI_MODULE.format(static=RELEASE.static_dir))


def _replace_file(path: Path, text: str) -> None:
    """Write `text` to `path` in one rename: an instance starting beside another `up` or pytest run of the
    same release never imports a half-written configuration."""
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def netbox_env(db: str, redis_base: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode halves start-up
    env.update(
        {
            "NETBOX_CONFIGURATION": CONFIG_MODULE,
            "NETBOX_ROOT": str(RELEASE.root),
            "PYTHONPATH": str(RELEASE.conf_dir),
            "HVSYNC_NETBOX_DB": db,
            "HVSYNC_NETBOX_REDIS_BASE": str(redis_base),
            "DJANGO_SETTINGS_MODULE": "netbox.settings",
            "VIRTUAL_ENV": str(RELEASE.venv),
            "PATH": f"{RELEASE.venv / 'bin'}:{os.environ.get('PATH', '')}",
        }
    )
    env.update(extra)
    return env


def run_netbox(
    args: Sequence[str], env: dict[str, str], timeout: float | None = None, capture: bool = False
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RELEASE.venv / "bin" / "netbox"), *args],
        env=env,
        check=True,
        timeout=timeout,
        text=True,
        capture_output=capture,
    )


# --------------------------------------------------------------------------------------------------
# The migrated template database


def ensure_template() -> None:
    """The release's migrated core database (no hvsync), restored from the cache's dump or made afresh."""
    with file_lock(f"template-{RELEASE.version}", CACHE):  # the machine's databases, not a checkout's
        if db_exists(RELEASE.template_db) and db_comment(RELEASE.template_db) == TEMPLATE_DONE:
            return
        drop_db(RELEASE.template_db)  # ours, and incomplete
        dump = CACHE / f"{RELEASE.template_db}.dump"
        if not dump.exists():
            _copy_shared_dump(dump)
        if not (dump.exists() and _restored(dump)):
            _migrate_template()
            log(f"caching a dump in {dump}")
            CACHE.mkdir(parents=True, exist_ok=True)
            tmp = dump.with_suffix(".tmp")
            subprocess.run(
                [
                    "pg_dump",
                    "-h",
                    PG["host"],
                    "-p",
                    PG["port"],
                    "-U",
                    PG["user"],
                    "-Fc",
                    "-f",
                    str(tmp),
                    RELEASE.template_db,
                ],
                check=True,
                timeout=900,
            )
            tmp.rename(dump)
        psql(f"COMMENT ON DATABASE \"{RELEASE.template_db}\" IS '{TEMPLATE_DONE}'")


def shared_dump_sums(provenance: Path) -> dict[str, str]:
    """File name -> sha256 from the dumps' PROVENANCE.md table (`| <name>.dump | ... | <sha256> |`)."""
    sums: dict[str, str] = {}
    if provenance.exists():
        for line in provenance.read_text(encoding="utf-8").splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[0].endswith(".dump") and len(cells[-1]) == 64:
                sums[cells[0]] = cells[-1].lower()
    return sums


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _copy_shared_dump(dump: Path) -> None:
    """Put the shared dump of this release's template into the cache when its name and sha256 match.

    The dumps were made by this tool's `template` (the same migrations, in the same order); a dump whose
    name or checksum does not match is ignored and the template is migrated as before. The run's output
    says which happened."""
    shared = NETBOX_DUMPS / dump.name
    expected = shared_dump_sums(NETBOX_DUMPS / "PROVENANCE.md").get(dump.name)
    if not shared.exists() or expected is None:
        log(f"no shared dump {shared.name} in {NETBOX_DUMPS}: migrating")
        return
    actual = file_sha256(shared)
    if actual != expected:
        log(f"shared dump {shared} has sha256 {actual}, PROVENANCE.md says {expected}: ignored, migrating")
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = dump.with_suffix(".tmp")
    shutil.copyfile(shared, tmp)
    tmp.rename(dump)
    log(f"using the shared dump {shared} (sha256 matches PROVENANCE.md)")


def _restored(dump: Path) -> bool:
    """Restore the cached dump; a cache must never fail a run: a broken one is discarded (False)."""
    log(f"restoring the migrated NetBox template from {dump}")
    t0 = time.monotonic()
    psql(f'CREATE DATABASE "{RELEASE.template_db}"')
    try:
        restore_dump(dump, RELEASE.template_db)
    except RuntimeError as exc:
        log(f"{exc}; discarding the cached dump and migrating afresh")
        dump.unlink()
        drop_db(RELEASE.template_db)
        return False
    log(f"restored in {time.monotonic() - t0:.1f}s")
    return True


def _migrate_template() -> None:
    """Migrate the template database: from empty, or from a copy of the older release's template.

    On 2 cores a migration from empty takes 5-10 minutes and make test needs four releases; forward
    from the older release's template it runs only that release's new migrations, the path every
    operator's upgrade takes (docs/netbox-instance.md: what was compared)."""
    env = netbox_env(RELEASE.template_db, PYTEST_REDIS_BASE, HVSYNC_NETBOX_CORE_ONLY="1")
    if RELEASE.upgraded_from is None:
        log("migrating a fresh NetBox database (about 10 minutes on 2 cores; done once, then cached)")
        psql(f'CREATE DATABASE "{RELEASE.template_db}"')
    else:
        base = RELEASES[RELEASE.upgraded_from]
        # the older release's template, made (or restored) by its own venv; its lock keeps clones apart
        subprocess.run(
            [sys.executable, __file__, "template"],
            env={**os.environ, "NETBOX_VERSION": base.version},
            check=True,
            timeout=2 * 3600,
        )
        log(f"migrating a copy of the NetBox {base.version} template to {RELEASE.version}")
        with file_lock(f"template-{base.version}", CACHE):
            psql(f'CREATE DATABASE "{RELEASE.template_db}" TEMPLATE "{base.template_db}"')
    t0 = time.monotonic()  # the migration alone, not the older release's template made above
    run_netbox(["migrate", "--no-input", "-v", "0"], env, timeout=3600)
    log(f"migrated in {time.monotonic() - t0:.0f}s")


# pg_dump empties search_path for the restore, but a trigger's WHEN clause cannot schema-qualify the
# operator behind `IS DISTINCT FROM`: NetBox 4.7.0's ltree cascade triggers compare two `public.ltree`
# values that way, so a plain pg_restore fails on them ("operator does not exist: public.ltree =
# public.ltree"). NetBox 4.7.1 rewrote those triggers; restoring with `public` on the search path works
# for every release.
_EMPTY_SEARCH_PATH = "SELECT pg_catalog.set_config('search_path', '', false);"
_RESTORE_SEARCH_PATH = "SELECT pg_catalog.set_config('search_path', 'public, pg_catalog', false);"


def restore_dump(dump: Path, db: str) -> None:
    """Restore a custom-format dump as SQL through psql, with `public` on the search path."""
    connection = ["-h", PG["host"], "-p", PG["port"], "-U", PG["user"]]
    sql = subprocess.Popen(
        ["pg_restore", "--no-owner", "-f", "-", str(dump)], stdout=subprocess.PIPE, text=True
    )
    load = subprocess.Popen(
        ["psql", *connection, "-d", db, "-v", "ON_ERROR_STOP=1", "-q", "-o", os.devnull],
        stdin=subprocess.PIPE,
        text=True,
    )
    assert sql.stdout is not None and load.stdin is not None
    try:
        for line in sql.stdout:
            load.stdin.write(_RESTORE_SEARCH_PATH + "\n" if line.rstrip("\n") == _EMPTY_SEARCH_PATH else line)
    except BrokenPipeError:
        pass  # psql stopped on an error; its exit status says so below
    finally:
        load.stdin.close()
    if sql.wait(timeout=900) != 0 or load.wait(timeout=900) != 0:
        raise RuntimeError(
            f"restoring {dump} into {db} failed (pg_restore {sql.returncode}, psql {load.returncode})"
        )


def migrations_stamp() -> str:
    """What the plugin's migrations are now: a database migrated at this stamp needs no `migrate`."""
    digest = hashlib.sha256(RELEASE.template_db.encode())
    for path in sorted((PLUGIN_DIR / "src" / "netbox_hvsync" / "migrations").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def plugin_template_name() -> str:
    return f"{RELEASE.template_db}_p{migrations_stamp()[:10]}"


def ensure_plugin_template() -> str:
    """The core template plus the plugin's current migrations, so clones need no `migrate` at all.

    Rebuilt only when the plugin's migrations change; older plugin templates of ours are dropped.
    """
    name = plugin_template_name()
    with file_lock(f"template-{RELEASE.version}", CACHE):  # the machine's databases, not a checkout's
        if db_exists(name) and db_comment(name) == TEMPLATE_DONE:
            return name
        stale = psql(f"SELECT datname FROM pg_database WHERE datname LIKE '{RELEASE.template_db}_p%'").split()
        for old in stale:
            drop_db(old)
        psql(f'CREATE DATABASE "{name}" TEMPLATE "{RELEASE.template_db}"')
        t0 = time.monotonic()
        run_netbox(["migrate", "--no-input", "-v", "0"], netbox_env(name, PYTEST_REDIS_BASE), timeout=1200)
        log(f"plugin migrations applied to the template {name} in {time.monotonic() - t0:.1f}s")
        psql(f"COMMENT ON DATABASE \"{name}\" IS '{TEMPLATE_DONE}'")
    return name


def upgrade_database(db: str, source: str, redis_base: int) -> None:
    """NetBox upgraded in place, as an operator does it: a copy of an older release's database (plugin
    installed, data synced) migrated by this release, plugin included."""
    if not db_exists(source):
        raise SystemExit(f"no database {source} to upgrade from: bring that release's instance up first")
    log(f"upgrading a copy of {source} to NetBox {RELEASE.version} as {db}")
    drop_db(db)
    psql(f'CREATE DATABASE "{db}" TEMPLATE "{source}"')
    t0 = time.monotonic()
    run_netbox(["migrate", "--no-input", "-v", "0"], netbox_env(db, redis_base), timeout=1800)
    log(f"migrated to NetBox {RELEASE.version} in {time.monotonic() - t0:.1f}s")


def prepare_database(db: str, redis_base: int, fresh: bool, stamp_file: Path | None = None) -> None:
    """Clone the plugin template (when missing or asked), or migrate an existing database in place."""
    stamp_ok = stamp_file is not None and stamp_file.exists() and stamp_file.read_text() == migrations_stamp()
    if fresh or not db_exists(db):
        template = ensure_plugin_template()
        log(f"cloning {template} into {db}")
        drop_db(db)
        psql(f'CREATE DATABASE "{db}" TEMPLATE "{template}"')
        if stamp_file:
            stamp_file.parent.mkdir(parents=True, exist_ok=True)
            stamp_file.write_text(migrations_stamp())
        return
    if stamp_ok:
        return
    t0 = time.monotonic()
    run_netbox(["migrate", "--no-input", "-v", "0"], netbox_env(db, redis_base), timeout=1200)
    log(f"plugin migrations applied to {db} in {time.monotonic() - t0:.1f}s")
    if stamp_file:
        stamp_file.parent.mkdir(parents=True, exist_ok=True)
        stamp_file.write_text(migrations_stamp())


BOOTSTRAP_USERS = """
import json, sys
from users.models import Token, User
user, _ = User.objects.get_or_create(username={user!r})
user.is_superuser = True
user.is_active = True
user.set_password({password!r})
user.save()
Token.objects.filter(user=user, description="hvsync tooling").delete()
token = Token(user=user, version=2, description="hvsync tooling", write_enabled=True)
token.token = {token!r}
token.save()
print("HVSYNC_TOKEN_KEY=" + token.key)
"""


def bootstrap_admin(db: str, redis_base: int, plaintext: str) -> str:
    """Superuser and a v2 API token with a known plaintext; returns the whole Authorization header."""
    code = BOOTSTRAP_USERS.format(user=ADMIN_USER, password=ADMIN_PASSWORD, token=plaintext)
    out = run_netbox(
        ["shell", "--no-startup", "-c", code], netbox_env(db, redis_base), timeout=300, capture=True
    ).stdout
    key = next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("HVSYNC_TOKEN_KEY="))
    return f"Bearer nbt_{key}.{plaintext}"


def ensure_static(redis_base: int) -> None:
    marker = RELEASE.static_dir / ".hvsync-collected"
    stamp = f"{RELEASE.version}:{RELEASE.branching}:{sorted(p.name for p in (PLUGIN_DIR / 'src').rglob('static'))}"
    if marker.exists() and marker.read_text() == stamp:
        return
    log("collecting static files")
    run_netbox(
        ["collectstatic", "--no-input", "-v", "0"], netbox_env(RELEASE.template_db, redis_base), timeout=600
    )
    marker.write_text(stamp)


# --------------------------------------------------------------------------------------------------
# Instances: gunicorn + RQ worker


def instance_dir(name: str) -> Path:
    return STATE / "instances" / name


def instance_db(name: str) -> str:
    """An instance's database, one per release: switching NETBOX_VERSION never migrates a database of
    another release (a 4.7 database cannot go back to 4.5)."""
    return f"hvsync_netbox_{name}_{RELEASE.slug}"


def instance_slot(name: str) -> tuple[int, int]:
    """(port, first Redis database) of an instance; other names get a free pair, allocated once."""
    if name in INSTANCES:
        return INSTANCES[name]
    slot_file = instance_dir(name) / "slot.json"
    with file_lock("slots"):
        if slot_file.exists():
            slot = json.loads(slot_file.read_text())
            return int(slot["port"]), int(slot["redis_base"])
        taken = [json.loads(f.read_text()) for f in (STATE / "instances").glob("*/slot.json")]
        ports = {t["port"] for t in taken}
        bases = {t["redis_base"] for t in taken}
        base = next((b for b in SPARE_REDIS_BASES if b not in bases and not live_rq_workers(b)), None)
        port = next((p for p in SPARE_PORTS if p not in ports), None)
        if base is None or port is None:
            raise SystemExit(
                f"no free Redis databases for instance '{name}': remove one of "
                f"{sorted(f.parent.name for f in (STATE / 'instances').glob('*/slot.json'))} with `forget`"
            )
        slot_file.parent.mkdir(parents=True, exist_ok=True)
        slot_file.write_text(json.dumps({"port": port, "redis_base": base}))
        return port, base


def forget(name: str) -> None:
    """Stop an instance, drop its database and free its slot."""
    stop_instance(name)
    for db in psql(
        f"SELECT datname FROM pg_database WHERE datname ~ '^hvsync_netbox_{name}_[0-9_]+$'"
    ).split():
        drop_db(db)
    for leftover in ("slot.json", "migrations.stamp", "env"):
        (instance_dir(name) / leftover).unlink(missing_ok=True)
    log(f"forgot instance {name}")


def env_file(name: str) -> Path:
    return STATE / "env" if name == "dev" else instance_dir(name) / "env"


def _pid_alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(STATE).encode() in cmdline  # never touch a recycled pid that is not ours


def stop_instance(name: str) -> None:
    pid_file = instance_dir(name) / "pids.json"
    if not pid_file.exists():
        return
    pids: dict[str, int] = json.loads(pid_file.read_text())
    for pid in pids.values():
        if _pid_alive(pid):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_pid_alive(p) for p in pids.values()):
        time.sleep(0.2)
    for pid in pids.values():
        if _pid_alive(pid):
            os.killpg(pid, signal.SIGKILL)
    pid_file.unlink()
    forget_workers(instance_slot(name)[1], set(pids.values()))
    log(f"stopped instance {name}")


def http_ok(url: str, auth: str | None = None, timeout: float = 5) -> bool:
    req = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def answers_with(url: str, auth: str, budget: float = 90) -> bool:
    """Whether NetBox answers `url` with this token within `budget` seconds: a freshly booted worker's
    first API request can take longer than one `http_ok` timeout on a busy 2-core machine."""
    deadline = time.monotonic() + budget
    while True:
        if http_ok(url, auth, timeout=15):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1)


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn: TIME_WAIT is not "in use"
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start_instance(name: str, db: str, port: int, redis_base: int, workers: int) -> None:
    if not port_is_free(port):  # else the readiness check could be answered by someone else's server
        raise SystemExit(f"port {port} is in use by another process; stop it or pass --port")
    d = instance_dir(name)
    (d / "logs").mkdir(parents=True, exist_ok=True)
    env = netbox_env(db, redis_base)
    procs = {
        "gunicorn": [
            str(RELEASE.venv / "bin" / "gunicorn"),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--preload",
            "--threads",
            "2",
            "--timeout",
            "300",
            "--graceful-timeout",
            "10",
            "--access-logfile",
            str(d / "logs" / "access.log"),
            "hvsync_netbox_wsgi:application",
        ],
        # hvsync's own queue first (PluginConfig.queues, docs/plugin.md "Queue"), then NetBox's
        "rqworker": [
            str(RELEASE.venv / "bin" / "netbox"),
            "rqworker",
            "netbox_hvsync.sync",
            "high",
            "default",
            "low",
        ],
    }
    pids = {name: spawn(argv, env, d, d / "logs" / f"{name}.log") for name, argv in procs.items()}
    (d / "pids.json").write_text(json.dumps(pids))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while not http_ok(f"{url}/login/"):
        if time.monotonic() > deadline or not _pid_alive(pids["gunicorn"]):
            raise SystemExit(f"NetBox did not answer on {url}; see {d / 'logs' / 'gunicorn.log'}")
        time.sleep(0.5)


def already_up(name: str, db: str, url: str) -> bool:
    """Running, answering with our token, and migrated at the plugin's current migrations."""
    stamp = instance_dir(name) / "migrations.stamp"
    pid_file = instance_dir(name) / "pids.json"
    if not (stamp.exists() and stamp.read_text() == migrations_stamp() and pid_file.exists()):
        return False
    if not all(_pid_alive(pid) for pid in json.loads(pid_file.read_text()).values()):
        return False
    auth = read_env(env_file(name)).get("NETBOX_AUTH_HEADER", "")
    return bool(auth) and db_exists(db) and http_ok(f"{url}/api/status/", auth)


def up(
    name: str, fresh: bool, restart: bool, port: int | None, workers: int, upgrade_from: str | None = None
) -> None:
    default_port, redis_base = instance_slot(name)
    port = port or default_port
    db = instance_db(name)
    t0 = time.monotonic()
    with file_lock(f"instance-{name}"):
        ensure_venv()
        write_config()
        if not (fresh or restart or upgrade_from) and already_up(name, db, f"http://127.0.0.1:{port}"):
            log(f"instance '{name}' is already up at http://127.0.0.1:{port} (use --restart to reload code)")
            return
        ensure_template()
        stop_instance(name)
        claim_redis(name, redis_base, fresh or bool(upgrade_from))
        stamp = instance_dir(name) / "migrations.stamp"
        if upgrade_from:
            upgrade_database(db, f"hvsync_netbox_{name}_{RELEASES[upgrade_from].slug}", redis_base)
            stamp.write_text(migrations_stamp())
        else:
            prepare_database(db, redis_base, fresh, stamp)
        ensure_static(redis_base)
        start_instance(name, db, port, redis_base, workers)
        url = f"http://127.0.0.1:{port}"
        target = env_file(name)
        auth = read_env(target).get("NETBOX_AUTH_HEADER", "")
        if fresh or not auth or not http_ok(f"{url}/api/status/", auth):
            auth = bootstrap_admin(db, redis_base, secret_value(f"api-token-{name}", 40))
            if not answers_with(f"{url}/api/status/", auth):
                raise SystemExit(f"NetBox at {url} refuses the API token just created")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            f"NETBOX_URL={shlex.quote(url)}\nNETBOX_AUTH_HEADER={shlex.quote(auth)}\n"
            f"NETBOX_DB={shlex.quote(db)}\nNETBOX_INSTANCE={shlex.quote(name)}\n"
            f"NETBOX_VERSION={RELEASE.version}\nNETBOX_BRANCHING_VERSION={RELEASE.branching}\n"
            f"NETBOX_ADMIN_USER={ADMIN_USER}\nNETBOX_ADMIN_PASSWORD={ADMIN_PASSWORD}\n"
        )
        target.chmod(0o600)
    log(
        f"NetBox {RELEASE.version} instance '{name}' is up at {url} ({time.monotonic() - t0:.0f}s); "
        f"log in as {ADMIN_USER}/{ADMIN_PASSWORD}; env in {target.relative_to(REPO)}"
    )


def read_env(path: Path) -> dict[str, str]:
    """The shell-syntax env file this tool writes, read back."""
    if not path.exists():
        return {}
    return {
        k: shlex.split(v)[0] if v else ""
        for k, _, v in (line.partition("=") for line in path.read_text().splitlines() if "=" in line)
    }


def status() -> None:
    for name in sorted(p.name for p in (STATE / "instances").glob("*") if p.is_dir()):
        slot_file = instance_dir(name) / "slot.json"
        # the URL it was last started at (`up --port` overrides the slot's port), else the slot's port
        url = read_env(env_file(name)).get("NETBOX_URL", "") if env_file(name).exists() else ""
        if url:
            port = int(url.rstrip("/").rsplit(":", 1)[1])
        elif name in INSTANCES:
            port = INSTANCES[name][0]
        elif slot_file.exists():
            port = json.loads(slot_file.read_text())["port"]
        else:
            print(f"{name}: no slot allocated")
            continue
        alive = (instance_dir(name) / "pids.json").exists()
        answering = http_ok(f"http://127.0.0.1:{port}/login/")
        print(f"{name}: pids={'yes' if alive else 'no'} http={'up' if answering else 'down'} port={port}")


def manage(name: str, args: Sequence[str]) -> int:
    ensure_venv()
    write_config()
    redis_base = instance_slot(name)[1]
    env = netbox_env(instance_db(name), redis_base, HVSYNC_NETBOX_DEVELOPER="1")
    return subprocess.run([str(RELEASE.venv / "bin" / "netbox"), *args], env=env).returncode


def pytest_redis_base() -> int:
    """The Redis databases of a pytest run: its own, or with HVSYNC_PYTEST_REDIS_OF=<instance> those of an
    instance that is down, so two runs can go beside each other (`make test` runs the default release's
    suite on the `test` instance's before starting it, beside the matrix releases' on the pytest ones)."""
    name = os.environ.get("HVSYNC_PYTEST_REDIS_OF")
    if not name:
        return PYTEST_REDIS_BASE
    base = instance_slot(name)[1]
    claim_redis(name, base, fresh=True)  # refuses while a worker of that instance is alive
    return base


def run_pytest(args: Sequence[str]) -> int:
    """pytest inside NetBox's venv (pytest-django) against a fresh clone of the template, dropped after."""
    ensure_venv()
    write_config()
    ensure_template()
    db = f"hvsync_nbtest_{os.getpid()}"
    redis_base = pytest_redis_base()
    try:
        prepare_database(db, redis_base, fresh=True)
        env = netbox_env(db, redis_base)
        ini = PLUGIN_DIR / "tests" / "netbox" / "pytest.ini"
        argv = [
            str(RELEASE.venv / "bin" / "pytest"),
            "-p",
            "no:cacheprovider",
            *(["-c", str(ini)] if ini.exists() else []),
            "--rootdir",
            str(REPO),
            *args,
        ]
        return subprocess.run(argv, env=env, cwd=str(REPO)).returncode
    finally:
        drop_db(db)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["pytest"]:
        # Everything after `pytest` is pytest's, its options first included (`make test PYTEST_ARGS=-x`
        # puts them there); argparse's REMAINDER refuses a leading option as unrecognized.
        return run_pytest(args[1:])
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--name", default="dev")
    p_up.add_argument("--fresh", action="store_true", help="re-clone the database from the template")
    p_up.add_argument("--restart", action="store_true", help="restart even when already up (reload code)")
    p_up.add_argument("--port", type=int)
    p_up.add_argument(
        "--upgrade-from",
        choices=sorted(RELEASES),
        help="start on a copy of this instance's database of an older release, migrated to this one",
    )
    p_up.add_argument("--workers", type=int, default=int(os.environ.get("HVSYNC_NETBOX_WORKERS", "4")))
    p_down = sub.add_parser("down")
    p_down.add_argument("--name", default="dev")
    sub.add_parser("status")
    p_forget = sub.add_parser("forget")
    p_forget.add_argument("--name", required=True)
    sub.add_parser("template")
    p_manage = sub.add_parser("manage")
    p_manage.add_argument("--name", default="dev")
    p_manage.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("pytest")  # listed for --help; handled above, before argparse
    ns = parser.parse_args(args)

    if ns.command == "up":
        up(ns.name, ns.fresh, ns.restart, ns.port, ns.workers, ns.upgrade_from)
    elif ns.command == "down":
        stop_instance(ns.name)
    elif ns.command == "forget":
        forget(ns.name)
    elif ns.command == "status":
        status()
    elif ns.command == "template":
        ensure_venv()
        write_config()
        ensure_template()
    elif ns.command == "manage":
        return manage(ns.name, ns.args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
