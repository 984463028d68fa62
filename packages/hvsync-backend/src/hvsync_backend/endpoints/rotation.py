"""Encryption-key rotation: decrypt every stored credential with the old key and re-encrypt with the new one."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from hvsync_backend.db.models import HvEndpoint, InventoryEndpoint
from hvsync_backend.endpoints.crypto import CredentialCipher

_COLUMNS = {
    InventoryEndpoint: ("token_enc", "token_key_enc"),
    HvEndpoint: ("password_enc", "token_value_enc"),
}


def reencrypt_all(session: Session, old: CredentialCipher, new: CredentialCipher) -> int:
    """Rewrite all ciphertext in the caller's transaction; returns how many values were rewritten."""
    count = 0
    for model, columns in _COLUMNS.items():
        for row in session.scalars(select(model).with_for_update()):
            for column in columns:
                value = getattr(row, column)
                if value is not None:
                    setattr(row, column, new.encrypt(old.decrypt(value)))
                    count += 1
    return count
