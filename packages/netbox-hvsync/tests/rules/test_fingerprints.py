"""SPEC 2.6: "pushed_credential_fingerprint, a keyed HMAC-SHA256 over token_version, token_key and token
with an unambiguous separator; non-reversible; empty means never pushed." """

import hashlib
import hmac

import pytest
from netbox_hvsync.rules.fingerprints import credential_fingerprint, fingerprint_changed

KEY = b"fingerprint-key-from-secret-key"


def test_is_keyed_hmac_sha256_and_does_not_contain_the_secret() -> None:
    fp = credential_fingerprint(KEY, 2, "keyid", "planted-token-secret")
    assert fp.startswith("v1:") and len(fp) == 3 + 64
    assert "planted-token-secret" not in fp and "keyid" not in fp
    assert fp != credential_fingerprint(b"another-key", 2, "keyid", "planted-token-secret")
    # the same message under plain SHA-256 (unkeyed) must not give the fingerprint
    assert fp[3:] != hashlib.sha256(b"2keyidplanted-token-secret").hexdigest()
    expected = hmac.new(KEY, b"20:inventory-credential1:25:keyid20:planted-token-secret", hashlib.sha256)
    assert fp[3:] == expected.hexdigest()


def test_separator_is_unambiguous() -> None:
    """Fields that concatenate to the same text must not collide."""
    a = credential_fingerprint(KEY, 2, "ab", "c")
    b = credential_fingerprint(KEY, 2, "a", "bc")
    c = credential_fingerprint(KEY, 2, "a|b", "c")
    d = credential_fingerprint(KEY, 2, "a", "b|c")
    assert len({a, b, c, d}) == 4


def test_every_field_is_covered() -> None:
    base = credential_fingerprint(KEY, 2, "k", "t")
    assert credential_fingerprint(KEY, 1, "k", "t") != base
    assert credential_fingerprint(KEY, 2, "k2", "t") != base
    assert credential_fingerprint(KEY, 2, "k", "t2") != base
    assert credential_fingerprint(KEY, 2, "k", "t") == base


def test_empty_stored_fingerprint_reads_as_changed() -> None:
    """SPEC 4.5: "an empty fingerprint reads as changed"."""
    fp = credential_fingerprint(KEY, 2, "k", "t")
    assert fingerprint_changed("", fp) is True
    assert fingerprint_changed(None, fp) is True
    assert fingerprint_changed(fp, fp) is False
    assert fingerprint_changed(credential_fingerprint(KEY, 2, "k", "other"), fp) is True


def test_empty_key_is_refused() -> None:
    with pytest.raises(ValueError):
        credential_fingerprint(b"", 2, "k", "t")
