"""``BothSlashForms``: ``/hv/nodes`` and ``/hv/nodes/`` are served alike, without a redirect.

Starlette's slash redirect builds its ``Location`` from the request's ``Host`` header, so anyone could
make the backend point a client at another host (and a 307 replays a body, with its key header, there).
Instead, a path no route serves is tried with its trailing slash toggled, and served in place when that
form exists.
"""

from __future__ import annotations

from starlette.routing import Router
from starlette.types import ASGIApp, Receive, Scope, Send

from hvsync_backend.route_table import path_patterns


class BothSlashForms:
    def __init__(self, app: ASGIApp, router: Router) -> None:
        self.app = app
        self.router = router

    def _served(self, path: str) -> bool:
        return any(regex.match(path) for _, regex in path_patterns(self.router.routes))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if path != "/" and not self._served(path):
                other = path[:-1] if path.endswith("/") else path + "/"
                if self._served(other):
                    raw: bytes = scope.get("raw_path") or path.encode()
                    raw = raw[:-1] if raw.endswith(b"/") else raw + b"/"
                    scope = {**scope, "path": other, "raw_path": raw}
        await self.app(scope, receive, send)
