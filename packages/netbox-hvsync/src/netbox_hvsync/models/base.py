"""Shared model helpers: encrypted credential columns kept out of change logs."""

from __future__ import annotations

from typing import Any

from netbox_hvsync import crypto


class EncryptedCredentialsMixin:
    """Models listing their ciphertext columns in `encrypted_fields` keep them out of change-log snapshots.

    Ciphertext is not plaintext, but a change log is copied, exported and shown to people who must not
    be handed credential material of any kind, so the columns are replaced by a "changed" marker.
    """

    encrypted_fields: tuple[str, ...] = ()

    def serialize_object(self, exclude: list[str] | None = None) -> dict[str, Any]:
        exclude = [*(exclude or []), *self.encrypted_fields]
        data = super().serialize_object(exclude=exclude)  # type: ignore[misc]
        for field in self.encrypted_fields:
            data[f"has_{field.removesuffix('_ciphertext')}"] = bool(getattr(self, field))
        return data


def encrypted_property(column: str, doc: str) -> property:
    """A plaintext property over `column`, which only ever stores Fernet ciphertext.

    Reading decrypts; assigning encrypts (None and "" store an empty ciphertext of "").
    """

    def get(self: Any) -> str:
        return crypto.decrypt(getattr(self, column))

    def put(self: Any, value: str | None) -> None:
        setattr(self, column, crypto.encrypt(value or ""))

    return property(get, put, doc=doc)


def presence_property(column: str) -> property:
    """`has_<secret>`: whether a secret is stored, without decrypting it."""
    return property(lambda self: bool(getattr(self, column)), doc=f"whether {column} holds a secret")
