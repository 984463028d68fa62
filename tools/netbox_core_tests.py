#!/usr/bin/env python3
"""NetBox's own tests, with hvsync installed and without: a plugin leaves NetBox's suite as green as it
found it.

Runs NetBox's own Django test suite (`netbox test <labels>`, the release's shipped tests) twice on the
selected release (NETBOX_VERSION, as tools/netbox_instance.py): once with the PLUGINS of the test
instances (hvsync and netbox_branching) and once with hvsync left out (HVSYNC_NETBOX_CORE_ONLY=1,
netbox_branching only). Each run's test database is a clone of the cached template (the core template
for the run without hvsync, the core template plus hvsync's migrations for the run with it) kept with
`--keepdb`, so no run migrates NetBox from empty; the clones (`test_hvsync_coretest_*`, Django's
`test_` prefix on an `hvsync_` name) are dropped afterwards. The two runs go one after the other, on the
Redis databases of the plugin's in-NetBox pytest runs (PYTEST_REDIS_BASE, or HVSYNC_PYTEST_REDIS_OF's),
which those runs already share beside each other: the default groups' tests use NetBox's cache only,
no RQ queue (NetBox's RQ tests, in its core, extras and netbox apps, clear the queues of the Redis
database they run on: run such labels when nothing else uses those databases).

A test that fails (or errors) only with hvsync fails this tool; one that fails in both runs is NetBox's
or netbox_branching's, reported and not counted. Exit 0 when no test fails only with hvsync.

    .venv/bin/python tools/netbox_core_tests.py                  # DEFAULT_GROUPS, both runs
    .venv/bin/python tools/netbox_core_tests.py dcim -k Device   # other labels (-k, --parallel N)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import netbox_instance as nb

#: What is checked by default, as (labels, extra `netbox test` options) runs: the whole virtualization
#: app (the models hvsync writes most: filterset tests walking every field of VirtualMachine, VMInterface
#: and VirtualDisk, API and GraphQL, models, signals, and the views, whose VM and cluster pages carry
#: hvsync's panels), and in dcim and ipam the filterset tests that walk the fields of the other models
#: hvsync keeps sync-state sidecars for (Device, Interface, IPAddress, Prefix, VLAN): `test_missing_filters`,
#: where a relation from a plugin model shows (measured on 2026-12-02: the whole virtualization app,
#: 650 tests, 169 CPU-s for both runs; all of dcim's and ipam's filterset tests, with virtualization's
#: filterset, API and model tests, 1,586 tests and 337 CPU-s; dcim's and ipam's `test_missing_filters`,
#: 71 tests, 43 CPU-s).
Group = tuple[tuple[str, ...], tuple[str, ...]]
DEFAULT_GROUPS: tuple[Group, ...] = (
    (("virtualization",), ()),
    (("dcim.tests.test_filtersets", "ipam.tests.test_filtersets"), ("-k", "test_missing_filters")),
)
RESULT = re.compile(r"^(FAIL|ERROR): (\S+) \((\S+)\)", re.M)
RAN = re.compile(r"^Ran (\d+) tests? in ([\d.]+)s", re.M)


def failures(output: str) -> set[str]:
    """`module.Class.test` of every failed or errored test in a Django test runner's output."""
    return {
        f"{where}.{name}" if not where.endswith(f".{name}") else where
        for _, name, where in RESULT.findall(output)
    }


