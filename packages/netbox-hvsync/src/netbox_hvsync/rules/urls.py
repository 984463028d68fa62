"""Canonical backend targets and resolved hosts (SPEC 5.2.5, 4.5 identity rules).

The target URL or IP is canonicalized before the first request: authority injection and userinfo,
path, query or fragment syntax are rejected; DNS names and IP values are validated; IPv6 literals
are bracketed. The same host normalisation serves the identity rules, so "same target" means one
thing everywhere.

Server-side request forgery (issue 39): an address the backend or the plugin dials is never link-local
(169.254.0.0/16, fe80::/10: the cloud metadata services live there), unspecified (0.0.0.0, ::),
multicast, an IPv6 form that embeds an IPv4 address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible
::a.b.c.d, NAT64 and 6to4 forms embedding a refused one) or a known metadata address (fd00:ec2::254,
100.100.100.200, metadata.google.internal); a "domain" that a resolver reads as a number (2130706433,
127.1, 0x7f.1, 017700000001) is refused as a name. Loopback stays allowed: the inventory endpoint's
pushed IP is the loopback substitute when no IP is linked (SPEC 2.3), and a backend or Proxmox endpoint
on the NetBox host itself is a supported set-up (docs/plugin.md, "Addresses the plugin refuses").
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..wire.numbers import decimal

SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
#: A label a resolver reads as a number (inet_aton: decimal, octal with a leading 0, hex with 0x).
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
#: Cloud instance-metadata services outside the link-local ranges (AWS IPv6 IMDS, Alibaba Cloud).
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")}
)
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_FORBIDDEN_CHARS = re.compile(r"[\s\\@%#?/\x00-\x1f\x7f]")


class TargetError(ValueError):
    """A target that must not be dialled; `field` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class CanonicalTarget:
    """A validated backend address: scheme, host (IPv6 unbracketed), port."""

    scheme: str
    host: str
    port: int

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if self.is_ipv6 else self.host
        return f"{host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.authority}"


def parse_port(value: object, field: str = "port") -> int:
    """A TCP port from an int or a string of digits; bools and out-of-range values are refused."""
    port = decimal(value, low=1, high=65535)
    if port is None:
        raise TargetError(field, "must be an integer between 1 and 65535")
    return port


def port_or_none(value: object) -> int | None:
    try:
        return parse_port(value)
    except TargetError:
        return None


def canonical_ip(value: str) -> str | None:
    """Canonical text of an IP literal (prefix length dropped, IPv6 compressed), or None."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if "/" in text:
        text = text.split("/", 1)[0]
    if "%" in text:  # zone ids are link-local to one machine, never a backend identity
        return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def forbidden_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address must never be dialled (server-side request forgery), or None; loopback is allowed."""
    if address.is_unspecified:
        return "is the unspecified address (0.0.0.0 or ::)"
    if address.is_link_local:
        return "is a link-local address (169.254.0.0/16, fe80::/10), where cloud metadata services live"
    if address.is_multicast:
        return "is a multicast address"
    if address in METADATA_ADDRESSES:
        return "is a cloud metadata service address"
    if isinstance(address, ipaddress.IPv4Address):
        if address == ipaddress.IPv4Address("255.255.255.255"):
            return "is the broadcast address"
        return None
    if address.ipv4_mapped is not None:
        return "is an IPv4-mapped IPv6 address; give the IPv4 address itself"
    if address in _IPV4_COMPATIBLE and not address.is_loopback:
        return "is an IPv4-compatible IPv6 address; give the IPv4 address itself"
    embedded = address.sixtofour
    if embedded is None and address in _NAT64:
        embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if embedded is not None and forbidden_address(embedded) is not None:
        return "embeds a refused IPv4 address (6to4 or NAT64)"
    return None


def forbidden_host(host: str) -> str | None:
    """Why a canonical host (an IP literal or a DNS name) must never be dialled, or None."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "is a cloud metadata service name" if host in METADATA_NAMES else None
    return forbidden_address(address)


def numeric_name(name: str) -> bool:
    """Whether a resolver would read this name as a number (`2130706433`, `127.1`, `0x7f.1`, `0177.1`)."""
    labels = name.lower().rstrip(".").split(".")
    return all(_NUMERIC_LABEL.match(label) for label in labels) or labels[-1].isdigit()


def check_endpoint_host(value: str | None, field: str) -> str | None:
    """An endpoint's domain or IP address as the backend will dial it: its canonical form, None when blank.

    Raises TargetError naming `field` for a value that is neither a valid DNS name nor an IP address, a
    numeric "domain", or a refused address (`forbidden_host`). The message never echoes the value."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    host = canonical_ip(text)
    if host is None:
        if numeric_name(text):
            raise TargetError(
                field, "is neither a valid DNS name nor an IP address: a numeric host must be dotted IPv4"
            )
        host = canonical_dns_name(text)
    if host is None:
        raise TargetError(field, "is neither a valid DNS name nor an IP address")
    reason = forbidden_host(host)
    if reason is not None:
        raise TargetError(field, reason)
    return host


def canonical_dns_name(value: str) -> str | None:
    """Lower-cased DNS name without trailing dot, or None when it is not a valid hostname."""
    name = value.strip().lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > 253:
        return None
    labels = name.split(".")
    if not all(_LABEL.match(label) for label in labels):
        return None
    if labels[
        -1
    ].isdigit():  # (labels are [a-z0-9-] already) "10.0.0.300", "010.1.1.1": numeric, but not a valid IP
        return None
    return name


def canonical_host(value: str | None) -> str | None:
    """An IP literal or a DNS name in canonical form; None for blank or invalid input."""
    if value is None or not str(value).strip():
        return None
    text = str(value)
    return canonical_ip(text) or canonical_dns_name(text)


