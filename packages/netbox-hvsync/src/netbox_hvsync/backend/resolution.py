"""Which backend the plugin talks to, and how (SPEC 4.5 B1, 5.2.5, 6.2): the hub every job, push and
page goes through to reach the backend.

`resolve_backend` picks the pinned backend endpoint row, else the first enabled one whose key was adopted,
canonicalizes its addresses (hostname, then IP) and binds a transport to its TLS policy. A row whose key
cannot be decrypted or whose target does not canonicalize is never used, nor is one whose validation proof
(SPEC 5.2.6) no longer matches its key, target and TLS setting: that row goes back to pending, and the
next sync job (`adoption.adopt_stored_keys`) or save verifies it afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from netbox_hvsync.backend.http import STREAM_READ_TIMEOUT, RequestsTransport
from netbox_hvsync.backend.key_proofs import proof_holds
from netbox_hvsync.choices import KeyStateChoices
from netbox_hvsync.crypto import CredentialDecryptionError
from netbox_hvsync.models import BackendEndpoint
from netbox_hvsync.rules.transport import BackendContext
from netbox_hvsync.rules.urls import CanonicalTarget, TargetError, backend_url_target, canonicalize_target

logger = logging.getLogger("netbox_hvsync.backend")

#: Below twice the backend's 15 s keep-alive interval a healthy but busy stage could time out.
MIN_STREAM_READ_TIMEOUT = 30


def ip_text(obj: Any) -> str | None:
    ip = getattr(obj, "ip_address", None)
    return str(ip.address.ip) if ip is not None else None


def backend_target(backend: BackendEndpoint) -> CanonicalTarget:
    """The canonical target of a backend endpoint row (SPEC 5.2.5); raises TargetError naming the field."""
    if backend.url:
        return backend_url_target(backend.url, backend.port)
    ip = ip_text(backend)
    if not ip:
        raise TargetError("url", "give the backend URL or an IP address")
    return canonicalize_target(ip, backend.port, field="ip_address", default_scheme="http")


def backend_candidates(backend: BackendEndpoint) -> list[CanonicalTarget]:
    """Every address of one backend, hostname first (SPEC 6.2, 7.3): its URL, then its IP address.

    The IP candidate takes the URL's scheme and port, so both candidates name the same service; a row
    with only one of the two has one candidate. Raises TargetError naming the field for a bad value."""
    first = backend_target(backend)
    ip = ip_text(backend) if backend.url else None
    if not ip:
        return [first]
    second = canonicalize_target(ip, first.port, field="ip_address", default_scheme=first.scheme)
    return [first] if second.base_url == first.base_url else [first, second]


@dataclass(frozen=True)
class ResolvedBackend:
    """A usable backend endpoint: its row, the request context and a transport bound to its TLS policy.

    `candidates` holds one context per address of the backend (hostname, then IP); `context` is the one
    in use. Jobs switch to another candidate when the one in use cannot be reached, after it passed the
    failover check (`failover.candidate_verified`): the validation proof covers the first candidate only."""

    row: BackendEndpoint
    context: BackendContext
    transport: RequestsTransport
    candidates: tuple[BackendContext, ...] = field(default=())
    #: base URLs of other candidates that accepted the key in this job (the failover check, issue 39)
    verified: set[str] = field(default_factory=set, compare=False)

    @property
    def all_candidates(self) -> tuple[BackendContext, ...]:
        return self.candidates or (self.context,)

    def using(self, context: BackendContext) -> ResolvedBackend:
        return replace(self, context=context)


def stream_read_timeout() -> float:
    """`PLUGINS_CONFIG["netbox_hvsync"]["stream_read_timeout"]`: seconds to wait for the next chunk of a
    stage stream (the backend sends a keep-alive every 15 s, so keep it well above that)."""
    from netbox.plugins import get_plugin_config

    value = get_plugin_config("netbox_hvsync", "stream_read_timeout", STREAM_READ_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < MIN_STREAM_READ_TIMEOUT:
        logger.warning(
            "stream_read_timeout must be a number of seconds >= %s; using %s",
            MIN_STREAM_READ_TIMEOUT,
            STREAM_READ_TIMEOUT,
        )
        return STREAM_READ_TIMEOUT
    return float(value)


def usable_backends(selected_id: int | None = None) -> Iterable[BackendEndpoint]:
    """Enabled rows whose stored key the target accepted (SPEC 5.2.7, 5.2.8): a pending or refused key is
    never sent credentials, whatever its target answers later."""
    qs = BackendEndpoint.objects.filter(enabled=True, key_state=KeyStateChoices.ADOPTED)
    qs = qs.exclude(token_ciphertext="").order_by("pk")
    return qs.filter(pk=selected_id) if selected_id is not None else qs


def distrust(row: BackendEndpoint) -> None:
    """An adopted row whose proof is stale (its target or TLS setting changed without a save, or it was
    adopted before proofs existed) is pending again until a fresh verification; the filtered update
    leaves a row that changed meanwhile alone."""
    logger.warning(
        "backend endpoint %s: the validation proof of its key does not match its target and TLS setting; "
        "it is not used until its key is verified again",
        row.pk,
    )
    BackendEndpoint.objects.filter(
        pk=row.pk, key_state=KeyStateChoices.ADOPTED, key_proof=row.key_proof
    ).update(key_state=KeyStateChoices.PENDING, key_fingerprint="", key_proof="")


def resolve_backend(selected_id: int | None = None) -> ResolvedBackend | None:
    """The backend a job or push talks to: the pinned row, else the first enabled one with an adopted key.

    A row whose key cannot be decrypted or whose target does not canonicalize is not usable (B1)."""
    for row in usable_backends(selected_id):
        try:
            targets = backend_candidates(row)
            key = row.token
        except (TargetError, CredentialDecryptionError) as exc:
            logger.warning("backend endpoint %s is not usable: %s", row.pk, type(exc).__name__)
            continue
        if not key:
            continue
        if not proof_holds(row.key_proof, key, targets[0], row.verify_ssl):
            distrust(row)
            continue
        contexts = tuple(
            BackendContext(base_url=t.base_url, api_key=key, backend_endpoint_id=row.pk) for t in targets
        )
        transport = RequestsTransport(verify_ssl=row.verify_ssl, read_timeout=stream_read_timeout())
        return ResolvedBackend(row, contexts[0], transport, contexts)
    return None
