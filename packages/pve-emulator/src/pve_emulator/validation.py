"""Parameter validation and return-type checking against the compiled schema, on plain data.

Nothing here knows about HTTP or the mock store, so real mode (a validating proxy) can use the same
checks on requests before forwarding and on responses after.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

from pve_emulator.errors import FieldError, ParameterError
from pve_emulator.schema import Operation

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_LIST_SPLIT = re.compile(r"[,;\s]+")
_INT = re.compile(r"^[+-]?[0-9]{1,30}$")  # ASCII: str.isdigit() and \d also take "²", "\u0663"
# Integers are 64-bit, as in Perl (Proxmox's language; beyond, it turns them into floats) and in what
# reads the API (Go, Rust, PostgreSQL bigint): a larger one is refused, not stored.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON can escape a lone surrogate; UTF-8 cannot carry it


def _ip(value: str, version: int | None = None) -> bool:
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        return False
    return version is None or addr.version == version


def _cidr(value: str, version: int | None = None) -> bool:
    if "/" not in value:
        return False
    try:
        net = ipaddress.ip_interface(value)
    except ValueError:
        return False
    return version is None or net.version == version


_NAME = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$")
_CONFIGID = re.compile(r"^[a-z][a-z0-9_\-]+$", re.I)
_STORAGEID = re.compile(r"^[a-z][a-z0-9\-_.]*[a-z0-9]$", re.I)
_USERID = re.compile(r"^[^\s:/]+@[A-Za-z][A-Za-z0-9.\-_]+$")
_DECIMAL = re.compile(r"[0-9]{1,30}")
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_DNS = re.compile(
    r"^(?=.{1,253}$)([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)*$"
)
_IFACE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_.\-]{0,20}$")
_TAG = re.compile(r"^[a-z0-9_][a-z0-9_\-+.]*$", re.I)


def decimal(value: object) -> int | None:
    """A non-negative int, or the one a string of ASCII digits spells; None otherwise (never raises)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return int(value.strip())
    return None


def _vmid(value: str) -> bool:
    vmid = decimal(value)
    return vmid is not None and 100 <= vmid <= 999_999_999


_DISK_SIZE = re.compile(r"([0-9]{1,30})(\.[0-9]{1,30})?([KMGT]?)")
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def size_in_bytes(text: str) -> int | None:
    """Bytes of a Proxmox size (``32G``, ``1.5T``, ``4096``: ASCII digits, optional fraction, optional K, M,
    G or T), or None if it is not one or does not fit in 64 bits (computed exactly: no float to overflow)."""
    m = _DISK_SIZE.fullmatch(text)
    if m is None:
        return None
    unit = _SIZE_UNITS[m.group(3)]
    fraction = m.group(2) or "."
    size = int(m.group(1)) * unit + int(fraction[1:] or 0) * unit // 10 ** (len(fraction) - 1)
    return size if size <= INT64_MAX else None


# Named string formats we check; unknown formats are accepted (the schema has over a hundred).
FORMAT_CHECKS: dict[str, Any] = {
    "pve-node": lambda v: bool(_NAME.match(v)),
    "pve-vmid": _vmid,
    "pve-configid": lambda v: bool(_CONFIGID.match(v)),
    "pve-storage-id": lambda v: bool(_STORAGEID.match(v)),
    "pve-poolid": lambda v: bool(re.match(r"^[A-Za-z0-9_\-/]+$", v)),
    "pve-userid": lambda v: bool(_USERID.match(v)),
    "pve-iface": lambda v: bool(_IFACE.match(v)),
    "pve-bridge-id": lambda v: bool(_IFACE.match(v)),
    "mac-addr": lambda v: bool(_MAC.match(v)),
    "ip": _ip,
    "ipv4": lambda v: _ip(v, 4),
    "ipv6": lambda v: _ip(v, 6),
    "address": _ip,
    "CIDR": _cidr,
    "CIDRv4": lambda v: _cidr(v, 4),
    "CIDRv6": lambda v: _cidr(v, 6),
    "IPorCIDR": lambda v: _ip(v) or _cidr(v),
    "dns-name": lambda v: bool(_DNS.match(v)),
    "pve-tag": lambda v: bool(_TAG.match(v)),
    "disk-size": lambda v: size_in_bytes(v) is not None,
}
# ``foo-list`` formats are lists of ``foo`` separated by commas, semicolons or spaces.
LIST_FORMATS = {
    "pve-vmid-list": "pve-vmid",
    "pve-node-list": "pve-node",
    "pve-tag-list": "pve-tag",
    "pve-storage-id-list": "pve-storage-id",
    "pve-iface-list": "pve-iface",
    "ip-list": "ip",
    "pve-configid-list": "pve-configid",
}


