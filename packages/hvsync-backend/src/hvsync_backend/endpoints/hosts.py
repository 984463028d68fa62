"""Which hosts the backend may dial (endpoint `ip_address` / `domain`), checked on the text and again on
every address a name resolves to, at connect time, by the NetBox and the Proxmox clients alike.

Refused, because no NetBox or Proxmox lives there and a request sent there reaches something else
(cloud metadata services hold credentials; the unspecified address is this host):

- link-local addresses (169.254.0.0/16, fe80::/10: the cloud metadata service at 169.254.169.254),
  and the metadata addresses and names outside it: fd00:ec2::254 (in the private fc00::/7),
  100.100.100.200 (in the shared 100.64.0.0/10), `metadata.google.internal`;
- unspecified and "this network" addresses (0.0.0.0/8, ::), multicast, broadcast and reserved ones;
- IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) IPv6 forms, and IPv6 literals with a
  zone (`%eth0`): write the IPv4 address itself;
- IPv6 forms that carry an IPv4 address (NAT64 64:ff9b::/96, 6to4, Teredo) whose IPv4 is refused;
- numeric "domains" (`2130706433`, `127.1`, `0x7f.1`, `0177.0.0.1`): a resolver reads them as IPv4
  addresses, so they would slip past a rule on dotted quads. A name whose last label is a number is
  never a DNS name (no top-level domain is numeric).

Loopback (127.0.0.0/8, ::1) stays allowed: SPEC 2.3 has the plugin push a loopback address when its
record has no linked IP ("so the backend has something to dial"), and a backend on the NetBox host
reaches NetBox there. Private ranges stay allowed: that is where Proxmox clusters live.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable

__all__ = [
    "HostRefused",
    "check_address",
    "check_domain_text",
    "check_ip_text",
    "refusal",
    "resolve_checked",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Cloud metadata addresses outside link-local, named here: AWS's IPv6 one (in the private fc00::/7) and
#: Alibaba Cloud's (in the shared 100.64.0.0/10).
_METADATA = {ipaddress.IPv6Address("fd00:ec2::254"), ipaddress.IPv4Address("100.100.100.200")}
#: Cloud metadata service names (they resolve to link-local addresses inside the cloud; refused by name
#: too, so a refusal is clear before anything is resolved).
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
#: The WHATWG URL standard's "ends in a number": a last label of digits, or 0x and hex digits.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*")


class HostRefused(ValueError):
    """A host the backend will not dial; the message says why (it names no credential)."""


def refusal(address: IPAddress) -> str | None:
    """Why `address` may not be dialled, or None when it may (loopback and private ranges may)."""
    if address in _METADATA:
        return "is a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return "is an IPv6 address with a zone"
        if address.ipv4_mapped is not None:
            return "is an IPv4-mapped IPv6 address (write the IPv4 address itself)"
        if address.is_loopback:
            return None
        if address.is_unspecified:
            return "is the unspecified address"
        if int(address) >> 32 == 0:
            return "is an IPv4-compatible IPv6 address (write the IPv4 address itself)"
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = refusal(embedded)
            return None if reason is None else f"carries IPv4 {embedded}, which {reason}"
    if address.is_loopback:
        return None
    if address.is_link_local:
        return "is link-local (cloud metadata services live there)"
    if address.is_unspecified or (isinstance(address, ipaddress.IPv4Address) and address in _THIS_NETWORK):
        return "is the unspecified address"
    if address.is_multicast:
        return "is a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address == ipaddress.IPv4Address("255.255.255.255"):
        return "is the broadcast address"
    if address.is_reserved:
        return "is a reserved address"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def check_address(address: IPAddress, *, where: str = "") -> IPAddress:
    """`address`, or HostRefused naming it and the reason."""
    reason = refusal(address)
    if reason is not None:
        raise HostRefused(f"{where}{address}, which {reason}" if where else f"{address} {reason}")
    return address


def check_ip_text(value: str) -> str:
    """An endpoint's `ip_address`: an IP literal the backend may dial, in canonical form ('' stays '')."""
    if value == "":
        return value
    try:
        address = ipaddress.ip_address(_unbracket(value))
    except ValueError:
        raise HostRefused("must be an IPv4 or IPv6 address without port, scheme or path") from None
    check_address(address)
    return str(address)


def _unbracket(value: str) -> str:
    """`[v6]` -> `v6`; a lone bracket stays (and makes the value invalid)."""
    return value[1:-1] if value.startswith("[") and value.endswith("]") else value


def check_domain_text(value: str) -> str:
    """An endpoint's `domain`: a DNS host name, or an IP literal the backend may dial ('' stays '')."""
    if value == "":
        return value
    try:
        address = ipaddress.ip_address(_unbracket(value))
    except ValueError:
        pass
    else:
        check_address(address)
        return value
    name = value[:-1] if value.endswith(".") else value
    labels = name.split(".")
    if name.lower() in _METADATA_NAMES:
        raise HostRefused("is a cloud metadata service name")
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise HostRefused(
            "must be a DNS host name (letters, digits, hyphens, dots) without port, scheme or path"
        )
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        raise HostRefused(
            "is a numeric host form a resolver reads as an IPv4 address (such as 127.1 or 0x7f.1): "
            "write a DNS name or put the address in ip_address"
        )
    return value


#: getaddrinfo as the clients call it; tests replace it (a resolver answering what they choose).
Lookup = Callable[[str, int], Awaitable[list[str]]]


async def system_lookup(host: str, port: int) -> list[str]:
    """The system resolver's addresses for `host` (TCP), in its order, without duplicates."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


lookup: Lookup = system_lookup


async def resolve_checked(host: str, port: int) -> list[str]:
    """Resolve `host` once and check every address; the caller connects to these addresses only, so a
    name that resolves elsewhere later (DNS rebinding) cannot slip a refused address in.

    Raises HostRefused when the host text or any address it resolves to is refused (a name that
    resolves to one good and one refused address is refused: which one a client picks is not ours to
    guess), OSError when it does not resolve."""
    text = _unbracket(host)
    try:
        literal = ipaddress.ip_address(text)
    except ValueError:
        check_domain_text(text)
    else:
        return [str(check_address(literal))]
    addresses = await lookup(text, port)
    if not addresses:
        raise OSError(f"{host} did not resolve")
    for item in addresses:
        check_address(ipaddress.ip_address(item.split("%", 1)[0]), where=f"{host} resolves to ")
    return addresses
