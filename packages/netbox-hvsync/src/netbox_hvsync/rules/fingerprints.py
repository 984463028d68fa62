"""Credential fingerprints of the inventory endpoint (SPEC 2.6, 4.5 B6).

`pushed_credential_fingerprint` is a keyed HMAC-SHA256 over token_version, token_key and token with
an unambiguous separator: every field is length-prefixed, so ("ab", "c") and ("a", "bc") can never
collide. It is non-reversible, and empty means "never pushed", which always reads as changed.
"""

from __future__ import annotations

import hashlib
import hmac

FINGERPRINT_VERSION = "v1"


def frame_fields(*fields: str) -> bytes:
    """Length-prefix every field (`<len>:<utf-8 bytes>`) so concatenation stays unambiguous."""
    out = bytearray()
    for field in fields:
        data = field.encode("utf-8")
        out += str(len(data)).encode("ascii") + b":" + data
    return bytes(out)


def credential_fingerprint(
    key: bytes, token_version: object, token_key: str | None, token: str | None
) -> str:
    """`v1:<hex>`: HMAC-SHA256 under a plugin-held key; never contains the credential itself."""
    if not key:
        raise ValueError("fingerprint key must not be empty")
    message = frame_fields("inventory-credential", str(token_version), token_key or "", token or "")
    digest = hmac.new(key, message, hashlib.sha256).hexdigest()
    return f"{FINGERPRINT_VERSION}:{digest}"


def fingerprint_changed(stored: str | None, current: str) -> bool:
    """True when the credentials differ from the last successful push; empty stored reads as changed."""
    if not stored:
        return True
    return not hmac.compare_digest(stored.encode(), current.encode())
