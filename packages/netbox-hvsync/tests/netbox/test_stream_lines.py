"""The stage stream a sync job reads is split into lines by `wire.sse.split_lines` (the one SSE line
splitter of both products): a CRLF split across two chunks is one line end, not an extra blank line that
would dispatch half an event. `requests`' own `iter_lines` gets this case wrong."""

from __future__ import annotations

import io

import requests
from netbox_hvsync.backend.http import StreamingResponse
from netbox_hvsync.wire.sse import iter_events

CHUNKS = [b'event: step\r\ndata: {"a":\r', b"\ndata: 1}\r\n\r\n"]


def response_of(chunks: list[bytes]) -> requests.Response:
    response = requests.Response()
    response.status_code = 200
    response.raw = io.BufferedReader(io.BytesIO(b"".join(chunks)), buffer_size=len(chunks[0]))
    response.iter_content = lambda chunk_size=1, decode_unicode=False: iter(chunks)  # type: ignore[method-assign]
    return response


def test_a_crlf_split_across_chunks_ends_one_line() -> None:
    events = list(iter_events(StreamingResponse(response_of(CHUNKS)).iter_lines()))
    assert [(e.event, e.data) for e in events] == [("step", '{"a":\n1}')]
    # what requests alone would have made of it: the event cut in two at the split CRLF
    cut = list(iter_events(response_of(CHUNKS).iter_lines()))
    assert [(e.event, e.data) for e in cut] == [("step", '{"a":'), ("message", "1}")]
