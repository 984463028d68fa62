"""Swagger UI and ReDoc files served by the emulator itself, so ``/docs`` and ``/redoc`` work offline.

The files come from the ``fastapi-offline`` distribution (a declared dependency). It is located with
``importlib.util.find_spec`` and never imported: importing it would import FastAPI, which the emulator
does not need. Only the names in ``ASSETS`` are served, so a request cannot reach any other file.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ASSETS: dict[str, bytes] = {
    "swagger-ui-bundle.js": b"text/javascript; charset=utf-8",
    "swagger-ui.css": b"text/css; charset=utf-8",
    "redoc.standalone.js": b"text/javascript; charset=utf-8",
    "favicon.png": b"image/png",
}
#: ReDoc's sidebar shows a logo loaded from Redocly's CDN (not configurable): point it at our own icon,
#: so the page makes no request off the emulator's origin.
REWRITES: dict[str, tuple[bytes, bytes]] = {
    "redoc.standalone.js": (b"https://cdn.redoc.ly/redoc/logo-mini.svg", b"/docs-static/favicon.png"),
}
#: The files change only when the dependency is upgraded; the ETag lets a browser revalidate then.
CACHE_CONTROL = b"public, max-age=86400"


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: bytes
    etag: bytes


class AssetsMissing(RuntimeError):
    """``fastapi-offline`` is not installed (it is a dependency of the emulator: reinstall it)."""


def static_dir() -> Path:
    """The ``static`` folder shipped inside the ``fastapi_offline`` package (found, not imported)."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        raise AssetsMissing("fastapi-offline is not installed: the /docs and /redoc assets are missing")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def asset(name: str) -> Asset | None:
    """The asset called ``name``, or None if it is not one of ``ASSETS``."""
    return _load(name) if name in ASSETS else None


@cache
def _load(name: str) -> Asset:
    """Read once, then kept (keyed only by the known names, so the cache stays small)."""
    body = (static_dir() / name).read_bytes()
    if name in REWRITES:
        body = body.replace(*REWRITES[name])
    etag = b'"' + hashlib.sha256(body).hexdigest()[:32].encode() + b'"'
    return Asset(body=body, content_type=ASSETS[name], etag=etag)
