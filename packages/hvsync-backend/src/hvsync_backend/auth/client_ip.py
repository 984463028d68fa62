"""The client address lockout counts against: the socket peer, or X-Forwarded-For only via trusted proxies."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.requests import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _trusted(address: str, proxies: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_ip(request: Request, proxies: Sequence[Network]) -> str:
    """Walk X-Forwarded-For from the right, skipping trusted proxies; the first untrusted hop is the client."""
    peer = request.client.host if request.client else "unknown"
    if not proxies or not _trusted(peer, proxies):
        return peer
    forwarded = ",".join(request.headers.getlist("x-forwarded-for"))
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return peer
    return hops[0] if hops else peer