def _check_format(fmt: Any, value: str) -> str | None:
    """Return an error message if ``value`` does not match the named or property-string format."""
    if isinstance(fmt, dict):
        return _check_property_string(fmt, value)
    if not isinstance(fmt, str):
        return None
    if fmt in LIST_FORMATS:
        check = FORMAT_CHECKS[LIST_FORMATS[fmt]]
        for item in _LIST_SPLIT.split(value.strip()):
            if item and not check(item):
                return f"value '{item}' does not look like a valid {LIST_FORMATS[fmt]}"
        return None
    check = FORMAT_CHECKS.get(fmt)
    if check is not None and not check(value):
        return f"value does not match the format {fmt}"
    return None


def parse_property_string(value: str, fmt: dict[str, Any]) -> dict[str, str]:
    """Split ``key=value,...`` (with an optional leading default-key value) into a dict."""
    default_key = next((k for k, s in fmt.items() if isinstance(s, dict) and s.get("default_key")), None)
    out: dict[str, str] = {}
    for index, part in enumerate(p for p in value.split(",") if p != ""):
        key, sep, val = part.partition("=")
        if not sep:
            if index == 0 and default_key is not None:
                out[default_key] = part
                continue
            raise ValueError(f"missing '=' in '{part}'")
        spec = fmt.get(key)
        if isinstance(spec, dict) and "keyAlias" in spec:
            # ``virtio=BC:24:...`` means model=virtio, macaddr=BC:24:...
            out[spec["keyAlias"]] = key
            key = spec.get("alias", key)
        out[key] = val
    return out


def _check_property_string(fmt: dict[str, Any], value: str) -> str | None:
    try:
        parts = parse_property_string(value, fmt)
    except ValueError as exc:
        return f"format error: {exc}"
    for key, val in parts.items():
        spec = fmt.get(key)
        if spec is None:
            if any(isinstance(s, dict) and s.get("keyAlias") == key for s in fmt.values()):
                continue
            return f"format error: invalid key '{key}'"
        if "alias" in spec and "type" not in spec:
            spec = fmt.get(spec["alias"], {})
        error = _check_scalar(spec, val)
        if error:
            return f"format error: {key}: {error}"
    for key, spec in fmt.items():
        if (
            isinstance(spec, dict)
            and "type" in spec
            and not spec.get("optional")
            and key not in parts
            and "default" not in spec
        ):
            return f"format error: property '{key}' is missing"
    return None


def _check_scalar(spec: dict[str, Any], value: Any) -> str | None:
    """Check one string-encoded scalar against type and constraints (used inside property strings)."""
    try:
        coerce_value(spec, value)
    except ValueError as exc:
        return str(exc)
    return None


def coerce_value(spec: dict[str, Any], value: Any) -> Any:
    """Convert a wire value (form strings or JSON) to the schema type and check constraints."""
    kind = spec.get("type", "string")
    if kind == "boolean":
        if isinstance(value, bool):
            out: Any = int(value)
        elif isinstance(value, int) and value in (0, 1):
            out = value
        elif isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            out = 1 if value.lower() in _TRUE else 0
        else:
            raise ValueError(f"type check ('boolean') failed - got '{value}'")
    elif kind == "integer":
        if isinstance(value, bool):
            raise ValueError(f"type check ('integer') failed - got '{value}'")
        if isinstance(value, int):
            out = value
        elif (isinstance(value, str) and _INT.match(value.strip())) or (
            isinstance(value, float) and value.is_integer()
        ):
            out = int(value)
        else:
            raise ValueError(f"type check ('integer') failed - got '{value}'")
    elif kind == "number":
        if isinstance(value, bool):
            raise ValueError(f"type check ('number') failed - got '{value}'")
        try:
            out = float(value) if not isinstance(value, int) else value
        except (TypeError, ValueError):
            raise ValueError(f"type check ('number') failed - got '{value}'") from None
        if not math.isfinite(out):  # "nan" and "inf" parse, but JSON cannot carry them
            raise ValueError(f"type check ('number') failed - got '{value}'")
    elif kind == "string":
        if isinstance(value, (bool, dict, list)):
            raise ValueError(f"type check ('string') failed - got {type(value).__name__}")
        out = str(value)
    elif kind == "array":
        items = value if isinstance(value, list) else [value]
        item_spec = spec.get("items") or {"type": "string"}
        return [coerce_value(item_spec, item) for item in items]
    elif kind == "object":
        if not isinstance(value, dict):
            raise ValueError("type check ('object') failed")
        return value
    else:
        out = value
    if kind in ("integer", "number"):
        if "minimum" in spec and out < spec["minimum"]:
            raise ValueError(f"value must have a minimum value of {spec['minimum']}")
        if "maximum" in spec and out > spec["maximum"]:
            raise ValueError(f"value must have a maximum value of {spec['maximum']}")
    if kind == "integer" and not INT64_MIN <= out <= INT64_MAX:
        bound = ("minimum", INT64_MIN) if out < 0 else ("maximum", INT64_MAX)
        raise ValueError(f"value must have a {bound[0]} value of {bound[1]}")
    if "enum" in spec and str(out) not in {str(e) for e in spec["enum"]}:
        raise ValueError(
            f"value '{out}' does not have a value in the enumeration '{', '.join(map(str, spec['enum']))}'"
        )
    if kind == "string":
        if _SURROGATE.search(out):
            raise ValueError("value is not valid Unicode text (lone surrogate)")
        if "maxLength" in spec and len(out) > spec["maxLength"]:
            raise ValueError(f"value may only be {spec['maxLength']} characters long")
        if "minLength" in spec and len(out) < spec["minLength"]:
            raise ValueError(f"value must be at least {spec['minLength']} characters long")
        if "pattern" in spec and not _full_match(spec["pattern"], out):
            raise ValueError(f"value does not match the regex pattern {spec['pattern']}")
        if "format" in spec:
            error = _check_format(spec["format"], out)
            if error:
                raise ValueError(error)
    return out


