"""``/docs`` and ``/redoc`` with their assets served by the backend itself (``/docs-static/<name>``).

FastAPI's default pages load Swagger UI and ReDoc from a CDN without subresource integrity: whoever
controls the CDN (or the path to it) runs script in the origin an operator pastes the API key into. The
files come from the ``fastapi-offline`` distribution (the one the emulator serves its docs from), found
with ``importlib.util.find_spec`` and never imported; only the names in ``ASSETS`` are served.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

router = APIRouter(include_in_schema=False)

PREFIX = "/docs-static/"
ASSETS: dict[str, str] = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
#: ReDoc's sidebar logo is loaded from Redocly's CDN (not configurable): point it at our own icon.
REWRITES: dict[str, tuple[bytes, bytes]] = {
    "redoc.standalone.js": (b"https://cdn.redoc.ly/redoc/logo-mini.svg", PREFIX.encode() + b"favicon.png"),
}
CACHE_CONTROL = "public, max-age=86400"

SWAGGER = f"""<!DOCTYPE html>
<html><head><title>hvsync backend - Swagger UI</title><meta charset="utf-8">
<link rel="icon" type="image/png" href="{PREFIX}favicon.png">
<link rel="stylesheet" href="{PREFIX}swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="{PREFIX}swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({{url: "/openapi.json", dom_id: "#swagger-ui", validatorUrl: null}});</script>
</body></html>"""
REDOC = f"""<!DOCTYPE html>
<html><head><title>hvsync backend - ReDoc</title><meta charset="utf-8">
<link rel="icon" type="image/png" href="{PREFIX}favicon.png"></head>
<body><redoc spec-url="/openapi.json"></redoc>
<script src="{PREFIX}redoc.standalone.js"></script></body></html>"""


def static_dir() -> Path:
    """The ``static`` folder shipped inside the ``fastapi_offline`` package (found, not imported)."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("fastapi-offline is not installed: the /docs and /redoc assets are missing")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


@cache
def _load(name: str) -> tuple[bytes, str]:
    """Body and ETag of a known asset, read once."""
    body = (static_dir() / name).read_bytes()
    if name in REWRITES:
        body = body.replace(*REWRITES[name])
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


@router.get("/docs")
def swagger() -> HTMLResponse:
    return HTMLResponse(SWAGGER)


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return HTMLResponse(REDOC)


@router.get(PREFIX + "{name}")
def asset(name: str, request: Request) -> Response:
    if name not in ASSETS:
        return JSONResponse({"detail": "no such asset"}, status_code=404)
    body, etag = _load(name)
    headers = {"ETag": etag, "Cache-Control": CACHE_CONTROL}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=ASSETS[name], headers=headers)
