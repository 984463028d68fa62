"""Proxmox-style credentials on the wire: signed tickets, CSRF prevention tokens, API token headers.

Tickets look like PVE's (``PVE:<userid>:<hex time>::<signature>``) and are signed with a per-process
secret, so they survive nothing but the process, like mock state itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

TICKET_LIFETIME = 2 * 3600


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling: a user, optionally through one of its API tokens (``user@realm!name``)."""

    userid: str
    tokenid: str | None = None
    via: str = "ticket"

    @property
    def subject(self) -> str:
        return self.tokenid or self.userid


class TicketSigner:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _sign(self, text: str) -> str:
        mac = hmac.new(self._secret, text.encode(), hashlib.sha256).digest()
        return base64.b64encode(mac).decode().rstrip("=")

    def issue(self, userid: str, now: float | None = None) -> str:
        plain = f"PVE:{userid}:{int(now if now is not None else time.time()):08X}"
        return f"{plain}::{self._sign(plain)}"

    def verify(self, ticket: str, now: float | None = None) -> str | None:
        """Return the user id of a valid, unexpired ticket, else None."""
        plain, sep, signature = ticket.partition("::")
        if not sep or not hmac.compare_digest(self._sign(plain), signature):
            return None
        parts = plain.split(":")
        if len(parts) != 3 or parts[0] != "PVE":
            return None
        try:
            issued = int(parts[2], 16)
        except ValueError:
            return None
        if (now if now is not None else time.time()) - issued > TICKET_LIFETIME:
            return None
        return parts[1]

    def csrf_token(self, userid: str, now: float | None = None) -> str:
        stamp = f"{int(now if now is not None else time.time()):08X}"
        return f"{stamp}:{self._sign('CSRF:' + stamp + ':' + userid)}"

    def verify_csrf(self, userid: str, token: str) -> bool:
        stamp, sep, signature = token.partition(":")
        return bool(sep) and hmac.compare_digest(self._sign("CSRF:" + stamp + ":" + userid), signature)


def parse_token_header(value: str) -> tuple[str, str, str] | None:
    """``PVEAPIToken=user@realm!name=secret`` (also ``:`` as separator) -> (userid, full token id, secret)."""
    scheme, sep, rest = value.partition("=")
    if not sep or scheme.strip() != "PVEAPIToken":
        return None
    for splitter in ("=", ":"):
        full, sep2, secret = rest.partition(splitter)
        if sep2 and "!" in full:
            userid = full.split("!", 1)[0]
            return userid, full, secret.strip()
    return None
