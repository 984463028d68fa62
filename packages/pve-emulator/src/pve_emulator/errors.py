"""The one error type handlers raise; the HTTP layer renders it in bare or Proxmox style."""

from __future__ import annotations

from pve_emulator.validation import FieldError


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[FieldError] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} does not exist")


def bad_param(field: str, message: str) -> ApiError:
    return ApiError(400, "Parameter verification failed.", [FieldError(field, message)])
