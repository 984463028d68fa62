"""``pve-emulator serve``: run the Proxmox VE API emulator."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pve_emulator import config as defaults
from pve_emulator.config import EmulatorConfig
from pve_emulator.errors import ApiError
from pve_emulator.schema import RELEASE_FILES


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pve-emulator", description="Proxmox VE API emulator (mock mode)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the API")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8006)
    s.add_argument("--scenario", choices=["demo", "large", "empty"], default="demo")
    s.add_argument("--vms", type=int, help="guests in the large scenario (default 1000)")
    s.add_argument("--nodes", type=int, help="nodes in the large/empty scenario (default 3 / 1)")
    s.add_argument(
        "--release",
        "--api-release",
        default="9.1",
        help=f"API release schema: {' or '.join(RELEASE_FILES)} (default %(default)s)",
    )
    s.add_argument(
        "--tls", action="store_true", help="serve HTTPS (self-signed certificate unless --cert/--key)"
    )
    s.add_argument("--cert", type=Path)
    s.add_argument("--key", type=Path)
    s.add_argument("--user", default=defaults.DEFAULT_USER, help="login user (default %(default)s)")
    s.add_argument("--password", default=defaults.DEFAULT_PASSWORD, help="login password (default: see docs)")
    s.add_argument(
        "--token-id", default=defaults.DEFAULT_TOKEN_ID, help="pre-created API token (default %(default)s)"
    )
    s.add_argument(
        "--token-secret", default=defaults.DEFAULT_TOKEN_SECRET, help="its secret (default: see docs)"
    )
    s.add_argument("--task-duration", type=float, default=0.2, help="seconds a task reports 'running'")
    s.add_argument("--no-response-cache", action="store_true", help="encode hot lists on every request")
    s.add_argument(
        "--response-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="every API request waits this long before it is answered: a slow Proxmox (default 0)",
    )
    s.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="API requests handled at a time, the others wait their turn (default: no limit)",
    )
    s.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="start with a fault (repeatable): node-offline=pve2, connect-delay=0.5, no-quorum, "
        "ticket-lifetime=30, latency=/nodes/*/qemu/*/config:2.0[~0.5], drop-rate=0.05, locked=101:backup, "
        "task-error=vzdump:MESSAGE, storage-unavailable=nfs, time-scale=0.1, seed=7 (docs/emulator.md)",
    )
    s.add_argument(
        "--control-secret",
        default=os.environ.get("PVE_EMULATOR_CONTROL_SECRET"),
        metavar="SECRET",
        help="serve the fault control API /_emulator/faults to callers with this secret "
        "(default: $PVE_EMULATOR_CONTROL_SECRET; unset: no control API)",
    )
    from pve_emulator.proxy.cli import add_real_mode_arguments

    add_real_mode_arguments(s)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.vms is not None and args.vms < 0:
        p.error("--vms must be >= 0")
    if not 0 <= args.response_delay <= 60:
        p.error("--response-delay must be between 0 and 60 seconds")
    if args.concurrency is not None and args.concurrency < 1:
        p.error("--concurrency must be at least 1")
    if (args.cert is None) != (args.key is None):
        p.error("--cert and --key go together")
    # checked here, before anything starts, so both modes refuse it as a usage error (exit 2)
    if args.release not in RELEASE_FILES:
        p.error(f"unknown API release {args.release!r}; known: {', '.join(RELEASE_FILES)}")
    if args.mode == "real" and args.fault:
        p.error("--fault is mock mode's: a real Proxmox VE's faults are its own")
    if args.mode == "real":
        from pve_emulator.proxy.cli import run_real_mode

        return run_real_mode(args, p)
    if "!" not in args.token_id:
        p.error("--token-id must look like user@realm!name")
    cfg = EmulatorConfig(
        host=args.host,
        port=args.port,
        scenario=args.scenario,
        vms=args.vms,
        nodes=args.nodes,
        release=args.release,
        tls=args.tls or args.cert is not None,
        cert=args.cert,
        key=args.key,
        user=args.user,
        password=args.password,
        token_id=args.token_id,
        token_secret=args.token_secret,
        task_duration=args.task_duration,
        response_cache=not args.no_response_cache,
        response_delay=args.response_delay,
        concurrency=args.concurrency,
        control_secret=args.control_secret or None,
    )
    try:
        from pve_emulator.mock.faults import merge_cli_faults

        cfg.faults = merge_cli_faults(args.fault)
        from pve_emulator.server import create_app

        app = create_app(cfg)  # a fault naming no such node, guest or storage stops here (exit 2)
    except ValueError as exc:
        p.error(f"--fault: {exc}")
    except ApiError as exc:
        p.error(f"--fault: {'; '.join(f'{e.field}: {e.message}' for e in exc.errors) or exc.message}")
    scheme = "https" if cfg.tls else "http"
    print(
        f"pve-emulator: {cfg.scenario} scenario on {scheme}://{cfg.host}:{cfg.port}/api2/json "
        f"(docs {scheme}://{cfg.host}:{cfg.port}/docs); user {cfg.user}, token {cfg.token_id}",
        flush=True,
    )
    from pve_emulator.server import serve

    serve(cfg, app)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
