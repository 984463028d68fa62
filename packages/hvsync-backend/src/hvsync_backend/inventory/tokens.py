"""The NetBox `Authorization` header of a token, built in one place for the endpoint registry and the client."""

from __future__ import annotations

__all__ = ["auth_header"]


def auth_header(token_version: int, token: str, token_key: str | None = None) -> str:
    """NetBox v1 tokens use `Token <token>`; v2 tokens use `Bearer nbt_<key>.<token>`.

    Strict on purpose: a v2 token without its key, or a version NetBox does not have, raises ValueError
    instead of yielding a header NetBox would refuse on every request."""
    version = int(token_version)
    if version == 1:
        return f"Token {token}"
    if version == 2:
        if not token_key:
            raise ValueError("token_key is required for token_version 2")
        return f"Bearer nbt_{token_key}.{token}"
    raise ValueError(f"token_version must be 1 or 2, not {token_version!r}")
