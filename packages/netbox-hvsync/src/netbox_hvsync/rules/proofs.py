"""Validation proofs for backend key adoption (SPEC 5.2.6).

A proof records that one candidate key was accepted by one target. It is bound to the candidate,
URL, scheme, port and TLS-verification setting: changing any of them makes the proof stale and forces
a fresh check. The proof stores only an HMAC over those values, never the candidate.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from .fingerprints import frame_fields
from .urls import CanonicalTarget


@dataclass(frozen=True)
class ValidationProof:
    """Opaque evidence that `candidate` was verified against `target` under a TLS policy."""

    digest: str

    def __str__(self) -> str:
        return self.digest


def _digest(key: bytes, candidate: str, target: CanonicalTarget, verify_ssl: bool) -> str:
    if not key:
        raise ValueError("proof key must not be empty")
    message = frame_fields(
        "backend-key-proof",
        candidate,
        target.base_url,
        target.scheme,
        target.host,
        str(target.port),
        "verify" if verify_ssl else "no-verify",
    )
    return "p1:" + hmac.new(key, message, hashlib.sha256).hexdigest()


def issue_proof(key: bytes, candidate: str, target: CanonicalTarget, verify_ssl: bool) -> ValidationProof:
    """Call only after the target accepted the candidate."""
    return ValidationProof(_digest(key, candidate, target, verify_ssl))


def proof_is_fresh(
    proof: ValidationProof | str | None, key: bytes, candidate: str, target: CanonicalTarget, verify_ssl: bool
) -> bool:
    """True only when the proof was issued for exactly this candidate, URL, scheme, port and TLS policy."""
    if not proof:
        return False
    stored = proof.digest if isinstance(proof, ValidationProof) else str(proof)
    return hmac.compare_digest(stored.encode(), _digest(key, candidate, target, verify_ssl).encode())
