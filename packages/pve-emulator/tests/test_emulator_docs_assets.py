"""The Swagger UI / ReDoc assets the emulator serves itself: known files only, public, cacheable."""

from __future__ import annotations

import importlib.util
import re
import socket
from pathlib import Path

import httpx
import pytest
from pve_emulator.proxy.testing import running_proxy
from pve_emulator.testing import EmulatorHandle

EXPECTED_TYPES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}


def _shipped(name: str) -> bytes:
    spec = importlib.util.find_spec("fastapi_offline")
    assert spec is not None and spec.submodule_search_locations, "fastapi-offline is not installed"
    return (Path(next(iter(spec.submodule_search_locations))) / "static" / name).read_bytes()


def _raw_get(pve: EmulatorHandle, target: str) -> tuple[int, bytes]:
    """GET ``target`` exactly as written (httpx would normalise ``..`` away before sending it)."""
    with socket.create_connection((pve.host, pve.port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {pve.host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize("name", sorted(EXPECTED_TYPES))
def test_assets_are_served_unauthenticated_with_type_and_caching(pve: EmulatorHandle, name: str) -> None:
    resp = httpx.get(f"{pve.url}/docs-static/{name}", timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == EXPECTED_TYPES[name]
    if name == "redoc.standalone.js":  # its CDN logo now points at the emulator's own icon
        assert b"cdn.redoc.ly" not in resp.content and b'src:"/docs-static/favicon.png"' in resp.content
        assert resp.content == _shipped(name).replace(
            b"https://cdn.redoc.ly/redoc/logo-mini.svg", b"/docs-static/favicon.png"
        )
    else:
        assert resp.content == _shipped(name)
    assert resp.headers["cache-control"] == "public, max-age=86400"
    again = httpx.get(
        f"{pve.url}/docs-static/{name}", headers={"If-None-Match": resp.headers["etag"]}, timeout=10
    )
    assert again.status_code == 304 and again.content == b""


def test_head_answers_headers_only_and_writes_are_refused(pve: EmulatorHandle) -> None:
    head = httpx.head(f"{pve.url}/docs-static/swagger-ui.css", timeout=10)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(_shipped("swagger-ui.css")))
    post = httpx.post(f"{pve.url}/docs-static/swagger-ui.css", content=b"x", timeout=10)
    assert post.status_code == 405 and post.headers["allow"] == "GET, HEAD"
    assert post.json()["detail"] == "method not allowed"


@pytest.mark.parametrize(
    "target",
    [
        "/docs-static/",
        "/docs-static/swagger-ui.js",
        "/docs-static/__init__.py",
        "/docs-static/../openapi.json",
        "/docs-static/../../pyproject.toml",
        "/docs-static/%2e%2e/%2e%2e/pyproject.toml",
        "/docs-static/..%2f__init__.py",
        "/docs-static/static/favicon.png",
        "/docs-static/favicon.png/",
    ],
)
def test_unknown_names_and_traversal_are_404(pve: EmulatorHandle, target: str) -> None:
    status, body = _raw_get(pve, target)
    assert status == 404, (target, body[:200])
    assert b"no such asset" in body


def test_assets_are_not_api_paths(pve: EmulatorHandle) -> None:
    """Under /api2/json the name is an unknown API path answered in Proxmox's shape, not the asset."""
    resp = httpx.get(f"{pve.api_url}/docs-static/favicon.png", timeout=10)
    assert resp.status_code == 404 and resp.json()["data"] is None


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_pages_reference_only_the_emulators_own_origin(pve: EmulatorHandle, page: str) -> None:
    html = httpx.get(pve.url + page, timeout=10).text
    refs = re.findall(r'(?:src|href|url|spec-url)\s*[=:]\s*"([^"]*)"', html)
    assert refs, html
    assert all(ref.startswith("/") and not ref.startswith("//") for ref in refs), refs
    assert "://" not in html
    own = {ref for ref in refs if ref.startswith("/docs-static/")}
    for ref in own:
        assert httpx.get(pve.url + ref, timeout=10).status_code == 200, ref


def test_real_mode_serves_the_same_assets_without_asking_upstream() -> None:
    # Port 9 (discard) on loopback: nothing answers, so any upstream call would fail the request.
    with running_proxy("https://127.0.0.1:9") as (url, _app):
        resp = httpx.get(url + "/docs-static/swagger-ui.css", timeout=10)
        assert resp.status_code == 200 and resp.content == _shipped("swagger-ui.css")
        assert httpx.get(url + "/docs-static/nope.js", timeout=10).status_code == 404
