"""Whole numbers written as text: query strings, form fields, Proxmox config values.

`str.isdigit()` is true for "²" and "①", which `int()` refuses (a 500 wherever it was trusted), and
`int()` takes Arabic-Indic and full-width digits and refuses more than 4,300 of them. Both products read
numbers through `decimal`: ASCII digits only, a bounded length, an optional range; anything else is None,
which the caller turns into a 4xx naming its field, or skips as Proxmox data it cannot use.
"""

from __future__ import annotations

import re

__all__ = ["decimal"]

#: 30 digits: more than any id, size or count either product stores, far below int()'s own limit.
_ASCII_DIGITS = re.compile(r"[0-9]{1,30}")


def decimal(value: object, *, low: int | None = None, high: int | None = None) -> int | None:
    """The integer an int, or a string of ASCII digits (blanks around allowed), spells within
    [low, high]; None for anything else (bools, signs, other scripts' digits, out of range)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _ASCII_DIGITS.fullmatch(value.strip()):
        number = int(value.strip())
    else:
        return None
    if (low is not None and number < low) or (high is not None and number > high):
        return None
    return number