def run_suite(mode: str, groups: Sequence[Group], redis_base: int, log: Path) -> tuple[int, str]:
    """NetBox's tests of each group (labels, options), one `netbox test` each, on a fresh clone of the
    template for `mode` ("hvsync" or "core"); the highest exit code and the outputs in order."""
    db = f"hvsync_coretest_{mode}_{os.getpid()}"
    test_db = f"test_{db}"  # Django's test database name for NAME=db
    template = nb.ensure_plugin_template() if mode == "hvsync" else nb.RELEASE.template_db
    core_only = {} if mode == "hvsync" else {"HVSYNC_NETBOX_CORE_ONLY": "1"}
    env = nb.netbox_env(db, redis_base, **core_only)
    try:
        nb.drop_db(test_db)
        nb.psql(f'CREATE DATABASE "{test_db}" TEMPLATE "{template}"')
        argv = [str(nb.RELEASE.venv / "bin" / "netbox"), "test", "--keepdb", "--noinput", "-v", "1"]
        t0 = time.monotonic()
        code = 0
        with log.open("w") as out:
            for labels, options in groups:
                out.write(f"== netbox test {' '.join((*options, *labels))}\n")
                out.flush()
                ran = subprocess.run(
                    [*argv, *options, *labels], env=env, stdout=out, stderr=subprocess.STDOUT, timeout=3600
                )
                code = max(code, ran.returncode)
        nb.log(f"NetBox {nb.RELEASE.version} tests {mode}: exit {code} in {time.monotonic() - t0:.0f}s")
        return code, log.read_text(errors="replace")
    finally:
        for name in nb.psql(f"SELECT datname FROM pg_database WHERE datname LIKE '{test_db}%'").split():
            nb.drop_db(name)


def verdict(outputs: dict[str, tuple[int, str]]) -> tuple[bool, list[str]]:
    """Compare the run with hvsync ("hvsync") to the run without ("core"), each (exit code, output):
    ok unless a test fails only with hvsync or a run broke before its tests ran (nothing to compare)."""
    ok, report = True, []
    for mode, (code, output) in outputs.items():
        runs = RAN.findall(output)
        tests, seconds = sum(int(n) for n, _ in runs), sum(float(t) for _, t in runs)
        report.append(
            f"NetBox {nb.RELEASE.version} own tests, {'with' if mode == 'hvsync' else 'without'} hvsync: "
            f"{f'{tests} tests in {seconds:.0f} s' if runs else 'no test ran'}, exit {code}, "
            f"{len(failures(output))} failed"
        )
        if not runs or (code != 0 and not failures(output)):
            ok = False  # the run itself broke (import error, database, ...): nothing was compared
            report.append(output[-4000:])
    hvsync, core = failures(outputs["hvsync"][1]), failures(outputs["core"][1])
    report += [f"  fails without hvsync too (not counted): {name}" for name in sorted(hvsync & core)]
    report += [f"  FAILS ONLY WITH HVSYNC: {name}" for name in sorted(hvsync - core)]
    ok = ok and not hvsync - core
    report.append(
        "NetBox's own tests: "
        + ("as green with hvsync as without" if ok else "hvsync breaks NetBox's own tests")
    )
    return ok, report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("labels", nargs="*", help="NetBox test labels (default: DEFAULT_GROUPS)")
    parser.add_argument("--parallel", type=int, default=1, help="Django's --parallel (test processes)")
    parser.add_argument("-k", dest="patterns", action="append", default=[], help="Django's -k (test name)")
    parser.add_argument(
        "--logs", type=Path, default=nb.STATE, help="where each run's output goes (netbox-tests-<mode>.log)"
    )
    args = parser.parse_args(argv)
    nb.ensure_venv()
    nb.write_config()
    nb.ensure_template()
    args.logs.mkdir(parents=True, exist_ok=True)
    redis_base = nb.pytest_redis_base()
    options = (
        *(("--parallel", str(args.parallel)) if args.parallel > 1 else ()),
        *(f"-k{p}" for p in args.patterns),
    )
    groups = [(tuple(args.labels), options)] if args.labels else list(DEFAULT_GROUPS)
    outputs: dict[str, tuple[int, str]] = {}
    for mode in ("hvsync", "core"):
        outputs[mode] = run_suite(mode, groups, redis_base, args.logs / f"netbox-tests-{mode}.log")
    ok, report = verdict(outputs)
    print("\n".join(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
