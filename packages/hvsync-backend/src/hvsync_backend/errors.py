"""The backend's error map: one exception class per meaning, raised by the lower layers and answered by
the routes (and the CLI), each with its own status and body as before.

- `FieldError`: a value the caller gave is wrong; `field` names it (a 422 naming the query or body field).
- `NotFound`: what the caller named is not stored (404); `UnknownHvEndpoints` names the hv endpoint ids.
- `AlreadyExists`: the singleton the caller would create exists already (409); `existing_id` says which.
"""

from __future__ import annotations

__all__ = ["AlreadyExists", "FieldError", "NotFound", "UnknownHvEndpoints"]


class FieldError(ValueError):
    """A missing or malformed value; `field` names the query parameter or body field (answered 422)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotFound(LookupError):
    """The key, endpoint or object the caller named is not stored (answered 404)."""


class UnknownHvEndpoints(NotFound):
    """Hv endpoint ids a request named that are not stored."""

    def __init__(self, ids: list[int]) -> None:
        super().__init__(f"unknown hv endpoint id(s): {', '.join(map(str, ids))}")
        self.ids = ids


class AlreadyExists(Exception):
    """The one record of its kind exists already (the first API key, the inventory endpoint): 409."""

    def __init__(self, existing_id: int | None = None) -> None:
        super().__init__(*(() if existing_id is None else (existing_id,)))
        self.existing_id = existing_id
