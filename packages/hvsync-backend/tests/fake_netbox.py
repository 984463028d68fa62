"""A NetBox REST API that stores nothing, for runs that only need a stage to reach its end (the fuzz run).

Reads answer an empty page (or, for a list given in `rows`, those rows whatever the filters),
`GET /api/status/` a supported release with the plugin installed; creates and updates echo what was sent
with an id, deletes answer 204. Plug it in with `context.netbox_transport = FakeNetBox().transport`;
`requests` counts what it answered by method.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

import httpx
from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig

#: The Authorization header the client tests send (a v1 token; nothing checks it)
AUTH = "Token 0123456789abcdef0123456789abcdef01234567"


def mock_client(handler: Any, **overrides: Any) -> NetBoxClient:
    """A NetBoxClient for http://netbox.test whose requests `handler` answers (httpx.MockTransport)."""
    config = NetBoxConfig(url="http://netbox.test", auth_header=AUTH, **overrides)
    return NetBoxClient(config, transport=httpx.MockTransport(handler))


EMPTY_PAGE: dict[str, Any] = {"count": 0, "next": None, "previous": None, "results": []}
STATUS: dict[str, Any] = {
    "netbox-version": "4.7.3",
    "python-version": "3.12.3",
    "plugins": {"netbox_hvsync": "0.1.0"},
}


class FakeNetBox:
    def __init__(self, rows: dict[str, list[dict[str, Any]]] | None = None) -> None:
        #: list path without /api/ and slashes (e.g. "plugins/hvsync/hv-endpoints") -> its rows
        self.rows = rows or {}
        self._ids = itertools.count(1000)
        self.requests: Counter[str] = Counter()

    def transport(self) -> httpx.AsyncBaseTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests[request.method] += 1
        path = request.url.path
        if not path.startswith("/api/"):
            return httpx.Response(404, json={"detail": "Not found."})
        if request.method == "GET":
            route = path.removeprefix("/api/").strip("/")
            if route == "status":
                return httpx.Response(200, json=STATUS)
            rows = self.rows.get(route)
            if rows is None:
                return httpx.Response(200, json=EMPTY_PAGE)
            return httpx.Response(200, json={**EMPTY_PAGE, "count": len(rows), "results": rows})
        if request.method == "DELETE":
            return httpx.Response(204)
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            return httpx.Response(400, json={"detail": "JSON parse error"})
        status = 201 if request.method == "POST" else 200
        if isinstance(body, list):
            return httpx.Response(status, json=[self._saved(item) for item in body])
        if isinstance(body, dict):
            return httpx.Response(status, json=self._saved(body))
        return httpx.Response(400, json={"detail": "expected an object or a list of objects"})

    def _saved(self, item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        return {**item, "id": item.get("id") or next(self._ids)}
