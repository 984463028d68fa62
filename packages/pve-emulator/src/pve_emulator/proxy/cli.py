"""Command-line options of real mode (``pve-emulator serve --mode real --upstream https://host:8006``).

Secrets of the optional server-side credentials come from the environment, never from flags.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pve_emulator.config import EmulatorConfig
from pve_emulator.proxy.config import ENV_PASSWORD, ENV_TOKEN_SECRET, ProxyConfig
from pve_emulator.schema import RELEASE_FILES


def add_real_mode_arguments(s: argparse.ArgumentParser) -> None:
    g = s.add_argument_group("real mode (a validating proxy in front of a real Proxmox VE)")
    g.add_argument("--mode", choices=["mock", "real"], default="mock", help="default %(default)s")
    g.add_argument("--upstream", help="the Proxmox VE to forward to, e.g. https://pve1.example:8006")
    g.add_argument(
        "--verify-tls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify the upstream's TLS certificate (default on)",
    )
    g.add_argument("--ca-file", type=Path, help="CA bundle (PEM) that signed the upstream certificate")
    g.add_argument("--upstream-timeout", type=float, default=30.0, help="seconds to wait for an answer")
    g.add_argument("--upstream-connect-timeout", type=float, default=5.0, help="seconds to connect")
    g.add_argument("--upstream-retries", type=int, default=2, help="retries of idempotent requests")
    g.add_argument(
        "--on-drift",
        choices=["warn", "fail"],
        default="warn",
        help="a response that breaks the schema: pass it with a warning header, or answer 502",
    )
    g.add_argument(
        "--upstream-token-id",
        help=f"server-side API token for callers without credentials (${ENV_TOKEN_SECRET})",
    )
    g.add_argument(
        "--upstream-user", help=f"server-side user for callers without credentials (${ENV_PASSWORD})"
    )


def run_real_mode(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if not args.upstream:
        parser.error("--mode real needs --upstream https://host:8006")
    if args.release not in RELEASE_FILES:
        parser.error(f"unknown API release {args.release!r}; known: {', '.join(RELEASE_FILES)}")
    token_secret = os.environ.get(ENV_TOKEN_SECRET) if args.upstream_token_id else None
    password = os.environ.get(ENV_PASSWORD) if args.upstream_user else None
    if args.upstream_token_id and not token_secret:
        parser.error(f"--upstream-token-id needs its secret in ${ENV_TOKEN_SECRET}")
    if args.upstream_user and not password:
        parser.error(f"--upstream-user needs its password in ${ENV_PASSWORD}")
    try:
        proxy = ProxyConfig(
            upstream=args.upstream,
            release=args.release,
            verify_tls=args.verify_tls,
            ca_file=args.ca_file,
            connect_timeout=args.upstream_connect_timeout,
            read_timeout=args.upstream_timeout,
            retries=args.upstream_retries,
            on_drift=args.on_drift,
            token_id=args.upstream_token_id,
            token_secret=token_secret,
            user=args.upstream_user,
            password=password,
        )
    except ValueError as exc:
        parser.error(str(exc))
    listen = EmulatorConfig(
        host=args.host, port=args.port, tls=args.tls or args.cert is not None, cert=args.cert, key=args.key
    )
    scheme = "https" if listen.tls else "http"
    print(
        f"pve-emulator: real mode on {scheme}://{listen.host}:{listen.port}/api2/json -> {proxy.upstream} "
        f"(API release {proxy.release}, TLS verification {'on' if proxy.verify_tls else 'OFF'}, "
        f"drift: {proxy.on_drift})",
        flush=True,
    )
    from pve_emulator.proxy.server import serve_real

    serve_real(listen, proxy)
    return 0
