"""``hvsync-backend``: run the service and manage it locally (keys, status, encryption-key rotation).

The local key commands talk to the database directly, so they work when no active key is left: that is
the documented recovery path (``hvsync-backend keys create``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from cryptography.fernet import Fernet
from sqlalchemy import func, select

from hvsync_backend import __version__
from hvsync_backend.auth.keys import LastActiveKey
from hvsync_backend.config import CONFIG_FILE_ENV, Settings
from hvsync_backend.context import BackendContext, build_context, load_cipher
from hvsync_backend.db.models import HvEndpoint, InventoryEndpoint
from hvsync_backend.db.session import current_revision, database_kind, head_revision, session_scope
from hvsync_backend.endpoints.crypto import CredentialCipher, parse_keys, write_key_file
from hvsync_backend.endpoints.rotation import reencrypt_all
from hvsync_backend.errors import NotFound


def _context() -> BackendContext:
    context = build_context(Settings())
    if "database" in context.problems:
        raise SystemExit(f"error: {context.problems['database']}")
    return context


def _print_key(view: object, as_json: bool) -> None:
    data = {k: getattr(view, k) for k in ("id", "label", "is_active", "created_at")}
    if as_json:
        print(json.dumps(data))
    else:
        when = datetime.fromtimestamp(data["created_at"], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        state = "active" if data["is_active"] else "inactive"
        print(f"{data['id']:>5}  {state:<8}  {when}  {data['label']}")


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from hvsync_backend.app import create_app
    from hvsync_backend.serving import uvicorn_config

    settings = Settings()
    host = args.host or settings.host
    port = args.port or settings.port
    app = create_app(settings)
    # header and keep-alive timeouts, connection cap, header size: docs/backend.md "Limits"
    uvicorn.Server(uvicorn_config(app, settings, host, port)).run()
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    store = _context().keys
    try:
        if args.keys_command == "create":
            view, raw = store.create(label=args.label)
            if args.json:
                print(json.dumps({"id": view.id, "label": view.label, "raw_key": raw}))
            else:
                print(f"created key {view.id}; store it now, it is not shown again:")
                print(raw)
        elif args.keys_command == "list":
            for view in store.list_keys():
                _print_key(view, args.json)
        elif args.keys_command in ("activate", "deactivate"):
            view = store.set_active(args.id, args.keys_command == "activate", allow_no_active=args.force)
            _print_key(view, args.json)
        elif args.keys_command == "delete":
            store.delete(args.id, allow_no_active=args.force)
            print(f"deleted key {args.id}")
    except NotFound:
        print(f"error: API key {args.id} not found", file=sys.stderr)
        return 1
    except LastActiveKey:
        print("error: that is the last active key; add --force to do it anyway", file=sys.stderr)
        return 1
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    context = _context()
    settings = context.settings
    with context.session_factory() as session:
        hv_count = session.execute(select(func.count(HvEndpoint.id))).scalar()
        inv_count = session.execute(select(func.count(InventoryEndpoint.id))).scalar()
    keys = context.keys.list_keys()
    status = {
        "version": __version__,
        "database": database_kind(settings.resolved_database_url),
        "schema_revision": current_revision(context.engine),
        "schema_head": head_revision(context.engine),
        "data_dir": str(settings.data_dir),
        "encryption_key_source": "HVSYNC_ENCRYPTION_KEY"
        if settings.encryption_key
        else str(settings.resolved_key_file),
        "needs_bootstrap": not keys,
        "keys_total": len(keys),
        "keys_active": sum(1 for k in keys if k.is_active),
        "inventory_endpoints": inv_count,
        "hv_endpoints": hv_count,
        "problems": context.problems,
    }
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        for key, value in status.items():
            print(f"{key:<24} {value}")
    return 1 if context.problems else 0


def cmd_rotate(args: argparse.Namespace) -> int:
    """Re-encrypt every stored credential under a new Fernet key in one transaction."""
    context = _context()
    settings = context.settings
    old = load_cipher(settings)
    new_key = args.new_key.encode("ascii") if args.new_key else Fernet.generate_key()
    parse_keys(new_key.decode("ascii"))
    new = CredentialCipher([new_key])
    key_file = None if settings.encryption_key else settings.resolved_key_file
    staged = key_file.with_name(key_file.name + ".new") if key_file else None
    if staged:
        write_key_file(staged, new_key)
    try:
        with session_scope(context.session_factory) as session:
            count = reencrypt_all(session, old, new)
    except BaseException:
        if staged:
            staged.unlink(missing_ok=True)
        raise
    if key_file and staged:
        os.replace(staged, key_file)
        print(f"re-encrypted {count} credential(s); new key written to {key_file}")
    else:
        print(
            f"re-encrypted {count} credential(s). Set HVSYNC_ENCRYPTION_KEY to the new key now and restart:"
        )
        print(new_key.decode("ascii"))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    context = _context()
    print(f"schema at revision {current_revision(context.engine)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hvsync-backend",
        description=f"hvsync backend {__version__}. Configuration: HVSYNC_* environment variables "
        f"or a TOML file named by {CONFIG_FILE_ENV} (see docs/backend.md).",
    )
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service (applies migrations first)")
    serve.add_argument("--host", default=None, help="bind address (default HVSYNC_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default HVSYNC_PORT or 8800)")
    serve.set_defaults(func=cmd_serve)

    keys = sub.add_parser("keys", help="manage API keys locally (works without an active key)")
    keys.add_argument("--json", action="store_true")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create an active key and print it once")
    create.add_argument("--label", default="")
    keys_sub.add_parser("list", help="list keys (never their values)")
    for name in ("activate", "deactivate", "delete"):
        p = keys_sub.add_parser(name, help=f"{name} a key by id")
        p.add_argument("id", type=int)
        p.add_argument("--force", action="store_true", help="allow leaving no active key")
    keys.set_defaults(func=cmd_keys)

    status = sub.add_parser("status", help="database, schema, keys and endpoints at a glance")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    rotate = sub.add_parser("rotate-encryption-key", help="re-encrypt stored credentials under a new key")
    rotate.add_argument("--new-key", default=None, help="use this Fernet key instead of generating one")
    rotate.set_defaults(func=cmd_rotate)

    migrate = sub.add_parser("migrate", help="apply database migrations and exit")
    migrate.set_defaults(func=cmd_migrate)

    from hvsync_backend.terminal.command import add_parser as add_sync_parser

    add_sync_parser(sub)  # `sync`: run stages against a backend over HTTP (docs/terminal-runner.md)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
