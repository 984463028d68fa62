"""Typed NetBox errors that carry the upstream status and a redacted body.

Stages turn these into stream `problem` objects, so the status NetBox really answered is reported and
no credential ever reaches a frame.
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_KEYS = re.compile(r"(token|password|secret|authorization|api[-_ ]?key|cookie)", re.IGNORECASE)
_TOKEN_TEXT = re.compile(r"(Token|Bearer)\s+\S+", re.IGNORECASE)
_MAX_DEPTH = 8
_MAX_DETAIL = 2000


def redact(value: Any, secrets: tuple[str, ...] = (), depth: int = 0) -> Any:
    """Return `value` with credential-keyed entries and known secret strings replaced by `[redacted]`."""
    if depth > _MAX_DEPTH:
        return "[redacted: nesting depth limit]"
    if isinstance(value, dict):
        return {
            k: "[redacted]" if _SECRET_KEYS.search(str(k)) else redact(v, secrets, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v, secrets, depth + 1) for v in value]
    if isinstance(value, str):
        text = _TOKEN_TEXT.sub(r"\1 [redacted]", value)
        for secret in secrets:
            if secret and len(secret) >= 4:
                text = text.replace(secret, "[redacted]")
        return text
    return value


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
