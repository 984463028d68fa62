"""Server-sent events: frame encoding, per-run replay buffers, keep-alive streaming."""

from hvsync_backend.sse.frames import Frame, encode_comment, encode_frame
from hvsync_backend.sse.runs import Run, RunRegistry

__all__ = ["Frame", "Run", "RunRegistry", "encode_comment", "encode_frame"]
