"""Typed NetBox errors that carry the upstream status and a redacted body.

Stages turn these into stream `problem` objects, so the status NetBox really answered is reported and
no credential ever reaches a frame.
"""

from __future__ import annotations

from typing import Any

from hvsync_backend.wire.redaction import redact

__all__ = ["NetBoxAuthError", "NetBoxError", "NetBoxHTTPError", "NetBoxUnreachable", "redact"]

_MAX_DETAIL = 2000


class NetBoxError(Exception):
    """Base of every NetBox failure; `status` is the HTTP status NetBox answered (None: no answer)."""

    status: int | None = None

    def __init__(self, detail: str, *, status: int | None = None, body: Any = None, path: str = "") -> None:
        super().__init__(detail[:_MAX_DETAIL])
        self.detail = detail[:_MAX_DETAIL]
        self.status = status
        self.body = body
        self.path = path

    def as_problem(self, obj: str | None = None) -> dict[str, Any]:
        """The stream's `problem` shape (contracts/sse-frames.schema.json)."""
        problem: dict[str, Any] = {
            "source": "netbox",
            "status": self.status,
            "detail": self.detail,
            "object": obj,
        }
        if self.path:
            problem["path"] = self.path
        return problem


class NetBoxUnreachable(NetBoxError):
    """No HTTP answer: connection refused, DNS, TLS or timeout."""


class NetBoxHTTPError(NetBoxError):
    """NetBox answered with a 4xx/5xx status."""


class NetBoxAuthError(NetBoxHTTPError):
    """NetBox rejected the token (401/403)."""