_PATTERNS: dict[str, re.Pattern[str] | None] = {}
# Perl stringifies a compiled `qr/.../i` as `(?^i:...)`: "the default flags, then these". Python's `re` has
# no `^` there; a scoped group that sets the given flags and clears the others means the same.
_PERL_CARET_GROUP = re.compile(r"\(\?\^([a-z]*):")


# Fragments Python's backtracking engine takes exponential time on (Perl's engine caches its way through
# them), each with a form that matches the same strings in linear time. The OCI reference pattern joins
# name components with `(?:[._]|__|[-]*)`: the empty separator makes `[a-z\d]+(?:SEP[a-z\d]+)*` split a run
# of letters in every possible way before failing (`"x" * 30 + "!"` never returns). Two runs joined by
# nothing are one run, so the separator may as well be non-empty.
_LINEAR_FORMS = {"(?:[._]|__|[-]*)": "(?:[._]|__|-+)"}


def python_regex(pattern: str) -> str:
    """A schema ``pattern`` (a Perl regex) in the syntax of Python's ``re`` (and of ECMAScript 2025), in a
    form it matches in linear time."""

    def scoped(match: re.Match[str]) -> str:
        flags = "".join(f for f in "ims" if f in match.group(1))
        cleared = "".join(f for f in "ims" if f not in flags)
        return f"(?{flags}-{cleared}:" if cleared else f"(?{flags}:"

    for slow, linear in _LINEAR_FORMS.items():
        pattern = pattern.replace(slow, linear)
    return _PERL_CARET_GROUP.sub(scoped, pattern)


def compiled_pattern(pattern: str) -> re.Pattern[str] | None:
    """The schema pattern compiled for Python (cached), or None if it cannot be translated."""
    compiled = _PATTERNS.get(pattern, ...)
    if compiled is ...:
        try:
            compiled = re.compile(python_regex(pattern))
        except re.error:
            compiled = None  # a test keeps every pattern of the shipped schemas compilable
        _PATTERNS[pattern] = compiled
    return compiled


def _full_match(pattern: str, value: str) -> bool:
    """Proxmox anchors every pattern (``m/^$pattern$/``); so does this, without Perl's tolerance of a
    trailing newline, which no stored value should carry."""
    compiled = compiled_pattern(pattern)
    return compiled is None or compiled.fullmatch(value) is not None


def validate_params(op: Operation, raw: dict[str, Any]) -> dict[str, Any]:
    """Return the parameters converted to schema types, or raise ParameterError naming each field."""
    errors: list[FieldError] = []
    out: dict[str, Any] = {}
    for name, value in raw.items():
        spec = op.param_spec(name)
        if spec is None:
            if op.additional_params:
                out[name] = value
                continue
            errors.append(
                FieldError(
                    name,
                    "property is not defined in schema and the schema does not allow additional properties",
                )
            )
            continue
        if isinstance(value, list) and spec.get("type") != "array":
            if len(value) != 1:
                errors.append(FieldError(name, "property given more than once"))
                continue
            value = value[0]
        if value == "" and spec.get("type") != "string" and spec.get("optional"):
            continue  # PVE clients send empty optional values; treat them as absent
        try:
            out[name] = coerce_value(spec, value)
        except ValueError as exc:
            errors.append(FieldError(name, str(exc)))
    for name, spec in op.params.items():
        if name.endswith("[n]") or spec.get("optional") or name in out or name in raw:
            continue
        errors.append(FieldError(name, "property is missing and it is not optional"))
    if errors:
        raise ParameterError(errors)
    return out
