"""pve-firewall's judgement of one rule, port list, address list or protocol (``src/PVE/Firewall.pm``).

Kept apart from the API handlers (``mock/firewall.py``) because it is pure: strings in, an error naming
the field out, in Proxmox's words. ``verify_rule`` stops at the first fault as ``verify_rule`` does
without ``$noerr``; ``schema_errors`` collects every format fault at once, as the JSON schema check does
before the API code runs.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from pve_emulator.errors import ApiError, FieldError, bad_param
from pve_emulator.mock.firewall_tables import IPV6_MACROS, MACROS, PROTOCOLS, SERVICES

NAME_PATTERN = r"[A-Za-z][A-Za-z0-9\-\_]+"  # security groups, ipsets and aliases alike
MAX_IPSET_NAME = 64
MAX_ALIAS_NAME = 64
_NAME = re.compile(NAME_PATTERN)
_IFACE = re.compile(r"[a-z][a-z0-9_]{1,20}([:\.]\d+)?", re.IGNORECASE)
_ALIAS_REF = re.compile(rf"(dc/|guest/)?({NAME_PATTERN})")
_IPSET_REF = re.compile(rf"\+(guest/|dc/|sdn/)?({NAME_PATTERN})")

PROTOCOLS_WITH_PORTS = {"udp", "17", "udplite", "136", "tcp", "6", "dccp", "33", "sctp", "132"}
ICMP_TYPES = frozenset(
    [
        "any",
        "echo-reply",
        "destination-unreachable",
        "network-unreachable",
        "host-unreachable",
        "protocol-unreachable",
        "port-unreachable",
        "fragmentation-needed",
        "source-route-failed",
        "network-unknown",
        "host-unknown",
        "network-prohibited",
        "host-prohibited",
        "TOS-network-unreachable",
        "TOS-host-unreachable",
        "communication-prohibited",
        "host-precedence-violation",
        "precedence-cutoff",
        "source-quench",
        "redirect",
        "network-redirect",
        "host-redirect",
        "TOS-network-redirect",
        "TOS-host-redirect",
        "echo-request",
        "router-advertisement",
        "router-solicitation",
        "time-exceeded",
        "ttl-zero-during-transit",
        "ttl-zero-during-reassembly",
        "parameter-problem",
        "ip-header-bad",
        "required-option-missing",
        "timestamp-request",
        "timestamp-reply",
        "address-mask-request",
        "address-mask-reply",
    ]
)
ICMPV6_TYPES = frozenset(
    [
        "destination-unreachable",
        "no-route",
        "communication-prohibited",
        "beyond-scope",
        "address-unreachable",
        "port-unreachable",
        "failed-policy",
        "reject-route",
        "packet-too-big",
        "time-exceeded",
        "ttl-zero-during-transit",
        "ttl-zero-during-reassembly",
        "parameter-problem",
        "bad-header",
        "unknown-header-type",
        "unknown-option",
        "echo-request",
        "echo-reply",
        "router-solicitation",
        "router-advertisement",
        "neighbor-solicitation",
        "neighbour-solicitation",
        "neighbor-advertisement",
        "neighbour-advertisement",
        "redirect",
    ]
)
#: rule types allowed per rule environment (``$rule_env_direction_lookup``); the iface flag beside it
DIRECTIONS = {
    "ct": ("in", "out", "group"),
    "vm": ("in", "out", "group"),
    "group": ("in", "out", "forward"),
    "cluster": ("in", "out", "forward", "group"),
    "host": ("in", "out", "forward", "group"),
}
IFACE_ALLOWED = {"ct": True, "vm": True, "group": False, "cluster": True, "host": True}
#: the rule properties of ``$rule_properties`` (what ``copy_rule_data`` copies and ``delete`` may name)
RULE_PROPERTIES = [
    "pos",
    "digest",
    "type",
    "action",
    "macro",
    "iface",
    "source",
    "dest",
    "proto",
    "enable",
    "log",
    "sport",
    "dport",
    "comment",
    "icmp-type",
]
MIXED = "detected mixed ipv4/ipv6 addresses in rule"


def _macro_tables() -> tuple[dict[str, list[dict[str, Any]]], dict[str, str], dict[str, int], dict[str, str]]:
    """``init_firewall_macros``: templates, descriptions, required IP version, preferred spelling."""
    templates: dict[str, list[dict[str, Any]]] = {}
    descr: dict[str, str] = {}
    version: dict[str, int] = {}
    for table, only6 in ((MACROS, False), (IPV6_MACROS, True)):
        for name, (flags, rules) in table.items():
            if only6 and name in templates:
                continue
            version[name] = 6 if only6 else 0
            for flag in flags:
                if flag == "ipv4only":
                    version[name] = 4
                elif flag == "ipv6only":
                    version[name] = 6
                else:
                    descr[name] = flag
            templates[name] = rules
    return templates, descr, version, {name.lower(): name for name in templates}


MACRO_RULES, MACRO_DESCR, MACRO_IPVERSION, PREFERRED_MACRO = _macro_tables()


class _Mixed(Exception):
    """``$set_ip_version`` found IPv4 and IPv6 in one rule."""


@dataclass(slots=True)
class FwConf:
    """What a rule may reference from one firewall config file: its aliases (by lower-case name) and ipsets."""

    aliases: dict[str, dict[str, Any]] = field(default_factory=dict)
    ipsets: set[str] = field(default_factory=set)


def _perl_split(text: str) -> list[str]:
    """Perl's ``split(/,/, $str)``: trailing empty fields dropped."""
    parts = text.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _bits(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return format(int(address), f"0{address.max_prefixlen}b")


def _net_ip(elem: str) -> int:
    """``Net::IP->new($elem)`` for an address, a prefix or a range: the IP version, or ValueError with
    Net::IP's error."""
    if "-" in elem:
        first, _, last = (p.strip() for p in elem.partition("-"))
        try:
            begin, end = ipaddress.ip_address(first), ipaddress.ip_address(last)
        except ValueError:
            raise ValueError(f"Cannot determine IP version for {elem}") from None
        if begin.version != end.version:
            raise ValueError(f"Begin and End addresses have different IP versions - {first} - {last}")
        if int(begin) > int(end):
            raise ValueError(f"Begin address is greater than End address {first} - {last}")
        return begin.version
    address, _, length = elem.partition("/")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"Cannot determine IP version for {elem}") from None
    if length:
        if not length.isdigit() or int(length) > ip.max_prefixlen:
            raise ValueError(f"Invalid prefix length /{length}")
        if _bits(ip)[int(length) :].strip("0"):
            raise ValueError(f"Invalid prefix {_bits(ip)}/{length}")
    return ip.version


