"""Proxmox-style credentials on the wire: signed tickets, CSRF prevention tokens, API token headers.

Tickets look like PVE's (``PVE:<userid>:<hex time>::<signature>``) and are signed with a per-process
secret, so they survive nothing but the process, like mock state itself. Lifetimes follow
pve-access-control: tickets and CSRF tokens are good for two hours (five minutes of clock skew
tolerated), judged against an injectable :class:`~pve_emulator.clock.Clock`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

from pve_emulator.clock import Clock

TICKET_LIFETIME = 2 * 3600  # pve-access-control: $ticket_lifetime, for tickets and CSRF tokens alike
AUTH_GRACE = 5 * 60  # $auth_graceperiod: a stamp up to 5 minutes in the future passes (clock skew)
_TICKET = re.compile(r"^PVE:(\S+):([A-Z0-9]{8})$")
_CSRF = re.compile(r"^([A-Z0-9]{8}):(\S+)$")


def fresh(stamp: str, now: float, lifetime: float = TICKET_LIFETIME) -> bool:
    """Whether a hex time stamp is within PVE's window: -300 s < age < 7200 s (both bounds exclusive);
    ``lifetime`` shortens it (the ``ticket_lifetime`` fault: tickets that expire mid-run)."""
    try:
        age = now - int(stamp, 16)
    except ValueError:
        return False
    return -AUTH_GRACE < age < lifetime


class TicketSigner:
    """Issues and checks tickets and CSRF prevention tokens against its clock (``now`` overrides it)."""

    def __init__(self, secret: bytes | None = None, clock: Clock | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.clock = clock or Clock()
        #: seconds a ticket and CSRF token stay good (PVE's two hours unless a fault shortens it)
        self.lifetime: float = TICKET_LIFETIME

    def _now(self, now: float | None) -> float:
        return self.clock.now() if now is None else now

    def _sign(self, text: str) -> str:
        mac = hmac.new(self._secret, text.encode(), hashlib.sha256).digest()
        return base64.b64encode(mac).decode().rstrip("=")

    def issue(self, userid: str, now: float | None = None) -> str:
        plain = f"PVE:{userid}:{int(self._now(now)):08X}"
        return f"{plain}::{self._sign(plain)}"

    def verify(self, ticket: str, now: float | None = None) -> str | None:
        """Return the user id of a genuine ticket within its lifetime, else None."""
        plain, sep, signature = ticket.partition("::")
        if not sep or not hmac.compare_digest(self._sign(plain), signature):
            return None
        match = _TICKET.match(plain)
        if match is None or not fresh(match.group(2), self._now(now), self.lifetime):
            return None
        return match.group(1)

    def csrf_token(self, userid: str, now: float | None = None) -> str:
        stamp = f"{int(self._now(now)):08X}"
        return f"{stamp}:{self._sign('CSRF:' + stamp + ':' + userid)}"

    def verify_csrf(self, userid: str, token: str, now: float | None = None) -> bool:
        """A CSRF token is bound to its user and lives as long as a ticket (PVE uses the same window)."""
        match = _CSRF.match(token)
        if match is None:
            return False
        stamp, signature = match.groups()
        genuine = hmac.compare_digest(self._sign("CSRF:" + stamp + ":" + userid), signature)
        return genuine and fresh(stamp, self._now(now), self.lifetime)


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
