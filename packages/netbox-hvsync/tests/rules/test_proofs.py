"""SPEC 5.2.6: "A validation proof is bound to the candidate, URL, scheme, port and TLS-verification
setting; changing any forces a fresh check." """

from netbox_hvsync.rules.proofs import issue_proof, proof_is_fresh
from netbox_hvsync.rules.urls import canonicalize_target

KEY = b"proof-key"
CANDIDATE = "c" * 64
TARGET = canonicalize_target("https://backend.example:8800")


def test_fresh_only_for_the_exact_binding() -> None:
    proof = issue_proof(KEY, CANDIDATE, TARGET, True)
    assert proof_is_fresh(proof, KEY, CANDIDATE, TARGET, True)
    assert proof_is_fresh(str(proof), KEY, CANDIDATE, TARGET, True)
    assert not proof_is_fresh(proof, KEY, "d" * 64, TARGET, True), "candidate"
    assert not proof_is_fresh(
        proof, KEY, CANDIDATE, canonicalize_target("https://other.example:8800"), True
    ), "url"
    assert not proof_is_fresh(
        proof, KEY, CANDIDATE, canonicalize_target("http://backend.example:8800"), True
    ), "scheme"
    assert not proof_is_fresh(
        proof, KEY, CANDIDATE, canonicalize_target("https://backend.example:8801"), True
    ), "port"
    assert not proof_is_fresh(proof, KEY, CANDIDATE, TARGET, False), "tls"
    assert not proof_is_fresh(None, KEY, CANDIDATE, TARGET, True)
    assert not proof_is_fresh("", KEY, CANDIDATE, TARGET, True)


def test_proof_never_contains_the_candidate() -> None:
    assert CANDIDATE not in str(issue_proof(KEY, CANDIDATE, TARGET, True))
