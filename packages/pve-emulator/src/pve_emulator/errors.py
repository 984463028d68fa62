"""The product's error map: one exception class per HTTP meaning, for handlers, validation and real mode.

Everything a caller can be told is an :class:`ApiError` (or one of its classes below); the HTTP layer
renders every one the same way, in one place (``pve_emulator.wire.error_body``): Proxmox style on
``/api2/json`` paths, the SPEC 7.4 body ``{detail, errors: [{field, message}]}`` on bare paths.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "PARAMETERS_FAILED",
    "ApiError",
    "FieldError",
    "Forbidden",
    "NotFound",
    "ParameterError",
    "Unauthorized",
    "UpstreamError",
    "bad_param",
    "not_found",
]

#: Proxmox's message of every parameter refusal (the fields at fault go in ``errors``)
PARAMETERS_FAILED = "Parameter verification failed."


@dataclass(frozen=True, slots=True)
class FieldError:
    """One field at fault and why (``errors`` in both error bodies)."""

    field: str
    message: str


class ApiError(Exception):
    """An answer other than success: its HTTP ``status``, a ``message`` and the fields at fault."""

    def __init__(self, status: int, message: str, errors: list[FieldError] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


class ParameterError(ApiError):
    """400: the request does not match the schema (every failing field named), or a value is refused."""

    def __init__(self, errors: list[FieldError], message: str = PARAMETERS_FAILED) -> None:
        super().__init__(400, message, errors)


class Unauthorized(ApiError):
    """401: no credentials, or credentials that are not (or no longer) good."""

    def __init__(self, message: str) -> None:
        super().__init__(401, message)


class Forbidden(ApiError):
    """403: a known caller without the privilege (or the credential kind) the operation needs."""

    def __init__(self, message: str) -> None:
        super().__init__(403, message)


class NotFound(ApiError):
    """404: no such resource, object or file."""

    def __init__(self, message: str) -> None:
        super().__init__(404, message)


class UpstreamError(ApiError):
    """502 (or 504 for a timeout): real mode's upstream Proxmox VE could not be reached, refused the
    configured login, or answered in a shape the API does not allow. The message names no secret."""

    def __init__(self, message: str, status: int = 502, errors: list[FieldError] | None = None) -> None:
        super().__init__(status, message, errors)


def not_found(what: str) -> NotFound:
    """Proxmox's "<what> does not exist"."""
    return NotFound(f"{what} does not exist")


def bad_param(field: str, message: str) -> ParameterError:
    """A parameter refusal naming one field."""
    return ParameterError([FieldError(field, message)])
