"""bcrypt over a SHA-256 pre-hash: bcrypt reads only 72 bytes, the digest keeps every character of a key relevant."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

import bcrypt

MIN_KEY_LENGTH = 32
MAX_KEY_LENGTH = 512
# Printable ASCII without spaces: the key travels in an HTTP header.
KEY_PATTERN = re.compile(r"^[\x21-\x7e]+$")


def key_problem(key: str) -> str | None:
    """Why a presented candidate cannot be a key, or None when it is acceptable."""
    if len(key) < MIN_KEY_LENGTH:
        return f"must be at least {MIN_KEY_LENGTH} characters (64 recommended)"
    if len(key) > MAX_KEY_LENGTH:
        return f"must be at most {MAX_KEY_LENGTH} characters"
    if not KEY_PATTERN.match(key):
        return "must contain only printable ASCII characters without spaces"
    return None


def _prehash(key: str) -> bytes:
    return base64.b64encode(hashlib.sha256(key.encode("utf-8")).digest())


def hash_key(key: str, rounds: int) -> bytes:
    return bcrypt.hashpw(_prehash(key), bcrypt.gensalt(rounds=rounds))


def check_key(key: str, key_hash: bytes) -> bool:
    try:
        return bcrypt.checkpw(_prehash(key), bytes(key_hash))
    except ValueError:
        return False


def generate_key() -> str:
    """A 64-character URL-safe random key (384 bits)."""
    return secrets.token_urlsafe(48)
