"""Server-sent events as the stage streams' readers parse them (the plugin's job, the terminal runner).

Standard library only: the WHATWG SSE line and event rules, nothing of hvsync's frames (each reader
decides what an event's data means).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["SseEvent", "iter_events", "split_lines"]

_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: str | None


def split_lines(chunks: Iterable[str | bytes]) -> Iterator[str]:
    """Turn arbitrary text/byte chunks into lines (CRLF, LF or CR terminated), as SSE defines them.

    UTF-8 is decoded incrementally, so a character split across chunks survives; a CR at the end of a
    chunk waits for the next one in case it is half of a CRLF.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buffer = ""
    for chunk in chunks:
        buffer += decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        start = 0
        for match in _EOL.finditer(buffer):
            if match.group() == "\r" and match.end() == len(buffer):
                break  # maybe the first half of a CRLF split across chunks
            yield buffer[start : match.start()]
            start = match.end()
        buffer = buffer[start:]
    buffer += decoder.decode(b"", final=True)
    *complete_lines, rest = _EOL.split(buffer)
    yield from complete_lines
    if rest:
        yield rest  # an unterminated last line; it cannot dispatch an event by itself


def iter_events(lines: Iterable[str | bytes]) -> Iterator[SseEvent]:
    """Parse SSE lines (without terminators, as `requests.iter_lines` yields them) into events.

    Comment lines (`: keep-alive`) are ignored; multi-line `data:` is joined with newlines; an event is
    dispatched on a blank line; a trailing event without its blank line is not dispatched (per the
    SSE rules it never completed).
    """
    event, last_id = "", None
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if line == "":
            if data:
                yield SseEvent(event or "message", "\n".join(data), last_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id" and "\x00" not in value:
            last_id = value
