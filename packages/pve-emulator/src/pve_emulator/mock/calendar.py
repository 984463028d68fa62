"""Proxmox calendar events (``*/15``, ``mon..fri 02:30``, ``daily``): parse one and find its next time.

Replication and backup schedules use the systemd-like subset that Proxmox's ``proxmox-time`` accepts:
``[WEEKDAYS] [HOURS:]MINUTES``, each part a ``*``, number, ``a..b`` range, ``/step`` repetition or a
comma list; a single time part means minutes. Dates (``2026-01-01``) are not modelled. Times are UTC:
every emulated node runs with the UTC time zone.
"""

from __future__ import annotations

from dataclasses import dataclass

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
ALIASES = {
    "minutely": "*:*",
    "hourly": "*:0",
    "daily": "0:0",
    "weekly": "mon 0:0",
}
MINUTE = 60
DAY = 86400


@dataclass(frozen=True, slots=True)
class CalendarEvent:
    """The sets of weekdays (0 = Monday), hours and minutes an event fires on."""

    weekdays: frozenset[int]
    hours: tuple[int, ...]
    minutes: tuple[int, ...]


def _values(part: str, top: int, names: tuple[str, ...] = ()) -> set[int]:
    """One comma-separated field: ``*``, ``n``, ``a..b``, ``a/step``, ``a..b/step``, ``*/step``."""

    def number(text: str) -> int:
        if text in names:
            return names.index(text)
        value = int(text)
        if not 0 <= value < top:
            raise ValueError(f"value {value} out of range")
        return value

    out: set[int] = set()
    for item in part.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError("repetition must be positive")
        if base == "*":
            first, last = 0, top - 1
        elif ".." in base:
            low, high = base.split("..", 1)
            first, last = number(low), number(high)
            if names and last < first:  # sat..mon wraps around the week
                out |= _values(f"{names[first]}..{names[-1]}", top, names)
                first = 0
        else:
            first = number(base)
            last = top - 1 if step_text else first
        out |= set(range(first, last + 1, step))
    return out


def parse(spec: str) -> CalendarEvent:
    """Parse a calendar event; ValueError for what Proxmox would refuse (or dates, not modelled)."""
    text = ALIASES.get(spec.strip().lower(), spec.strip().lower())
    words = text.split()
    if not words or len(words) > 2:
        raise ValueError(f"unable to parse calendar event '{spec}'")
    weekdays = set(range(7))
    if words[0][:3] in DAYS:
        weekdays = _values(words.pop(0), 7, DAYS)
    if not words:
        words = ["0:0"]
    if len(words) != 1 or "-" in words[0]:
        raise ValueError(f"unable to parse calendar event '{spec}'")
    parts = words[0].split(":")
    if len(parts) == 1:
        hours, minutes = set(range(24)), _values(parts[0], 60)
    elif len(parts) == 2:
        hours, minutes = _values(parts[0], 24), _values(parts[1], 60)
    else:
        raise ValueError(f"unable to parse calendar event '{spec}'")
    if not (weekdays and hours and minutes):
        raise ValueError(f"calendar event '{spec}' never fires")
    return CalendarEvent(frozenset(weekdays), tuple(sorted(hours)), tuple(sorted(minutes)))


def next_event(event: CalendarEvent, last: float) -> int:
    """The first time the event fires strictly after ``last`` (Proxmox's ``compute_next_event``)."""
    start = (int(last) // MINUTE + 1) * MINUTE
    day = start - start % DAY
    for offset in range(8):
        midnight = day + offset * DAY
        if (midnight // DAY + 3) % 7 not in event.weekdays:  # 1970-01-01 was a Thursday
            continue
        for hour in event.hours:
            for minute in event.minutes:
                at = midnight + hour * 3600 + minute * MINUTE
                if at >= start:
                    return at
    raise ValueError("calendar event never fires")  # unreachable: some weekday matches within 8 days
