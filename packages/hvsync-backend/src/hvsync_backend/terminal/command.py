"""`hvsync-backend sync`: argparse wiring, running the plan, exit codes.

Exit codes: 0 every run ok; 1 a run failed (a stage reported ok=false, a selected object failed or was
not found, a stream broke); 2 usage or configuration error (including a 422 from the backend);
3 backend unreachable, TLS failure, or API key refused; 130 interrupted (the runs are cancelled).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from rich.console import Console

from hvsync_backend import wire
from hvsync_backend.terminal import plan
from hvsync_backend.terminal.client import BackendClient, BackendRefused, BackendUnavailable, StreamBroken
from hvsync_backend.terminal.config import CONFIG_ENV, KEY_ENV, URL_ENV, ConfigError, RunnerConfig, resolve
from hvsync_backend.terminal.outcome import RunResult
from hvsync_backend.terminal.progress import Live, Plain, Reporter, Silent

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BACKEND, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
SELECT_FLAGS = {
    "vm": "<endpoint>:<vmid>",
    "node": "<endpoint>:<node>",
    "storage": "<endpoint>:<storage>",
    "cluster": "<endpoint>",
    "backup": "<endpoint>:<vmid>:<volid>",
    "snapshot": "<endpoint>:<vmid>[:<name>]",
    "task-history": "<endpoint>:<upid or vmid>",
}
MODES = ("enabled", "disabled")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register `sync` on the console script's subparsers."""
    names = ", ".join([*wire.STAGE_SLUGS, *plan.ALIASES])
    p = sub.add_parser(
        "sync",
        help="run sync stages against a backend over HTTP and show progress",
        description=f"Run stages ({names}), the full update (`full` or --all) or selected objects "
        f"against a backend. URL and key: flags, then {URL_ENV} / {KEY_ENV}, then the config file "
        "(--config, $" + CONFIG_ENV + ", ~/.config/hvsync/runner.toml). Exit codes: 0 ok, 1 a run "
        "failed, 2 usage/config error, 3 backend unreachable or key refused, 130 interrupted.",
    )
    p.add_argument("stages", nargs="*", metavar="STAGE", help="stage slugs or aliases, or `full`")
    p.add_argument("--all", dest="full", action="store_true", help="the full update (every stage)")
    for kind, shape in SELECT_FLAGS.items():
        p.add_argument(
            f"--{kind}",
            dest="select",
            action="append",
            type=lambda v, k=kind: (k, v),
            metavar=shape,
            help=f"sync one {kind} and what it needs (repeatable)",
        )
    scope = p.add_argument_group("scope and modes (the backend's query parameters)")
    scope.add_argument("--endpoint", "-e", action="append", default=[], help="hv endpoint id (repeatable)")
    scope.add_argument("--dry-run", action="store_true", help="report the plan, write nothing")
    scope.add_argument("--vms", choices=MODES, help="sync_mode_vm")
    scope.add_argument("--templates", choices=MODES, help="sync_mode_vm_template")
    scope.add_argument("--delete-stale", action="store_true", help="remove managed objects that are gone")
    scope.add_argument("--branch", help="netbox-branching schema id (inventory_branch_schema_id)")
    scope.add_argument("--site", help="default site name for endpoints without a site slug")
    scope.add_argument("--job", help="job id for POST /sync/cancel (default: a random one)")
    conn = p.add_argument_group("connection")
    conn.add_argument("--url", help=f"backend base URL (default ${URL_ENV})")
    conn.add_argument("--api-key-file", help=f"file holding the API key (default ${KEY_ENV})")
    conn.add_argument("--config", help="runner config file (TOML, or INI by .ini/.cfg/.conf)")
    conn.add_argument("--ca-bundle", help="CA bundle to verify the backend's certificate")
    conn.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    conn.add_argument("--timeout", type=float, help="seconds without a byte on a stream (default 60)")
    conn.add_argument("--request-timeout", type=float, help="seconds for a selected-object sync (1800)")
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON document, nothing else")
    out.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    p.set_defaults(func=cmd_sync)
    return p