def parse_address_list(text: str) -> int | None:
    """``parse_address_list``: the list's IP version (None for an alias or ipset reference)."""
    if re.fullmatch(r"\+\S+", text):
        if len(text) > MAX_IPSET_NAME + 1:
            raise ValueError("ipset name too long")
        return None
    if _ALIAS_REF.fullmatch(text):
        if len(text) > MAX_ALIAS_NAME:
            raise ValueError("alias name too long")
        return None
    elements = _perl_split(text)
    if ",".join(elements) != text:
        raise ValueError("extraneous commas in list")
    version: int | None = None
    has_range = False
    for elem in elements:
        try:
            found = _net_ip(elem)
        except ValueError as exc:
            raise ValueError(f"invalid IP address: {exc}") from None
        has_range = has_range or "-" in elem
        if version and found != version:
            raise ValueError(f"detected mixed ipv4/ipv6 addresses in address list '{text}'")
        version = found
    if has_range and len(elements) > 1:
        raise ValueError("you can't use a range in a list")
    return version


def parse_ports(text: str, dport: bool) -> None:
    """``parse_port_name_number_or_range``: numbers, ``a:b`` ranges and /etc/services names, at most 15
    numbers; ICMP type names (stored in ``dport`` by old rules) only alone."""
    count = 0
    icmp = False
    elements = _perl_split(text)
    if ",".join(elements) != text:
        raise ValueError("extraneous commas in list")
    for item in elements:
        if m := re.fullmatch(r"([0-9]+):([0-9]+)", item):
            count += 2
            first, last = int(m.group(1)), int(m.group(2))
            for port in (m.group(1), m.group(2)):
                if int(port) > 65535:
                    raise ValueError(f"invalid port '{port}'")
            if first > last:
                raise ValueError(
                    f"backwards range '{m.group(1)}:{m.group(2)}' not allowed, "
                    f"did you mean '{m.group(2)}:{m.group(1)}'?"
                )
        elif re.fullmatch(r"[0-9]+", item):
            count += 1
            if int(item) > 65535:
                raise ValueError(f"invalid port '{item}'")
        elif dport and (item in ICMP_TYPES or item in ICMPV6_TYPES):
            icmp = True
        elif item not in SERVICES:
            raise ValueError(f"invalid port '{item}'")
    if icmp and count > 0:
        raise ValueError("ICMP ports not allowed in port range")
    if count > 15:
        raise ValueError("too many entries in port list (> 15 numbers)")


