"""Ticket, CSRF and token-header handling on plain values."""

from __future__ import annotations

from pve_emulator.auth import TICKET_LIFETIME, TicketSigner, parse_token_header


def test_ticket_round_trip_expiry_and_tampering() -> None:
    signer = TicketSigner(b"k" * 32)
    ticket = signer.issue("alice@pve", now=1_000_000)
    assert ticket.startswith("PVE:alice@pve:") and signer.verify(ticket, now=1_000_100) == "alice@pve"
    assert signer.verify(ticket, now=1_000_000 + TICKET_LIFETIME + 1) is None
    assert signer.verify(ticket.replace("alice", "mallory"), now=1_000_100) is None
    assert TicketSigner(b"x" * 32).verify(ticket, now=1_000_100) is None
    assert signer.verify("garbage") is None


def test_csrf_token_is_bound_to_the_user() -> None:
    signer = TicketSigner()
    token = signer.csrf_token("alice@pve")
    assert signer.verify_csrf("alice@pve", token)
    assert not signer.verify_csrf("bob@pve", token)
    assert not signer.verify_csrf("alice@pve", token + "x")


def test_token_header_forms() -> None:
    assert parse_token_header("PVEAPIToken=root@pam!ci=1234-abcd") == ("root@pam", "root@pam!ci", "1234-abcd")
    assert parse_token_header("PVEAPIToken=root@pam!ci:1234") == ("root@pam", "root@pam!ci", "1234")
    assert parse_token_header("Bearer abc") is None
    assert parse_token_header("PVEAPIToken=root@pam=nope") is None
