"""Redaction of backend error details before they are logged or stored (SPEC 7.3, DESIGN 7).

The redaction itself is shared with the backend (`netbox_hvsync.wire.redaction`, from contracts/wire):
credential-like keys (normalised for case, hyphen, underscore and space), the 422 `loc` rule, swept
credential-looking text, known secrets, and the nesting-depth limit. This module adds what the plugin does
with a backend error body: one redacted line for the job log and job data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..wire.redaction import (
    DEPTH_REDACTED,
    REDACTED,
    is_credential_key,
    normalise_key,
    redact,
    sweep_text,
)

__all__ = [
    "DEPTH_REDACTED",
    "REDACTED",
    "is_credential_key",
    "normalise_key",
    "redact",
    "redacted_detail",
    "sweep_text",
]


def redacted_detail(body: Any, text: str = "", known_secrets: Iterable[str] = ()) -> str:
    """One-line, redacted rendering of a backend error body (`detail` preferred) or of raw text."""
    if isinstance(body, Mapping) and "detail" in body:
        detail = redact(body["detail"], known_secrets)
    elif body is not None:
        detail = redact(body, known_secrets)
    else:
        detail = sweep_text(text, known_secrets)
    if isinstance(detail, str):
        rendered = detail
    elif isinstance(detail, list):
        rendered = "; ".join(_render_validation_item(item) for item in detail)
    else:
        rendered = str(detail)
    return " ".join(rendered.split())


def _render_validation_item(item: Any) -> str:
    if isinstance(item, Mapping) and "msg" in item:
        loc = item.get("loc")
        where = ".".join(str(p) for p in loc) if isinstance(loc, list | tuple) else str(loc or "")
        return f"{where}: {item['msg']}" if where else str(item["msg"])
    return str(item)