def query(args: argparse.Namespace) -> dict[str, str]:
    """The scope/mode query parameters shared by every run of the invocation."""
    params: dict[str, str] = {}
    if args.endpoint:
        ids = [part.strip() for value in args.endpoint for part in value.split(",") if part.strip()]
        if not all(i.isascii() and i.isdecimal() for i in ids):
            raise ConfigError("--endpoint expects integer endpoint ids")
        params["hv_endpoint_ids"] = ",".join(ids)
    if args.dry_run:
        params["dry_run"] = "true"
    if args.vms:
        params["sync_mode_vm"] = args.vms
    if args.templates:
        params["sync_mode_vm_template"] = args.templates
    if args.delete_stale:
        params["delete_stale"] = "enabled"
    if args.branch:
        params["inventory_branch_schema_id"] = args.branch
    if args.site:
        params["site"] = args.site
    return params


def _reporter(args: argparse.Namespace, out: TextIO) -> Reporter:
    if args.json:
        return Silent()
    if args.plain or not out.isatty():
        return Plain(out)
    return Live(Console(file=out))


def run_one(client: BackendClient, run: plan.Run, params: dict[str, str], reporter: Reporter) -> RunResult:
    """One run to its end; a failed stage is a result, an unreachable backend is raised."""
    reporter.begin(run)
    merged = {**params, **run.params}
    if run.stream:
        kind = "full-update" if run.route == wire.FULL_UPDATE_ROUTE else "stage"
        frames = 0
        try:
            for frame in client.stream(run.route, merged):
                frames += 1
                reporter.frame(run, frame)
                if frame.event == "complete":
                    result = RunResult.from_complete(
                        run.name, kind, frame.data, http_status=200, frames=frames
                    )
                    break
            else:  # pragma: no cover - client.stream ends only on complete or by raising
                result = RunResult(run.name, kind, False, problem="no complete frame", frames=frames)
        except StreamBroken as exc:
            result = RunResult(run.name, kind, False, problem=str(exc), frames=frames)
    else:
        status, body = client.individual(run.route, merged)
        result = RunResult.from_complete(run.name, "individual", body, http_status=status)
        result.ok = result.ok and status == 200
    reporter.finish(result)
    return result


def document(config: RunnerConfig | None, results: list[RunResult], code: int, error: str | None) -> str:
    """The `--json` document: the outcome, one entry per run with its rows and `complete` as sent."""
    body: dict[str, Any] = {
        "ok": code == EXIT_OK,
        "exit_code": code,
        "backend": config.url if config else None,
        "error": error,
        "runs": [r.as_json() for r in results],
    }
    return json.dumps(body, indent=2, default=str)


def execute(args: argparse.Namespace, out: TextIO, err: TextIO, environ: Mapping[str, str]) -> int:
    config: RunnerConfig | None = None
    results: list[RunResult] = []
    try:
        runs = plan.build(args.stages, args.full, args.select or [])
        params = query(args)
        params["job"] = args.job or f"cli-{secrets.token_hex(6)}"
        config = resolve(
            url=args.url,
            api_key_file=args.api_key_file,
            config=args.config,
            ca_bundle=args.ca_bundle,
            insecure=args.insecure,
            timeout=args.timeout,
            request_timeout=args.request_timeout,
            environ=environ,
        )
    except ConfigError as exc:
        return _fail(args, out, err, config, results, EXIT_USAGE, str(exc))
    reporter = _reporter(args, out)
    with BackendClient(config) as client:
        try:
            for run in runs:
                results.append(run_one(client, run, params, reporter))
        except BackendRefused as exc:
            return _fail(args, out, err, config, results, EXIT_USAGE, _safe(str(exc), config))
        except BackendUnavailable as exc:
            return _fail(args, out, err, config, results, EXIT_BACKEND, _safe(str(exc), config))
        except KeyboardInterrupt:
            client.cancel(params["job"])
            return _fail(args, out, err, config, results, EXIT_INTERRUPTED, "interrupted; runs cancelled")
    code = EXIT_OK if all(r.ok for r in results) else EXIT_FAILED
    if args.json:
        out.write(document(config, results, code, None) + "\n")
    else:
        reporter.summary(results)
    return code


def _safe(text: str, config: RunnerConfig) -> str:
    """Belt and braces: no message leaves with the key in it."""
    return text.replace(config.api_key, "***") if config.api_key else text


def _fail(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    config: RunnerConfig | None,
    results: list[RunResult],
    code: int,
    message: str,
) -> int:
    if args.json:
        out.write(document(config, results, code, message) + "\n")
    else:
        err.write(f"error: {message}\n")
    return code


def cmd_sync(args: argparse.Namespace) -> int:
    return execute(args, sys.stdout, sys.stderr, os.environ)
