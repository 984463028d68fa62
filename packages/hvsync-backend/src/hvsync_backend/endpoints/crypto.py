"""Credential encryption with Fernet (AES-128-CBC + HMAC-SHA256).

The key comes from ``HVSYNC_ENCRYPTION_KEY`` (one Fernet key, or several comma-separated with the newest
first so older ciphertext stays readable during a rotation) or from a key file created 0600 on first start.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet


class CredentialDecryptError(Exception):
    """Stored ciphertext cannot be read with the configured key(s) (wrong or rotated-away key)."""


class CredentialCipher:
    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise ValueError("at least one encryption key is needed")
        self._fernet = MultiFernet([Fernet(k) for k in keys])

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode("utf-8")).decode("ascii")

    def decrypt(self, ciphertext: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode("ascii")).decode("utf-8")
        except (InvalidToken, ValueError) as exc:
            raise CredentialDecryptError(
                "stored credential cannot be decrypted with the configured key"
            ) from exc

    def encrypt_optional(self, plaintext: str | None) -> str | None:
        return None if plaintext is None else self.encrypt(plaintext)

    def decrypt_optional(self, ciphertext: str | None) -> str | None:
        return None if ciphertext is None else self.decrypt(ciphertext)


def parse_keys(value: str) -> list[bytes]:
    keys = [part.strip().encode("ascii") for part in value.split(",") if part.strip()]
    for key in keys:
        Fernet(key)  # raises ValueError on a malformed key
    return keys


def write_key_file(path: Path, key: bytes) -> None:
    """Write a key file atomically with mode 0600 (created with that mode, never widened)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, key + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def load_or_create_key_file(path: Path) -> list[bytes]:
    """Read the key file, creating it (0600) when absent. The key is written to a private temporary file
    and hard-linked into place, so a second process starting at the same moment never reads the file
    empty or half-written, and the first link wins (both then use the same key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, Fernet.generate_key() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(draft, path)  # atomic and never replaces: another process's key stays
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return parse_keys(path.read_text(encoding="ascii"))