def known_protocol(proto: str) -> bool:
    return proto in PROTOCOLS or proto == "icmpv6" or proto in {str(n) for n in PROTOCOLS.values()}


def _protocol_spec(proto: str) -> None:
    if proto and not known_protocol(proto):
        raise ValueError(f"unknown protocol '{proto}'")


def _icmp_type_spec(value: str) -> None:
    if value not in ICMP_TYPES and value not in ICMPV6_TYPES and value != "":
        raise ValueError(f"invalid icmp-type value '{value}'")


_FORMATS = {
    "source": parse_address_list,
    "dest": parse_address_list,
    "proto": _protocol_spec,
    "sport": lambda v: parse_ports(v, False),
    "dport": lambda v: parse_ports(v, True),
    "icmp-type": _icmp_type_spec,
}


def schema_errors(params: dict[str, Any]) -> list[FieldError]:
    """The ``pve-fw-*`` formats of the rule parameters, all of them, as the JSON schema check reports them."""
    errors = []
    for name, check in _FORMATS.items():
        if name in params:
            try:
                check(str(params[name]))
            except ValueError as exc:
                errors.append(FieldError(name, f"invalid format - {exc}"))
    return errors


def parse_ip_or_cidr(cidr: str) -> tuple[str, int]:
    """``parse_ip_or_cidr``: the address as the config parser keeps it (no /32 or /128) and its version."""
    address, _, length = cidr.partition("/")
    try:
        version = ipaddress.ip_address(address).version
    except ValueError:
        raise ValueError("value does not look like a valid IP address or CIDR network") from None
    if length and not length.isdigit():
        raise ValueError("value does not look like a valid IP address or CIDR network")
    if (version == 4 and length == "32") or (version == 6 and length == "128"):
        return address, version
    return cidr, version


def verify_rule(rule: dict[str, Any], env: str, cluster: FwConf | None, local: FwConf | None) -> None:
    """``verify_rule``: refuse the first fault (400 naming the field, or Proxmox's 500 for a mix of IP
    versions outside an address list); on success set ``ipversion`` and the macro's preferred spelling."""
    ipversion: int | None = None

    def set_version(found: int | None) -> None:
        nonlocal ipversion
        if found:
            if ipversion and found != ipversion:
                raise _Mixed
            ipversion = found

    def plain(found: int | None) -> None:
        try:
            set_version(found)
        except _Mixed:
            raise ApiError(500, MIXED) from None

    kind, action = rule.get("type"), rule.get("action")
    if not kind:
        raise bad_param("type", "missing property")
    if not action:
        raise bad_param("action", "missing property")
    if kind not in DIRECTIONS[env]:
        raise bad_param("type", f"invalid rule type '{kind}' for rule_env '{env}'")
    if kind in ("in", "out", "forward"):
        if kind == "forward" and action == "REJECT":
            raise bad_param("action", "cannot define REJECT rules on forward chain")
        if action not in ("ACCEPT", "DROP", "REJECT"):
            raise bad_param("action", f"unknown action '{action}'")
    elif not _NAME.fullmatch(str(action)):
        raise bad_param("action", "invalid characters in security group name")

    if iface := rule.get("iface"):
        if not IFACE_ALLOWED[env]:
            raise bad_param("type", "parameter -i not allowed for this rule type")
        if not _IFACE.fullmatch(iface):
            raise bad_param("iface", f"invalid network interface name '{iface}'")
        if env in ("vm", "ct") and not re.fullmatch(r"net\d+", iface):
            raise bad_param("iface", "value does not match the regex pattern 'net\\d+'")

    if macro := rule.get("macro"):
        if str(macro).lower() not in PREFERRED_MACRO:
            raise bad_param("macro", f"unknown macro '{macro}'")
        rule["macro"] = PREFERRED_MACRO[str(macro).lower()]

    proto = rule.get("proto")
    is_icmp = False
    if proto:
        if not known_protocol(proto):
            raise bad_param("proto", f"unknown protocol '{proto}'")
        plain({"icmp": 4, "icmpv6": 6, "ipv6-icmp": 6}.get(proto))
        is_icmp = proto in ("icmp", "icmpv6", "ipv6-icmp")

    if dport := rule.get("dport"):
        _field_check("dport", lambda: parse_ports(str(dport), is_icmp))
        if not proto:
            raise bad_param("proto", "missing property - 'dport' requires this property")
        if proto not in PROTOCOLS_WITH_PORTS and not is_icmp:
            raise bad_param("dport", f"protocol '{proto}' does not support ports")

    if icmp_type := rule.get("icmp-type"):
        if not is_icmp:
            raise bad_param("proto", "missing property - 'icmp-type' requires this property")
        if dport:
            raise bad_param("icmp-type", "'icmp-type' cannot be specified together with 'dport'")
        if proto == "icmp" and icmp_type not in ICMP_TYPES:
            raise bad_param("icmp-type", f"invalid icmp-type '{icmp_type}' for proto 'icmp'")
        if proto in ("icmpv6", "ipv6-icmp") and icmp_type not in ICMPV6_TYPES:
            raise bad_param("icmp-type", f"invalid icmp-type '{icmp_type}' for proto '{proto}'")

    if sport := rule.get("sport"):
        _field_check("sport", lambda: parse_ports(str(sport), False))
        if not proto:
            raise bad_param("proto", "missing property - 'sport' requires this property")
        if proto not in PROTOCOLS_WITH_PORTS:
            raise bad_param("sport", f"protocol '{proto}' does not support ports")

    for name in ("source", "dest"):
        value = rule.get(name)
        if not value:
            continue
        try:
            set_version(parse_address_list(str(value)))
        except _Mixed:
            raise bad_param(name, MIXED) from None
        except ValueError as exc:
            raise bad_param(name, str(exc)) from None
        _check_reference(name, str(value), cluster, local, plain)

    if ipversion:
        rule["ipversion"] = ipversion
    else:
        rule.pop("ipversion", None)  # what the config parser finds when the file is read again
    if rule.get("macro"):
        apply_macro(rule, ipversion)


