"""Redaction both products apply before a detail is logged, stored or answered (SPEC 7.3, DESIGN 7).

- values under credential-like keys become `[redacted]`; keys are normalised for case, hyphen,
  underscore and space, so `X-Service-API-Key`, `api_key` and `API KEY` are one key; a key whose last
  word (after `_`, `-`, `.`, a space or a camelCase step) is `secret`, `password`, `passwd`, `token` or
  `key` is one too (`db_password`, `client_secret`, `session_token`, `ssh_key`, `clientSecret`), except
  the public identities listed in `public_keys` (`hvsync_key`);
- in a 422 body, `input` and `input_value` are redacted when the sibling `loc` names a credential field;
- credential-looking text inside strings (messages, transport-error text) is swept, `name=value` and
  `name: value` for every credential-like name above included, and known secrets
  (at least `MIN_KNOWN_SECRET_LENGTH` characters) are removed wherever they appear;
- nesting deeper than the limit yields `[redacted: nesting depth limit]` instead of recursing.

The key list, suffixes, sweep keywords and limits are data in `wire.json` (`redaction`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import DATA

__all__ = [
    "CREDENTIAL_KEYS",
    "CREDENTIAL_LAST_WORDS",
    "CREDENTIAL_SUFFIXES",
    "DEPTH_LIMIT",
    "DEPTH_REDACTED",
    "MIN_KNOWN_SECRET_LENGTH",
    "PUBLIC_KEYS",
    "REDACTED",
    "is_credential_key",
    "normalise_key",
    "redact",
    "sweep_text",
]

_SPEC = DATA["redaction"]
REDACTED: str = _SPEC["placeholder"]
DEPTH_REDACTED: str = _SPEC["depth_placeholder"]
DEPTH_LIMIT: int = int(_SPEC["depth_limit"])
#: Known values shorter than this are not swept by exact match: a one-letter v2 token key (a public
#: identifier) would otherwise turn every "k" of every message into "[redacted]". Credential-like keys
#: and patterns are still redacted whatever their length.
MIN_KNOWN_SECRET_LENGTH: int = int(_SPEC["min_known_secret_length"])
#: Normalised keys whose values are always secrets.
CREDENTIAL_KEYS: frozenset[str] = frozenset(_SPEC["credential_keys"])
#: Normalised key endings that mark a secret (`db_password`, `client-secret`, `X-Service-API-Key`).
CREDENTIAL_SUFFIXES: tuple[str, ...] = tuple(_SPEC["credential_suffixes"])

#: Last words of a key that mark a secret when a separator or a camelCase step comes before them
#: (`db_password`, `client-secret`, `session_token`, `ssh.key`, `clientSecret`; not `monkey`).
CREDENTIAL_LAST_WORDS: tuple[str, ...] = tuple(_SPEC["credential_last_words"])
#: Normalised keys that end like a credential but name a public identity (`hvsync_key`): kept.
PUBLIC_KEYS: frozenset[str] = frozenset(_SPEC["public_keys"])

_NORMALISE = re.compile(r"[\s_\-]+")
_WORDS = "|".join(CREDENTIAL_LAST_WORDS)
_CAMEL_WORDS = "|".join(w.capitalize() for w in CREDENTIAL_LAST_WORDS)


def _last_word(separators: str) -> str:
    """A name whose last word is a credential word after a separator or a camelCase step."""
    return (
        r"[A-Za-z0-9]+(?:[" + separators + r"][A-Za-z0-9]+)*?[" + separators + r"](?i:" + _WORDS + r")"
        r"|[A-Za-z0-9]*[a-z0-9](?:" + _CAMEL_WORDS + r")"
    )


#: Keys may separate words with spaces too (`API KEY`); names in text may not (a sentence would match).
_LAST_WORD_KEY = re.compile(r"(?:" + _last_word(r"_\-. ") + r")")


def normalise_key(key: object) -> str:
    """Fold case, hyphens, underscores and spaces: `X-Service_API Key` -> `xserviceapikey`."""
    return _NORMALISE.sub("", str(key)).lower()


def is_credential_key(key: object) -> bool:
    text = str(key)
    norm = normalise_key(text)
    if norm in PUBLIC_KEYS:
        return False
    return (
        norm in CREDENTIAL_KEYS
        or norm.endswith(CREDENTIAL_SUFFIXES)
        or _LAST_WORD_KEY.fullmatch(text.strip()) is not None
    )


_KEYWORDS = "(?i:" + "|".join(_SPEC["sweep_keywords"]) + ")"
#: Names swept in text: any name ending in a credential word (`db_password`), and the sweep keywords.
_NAMES = "(?:" + _last_word(r"_\-.") + "|" + _KEYWORDS + ")"


def _public(name: str) -> bool:
    return normalise_key(name) in PUBLIC_KEYS


_SWEEPS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # URL userinfo: scheme://user:pass@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1" + REDACTED + "@"),
    # Authorization header values: Token x / Bearer x / Basic x / PVEAPIToken=...
    (
        re.compile(
            r"(?i)\b(authorization\s*[:=]\s*)(?:\"|')?(?:token|bearer|basic|pveapitoken)?[\s=]*[^\s\"',;]+"
        ),
        r"\1" + REDACTED,
    ),
    # "Bearer <secret>" / "Token <secret>": only secret-shaped words (a digit, 12+ characters)
    (
        re.compile(r"(?i)\b(bearer|token)\s+(?=[A-Za-z_\-.~+/=]*\d)[A-Za-z0-9_\-.~+/=]{12,}"),
        r"\1 " + REDACTED,
    ),
    (re.compile(r"(?i)\bPVEAPIToken=[^\s\"',;]+"), "PVEAPIToken=" + REDACTED),
    (re.compile(r"\bnbt_[A-Za-z0-9]+\.[A-Za-z0-9]+"), "nbt_" + REDACTED),
    # JSON-ish "password": "value" inside free text
    (
        re.compile(r"([\"'](" + _NAMES + r")[\"']\s*:\s*)([\"'])(?:(?!\3).)*\3"),
        lambda m: m.group(0) if _public(m.group(2)) else m.group(1) + m.group(3) + REDACTED + m.group(3),
    ),
    # key=value, key: value (query strings, headers, log text)
    (
        re.compile(r"(?<![A-Za-z0-9])(" + _NAMES + r")(\s*[=:]\s*)(?![\"'\s]|\[redacted)[^\s&,;\"')\]}<>]+"),
        lambda m: m.group(0) if _public(m.group(1)) else m.group(1) + m.group(2) + REDACTED,
    ),
)

#: Cheap pre-check: a string without any of these fragments cannot match a sweep pattern.
_TRIGGER = re.compile(r"(?i)token|pass|secret|key|auth|bearer|ticket|csrf|cookie|://|nbt_")


def sweep_text(text: str, known_secrets: Iterable[str] = ()) -> str:
    """Remove credential-looking text from a message; exact known secrets are removed first."""
    out = text
    wanted = {s for s in known_secrets if s and len(s) >= MIN_KNOWN_SECRET_LENGTH}
    for secret in sorted(wanted, key=len, reverse=True):
        out = out.replace(secret, REDACTED)
    if not _TRIGGER.search(out):
        return out
    for pattern, replacement in _SWEEPS:
        out = pattern.sub(replacement, out)
    return out


def _loc_names_credential(loc: object) -> bool:
    if isinstance(loc, list | tuple):
        return any(isinstance(part, str) and is_credential_key(part) for part in loc)
    return isinstance(loc, str) and is_credential_key(loc)


def redact(value: Any, known_secrets: Iterable[str] = (), *, depth_limit: int = DEPTH_LIMIT) -> Any:
    """Return a redacted deep copy of a detail (dicts, lists, strings, scalars)."""
    secrets = tuple(s for s in known_secrets if s)
    return _redact(value, secrets, 0, depth_limit)


def _redact(value: Any, secrets: tuple[str, ...], depth: int, limit: int) -> Any:
    if depth > limit:
        return DEPTH_REDACTED
    if isinstance(value, str):
        return sweep_text(value, secrets)
    if isinstance(value, Mapping):
        credential_loc = _loc_names_credential(value.get("loc")) if "loc" in value else False
        out: dict[str, Any] = {}
        for key, item in value.items():
            skey = str(key)
            if is_credential_key(skey) or (credential_loc and skey in ("input", "input_value")):
                out[skey] = REDACTED
            else:
                out[skey] = _redact(item, secrets, depth + 1, limit)
        return out
    if isinstance(value, list | tuple):
        return [_redact(item, secrets, depth + 1, limit) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return sweep_text(str(value), secrets)
