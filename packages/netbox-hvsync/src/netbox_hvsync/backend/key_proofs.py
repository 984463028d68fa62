"""Validation proofs of adopted backend keys, held on the BackendEndpoint row (SPEC 5.2.6).

A successful verification issues a proof over the key, URL, scheme, port and TLS-verification setting
(`rules.proofs`: an HMAC, never the key); the row stores it in `key_proof`. Before an adopted key is
trusted, the proof is checked against the row as it is now: a row whose target or TLS setting changed
by any path (a save, a queryset update, a restore) holds a stale proof and is verified again first.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings
from netbox_hvsync.rules.proofs import issue_proof, proof_is_fresh
from netbox_hvsync.rules.urls import CanonicalTarget

PROOF_INFO = b"netbox-hvsync backend key proof"


def proof_key() -> bytes:
    """The plugin-held HMAC key for validation proofs, derived from SECRET_KEY (never stored)."""
    return hmac.new(str(settings.SECRET_KEY).encode(), PROOF_INFO, hashlib.sha256).digest()


def issued_proof(key: str, target: CanonicalTarget, verify_ssl: bool) -> str:
    """The proof to store after `target` accepted `key` under this TLS setting."""
    return str(issue_proof(proof_key(), key, target, verify_ssl))


def proof_holds(proof: str | None, key: str, target: CanonicalTarget, verify_ssl: bool) -> bool:
    """Whether a stored proof was issued for exactly this key, target and TLS setting."""
    return proof_is_fresh(proof, proof_key(), key, target, verify_ssl)