def _field_check(name: str, check: Any) -> None:
    try:
        check()
    except ValueError as exc:
        raise bad_param(name, str(exc)) from None


def _check_reference(name: str, value: str, cluster: FwConf | None, local: FwConf | None, plain: Any) -> None:
    """``$check_ipset_or_alias_property``: an ipset or alias a rule names must exist (in the cluster's
    config or the rule's own); an alias also brings its IP version."""
    if value.startswith("+"):
        m = _IPSET_REF.fullmatch(value)
        if m is None:
            raise bad_param(name, f"invalid ipset name '{value}'")
        if not (cluster and m.group(2) in cluster.ipsets) and not (local and m.group(2) in local.ipsets):
            raise bad_param(name, f"no such ipset '{m.group(2)}'")
        return
    m = _ALIAS_REF.fullmatch(value)
    if m is None:
        return
    scope, alias = m.group(1) or "", m.group(2).lower()
    if not (cluster and alias in cluster.aliases) and not (local and alias in local.aliases):
        raise bad_param(name, f"no such alias '{value}'")
    entry = local.aliases.get(alias) if scope != "dc/" and local else None
    if scope != "guest/" and not entry and cluster:
        entry = cluster.aliases.get(alias)
    plain((entry or {}).get("ipversion"))


def apply_macro(rule: dict[str, Any], ipversion: int | None) -> None:
    """``$apply_macro`` with ``$verify``: every template needs its PARAM values, and a rule value the
    macro already fixes must agree with it."""
    name = rule["macro"]
    templates = MACRO_RULES[name]
    if ipversion == 6 and name in IPV6_MACROS:
        templates = IPV6_MACROS[name][1]
    required = MACRO_IPVERSION.get(name)
    if ipversion and required and ipversion != required:
        return
    for template in templates:
        expanded: dict[str, Any] = {}
        used: set[str] = set()
        for key, value in template.items():
            if value == "PARAM":
                value, _ = rule.get(key), used.add(key)
            elif value in ("DEST", "SOURCE"):
                other = value.lower()
                value, _ = rule.get(other), used.add(other)
            if value is None:
                raise bad_param("macro", f"missing parameter '{key}' in macro '{name}'")
            expanded[key] = value
        for key in sorted(rule):
            if key == "macro" or rule[key] is None or key in used or key not in expanded:
                continue
            if str(expanded[key]) != str(rule[key]):
                raise bad_param(key, f"parameter '{key}' already define in macro (value = '{expanded[key]}')")
