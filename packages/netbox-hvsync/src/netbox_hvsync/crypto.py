"""Credential encryption at rest: Fernet (AES-128-CBC + HMAC-SHA256).

The key comes from PLUGINS_CONFIG["netbox_hvsync"]["encryption_key"] when set (a urlsafe base64 Fernet
key), otherwise it is derived from NetBox's SECRET_KEY with HKDF-SHA256, so a stock install needs no
extra setting. Ciphertext is all that reaches the database.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

HKDF_INFO = b"netbox-hvsync credentials"


class CredentialDecryptionError(Exception):
    """Stored ciphertext could not be decrypted (wrong key or tampered data); never carries the value."""


def _configured_key() -> str:
    plugin_config = getattr(settings, "PLUGINS_CONFIG", {}).get("netbox_hvsync", {}) or {}
    return str(plugin_config.get("encryption_key") or "")


@lru_cache(maxsize=4)
def _fernet_for(configured_key: str, secret_key: str) -> Fernet:
    if configured_key:
        try:
            return Fernet(configured_key.encode())
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(
                'PLUGINS_CONFIG["netbox_hvsync"]["encryption_key"] must be a urlsafe base64 Fernet key'
            ) from exc
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(
        secret_key.encode()
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def fernet() -> Fernet:
    return _fernet_for(_configured_key(), str(settings.SECRET_KEY))


def encrypt(plaintext: str) -> str:
    """Encrypt a secret; the empty string stays empty (meaning: no secret stored)."""
    if not plaintext:
        return ""
    return fernet().encrypt(plaintext.encode()).decode()


def undecryptable(row: Any) -> str:
    """What an operator reads when a row's credentials no longer decrypt (PLUGINS_CONFIG `encryption_key`,
    or SECRET_KEY without one, changed): the row by name, what to do, never a value."""
    return (
        f"the stored credentials of {row._meta.verbose_name} {row.name!r} cannot be decrypted with the "
        "configured encryption key; enter them again (or restore the previous key)"
    )


def decrypt(ciphertext: str) -> str:
    if not ciphertext:
        return ""
    try:
        return fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise CredentialDecryptionError(
            "stored credential cannot be decrypted with the configured key"
        ) from exc