def resolve_host(domain: str | None, ip_address: str | None) -> str | None:
    """SPEC 4.5 identity: the resolved host is the domain, else the IP address."""
    if domain is not None and str(domain).strip():
        return canonical_host(domain)
    return canonical_host(ip_address)


def resolve_target(domain: str | None, ip_address: str | None, port: object) -> tuple[str, int] | None:
    """(host, port) when both resolve, None otherwise (identity fails closed on None)."""
    host = resolve_host(domain, ip_address)
    parsed_port = port_or_none(port)
    if host is None or parsed_port is None:
        return None
    return host, parsed_port


def canonicalize_target(
    value: str, port: object | None = None, *, field: str = "url", default_scheme: str = "https"
) -> CanonicalTarget:
    """Validate a backend URL or IP before any request is made (SPEC 5.2.5).

    Accepts `https://host:8800`, `host`, `10.0.0.5`, `fd00::5`, `[fd00::5]:8800`; refuses userinfo,
    paths other than `/`, queries, fragments, backslashes, percent-escapes, whitespace and control
    characters. A port in the URL must agree with the separate `port` value when both are given.
    """
    if not isinstance(value, str) or not value.strip():
        raise TargetError(field, "a backend URL or IP address is required")
    text = value.strip(" ")
    if not value.isprintable() or " " in text or "\\" in text:  # isprintable: no controls, U+2028, U+200B...
        raise TargetError(field, "must not contain whitespace, control characters or backslashes")

    bare_ip = canonical_ip(text) if "/" not in text else None
    if bare_ip is not None:
        _refuse_forbidden(bare_ip, field)
        return _with_port(default_scheme, bare_ip, None, port, field)

    candidate = text if "://" in text else f"{default_scheme}://{text}"
    scheme_part, _, rest = candidate.partition("://")
    scheme = scheme_part.lower()
    if scheme not in SCHEMES:
        raise TargetError(field, f"scheme must be http or https, not {scheme_part!r}")
    authority, sep, tail = _split_authority(rest)
    if "@" in authority:
        raise TargetError(field, "must not contain user information (user@ or user:password@)")
    if sep == "/" and tail not in ("",):
        raise TargetError(field, "must not contain a path")
    if sep in ("?", "#"):
        raise TargetError(field, "must not contain a query or fragment")
    if "%" in authority:
        raise TargetError(field, "must not contain percent-escapes or IPv6 zone identifiers")

    if authority.count(":") > 1 and not authority.startswith("["):
        raise TargetError(field, "IPv6 addresses must be bracketed in a URL")
    # after the host: nothing, or ":" and a port ("[fd00::1]x" and "host:" are not addresses)
    after_host = authority.partition("]")[2] if authority.startswith("[") else authority.partition(":")[1]
    if authority.startswith("[") and after_host and not after_host.startswith(":"):
        raise TargetError(field, "has text after the bracketed IPv6 address")
    if authority.endswith(":"):
        raise TargetError(field, "has an empty port after ':'")
    try:
        parts = urlsplit(f"{scheme}://{authority}")
        url_port = parts.port
        hostname = parts.hostname
    except ValueError as exc:
        raise TargetError(field, f"is not a valid URL authority ({exc})") from None
    if not hostname:
        raise TargetError(field, "has no host")
    if authority.startswith("[") != (":" in hostname):
        raise TargetError(field, "IPv6 addresses must be bracketed in a URL")
    host = canonical_ip(hostname) if ":" in hostname or hostname[-1:].isdigit() else None
    if host is None and numeric_name(hostname):
        raise TargetError(
            field, "is neither a valid DNS name nor an IP address: a numeric host must be dotted IPv4"
        )
    if host is None:
        host = canonical_dns_name(hostname)
    if host is None:
        raise TargetError(field, f"{hostname!r} is neither a valid DNS name nor an IP address")
    _refuse_forbidden(host, field)
    return _with_port(scheme, host, url_port, port, field)


def _refuse_forbidden(host: str, field: str) -> None:
    reason = forbidden_host(host)
    if reason is not None:
        raise TargetError(field, f"host {reason}")


def backend_url_target(url: str, port: object | None) -> CanonicalTarget:
    """The target of a backend URL: a port written in the URL wins over the record's separate `port`.
    Raises TargetError naming `url` (or `port`) for anything `canonicalize_target` refuses."""
    return canonicalize_target(url, None if url_names_port(url) else port, field="url")


def url_names_port(url: str) -> bool:
    """Whether the URL's authority carries a `:port` (well-formed or not); never raises."""
    if not url.strip().startswith("[") and canonical_ip(url) is not None:
        return False  # a bare IP literal: the colons of "fd00::5" are not a port
    rest = url.strip().partition("://")[2] if "://" in url else url.strip()
    authority = _split_authority(rest)[0]
    if authority.startswith("["):
        return ":" in authority.partition("]")[2]
    return ":" in authority


def _split_authority(rest: str) -> tuple[str, str, str]:
    """Split `authority[/?#]tail`, returning the first delimiter found."""
    match = re.search(r"[/?#]", rest)
    if not match:
        return rest, "", ""
    index = match.start()
    return rest[:index], rest[index], rest[index + 1 :]


def _with_port(
    scheme: str, host: str, url_port: int | None, port: object | None, field: str
) -> CanonicalTarget:
    given = None if port is None or port == "" else parse_port(port)
    if url_port is not None:
        url_port = parse_port(url_port, field)
    if url_port is not None and given is not None and url_port != given:
        raise TargetError("port", f"{given} disagrees with the port {url_port} in the {field}")
    final = url_port if url_port is not None else given
    if final is None:
        final = DEFAULT_PORTS[scheme]
    return CanonicalTarget(scheme=scheme, host=host, port=final)
