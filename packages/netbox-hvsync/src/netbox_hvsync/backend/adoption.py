"""Backend key adoption around BackendEndpoint saves (SPEC 5.2), fail closed.

Core's `plan_key_save` decides what a save must do; this module runs it at the persistence boundary:
`before_save` (pre_save: the model's save is the boundary, so form validation and `commit=False` saves
make no request) verifies an explicit candidate before the row is written and aborts the save when the
backend refuses it, so the stored value survives; a row without a key gets an encrypted generated
candidate and is configured after commit (`after_commit`), as is a stored key whose target changed. A
security-sensitive save re-reads the row under `select_for_update` and compares it with the snapshot
taken before the network call: if another save won the race, this one is refused.
Every successful verification stores a validation proof (`backend.key_proofs`, SPEC 5.2.6); an adopted
row whose proof no longer matches its key, target and TLS setting is verified again before it is trusted
(`adopt_stored_keys`, and the save path, which treats it as not adopted).
No message here ever contains a key.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any

from django.db import transaction
from netbox_hvsync import crypto
from netbox_hvsync.backend.http import RequestsTransport
from netbox_hvsync.backend.key_proofs import issued_proof, proof_holds, proof_key
from netbox_hvsync.backend.push import fingerprint_key
from netbox_hvsync.backend.resolution import backend_target
from netbox_hvsync.choices import KeyStateChoices
from netbox_hvsync.crypto import CredentialDecryptionError
from netbox_hvsync.models import BackendEndpoint
from netbox_hvsync.rules.adoption import (
    AdoptionOutcome,
    BackendEndpointState,
    CandidateError,
    KeyPlan,
    KeyPlanAction,
    generate_token,
    plan_key_save,
    security_snapshot,
    snapshot_conflicts,
    verify_candidate,
)
from netbox_hvsync.rules.fingerprints import frame_fields
from netbox_hvsync.rules.redaction import sweep_text
from netbox_hvsync.rules.urls import CanonicalTarget, TargetError
from utilities.exceptions import AbortRequest

logger = logging.getLogger("netbox_hvsync.adoption")

#: Columns compared by the optimistic snapshot (the model's names for the rules' SECURITY_FIELDS).
SNAPSHOT_COLUMNS = (
    "enabled",
    "url",
    "ip_address_id",
    "port",
    "verify_ssl",
    "token_ciphertext",
    "key_fingerprint",
)


class KeyAdoptionRefused(AbortRequest):
    """The save was refused because the backend did not accept the key; NetBox answers it with a 400
    (REST: keyed by `field`, see the serializer) or a form message (UI), and the stored row is untouched."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def key_fingerprint(key: str) -> str:
    """`v1:<hex>` HMAC of the adopted key; identifies it without revealing it."""
    digest = hmac.new(fingerprint_key(), frame_fields("backend-key", key), hashlib.sha256).hexdigest()
    return f"v1:{digest}"


def _row_values(pk: int | None, *, lock: bool = False) -> dict[str, Any] | None:
    if pk is None:
        return None
    qs = BackendEndpoint.objects.filter(pk=pk)
    if lock:
        qs = qs.select_for_update()
    return qs.values(*SNAPSHOT_COLUMNS, "key_state", "key_proof").first()


def _snapshot(values: dict[str, Any]) -> dict[str, object]:
    renamed = {
        **values,
        "ip_address": values.get("ip_address_id"),
        "key_ciphertext": values.get("token_ciphertext"),
    }
    return security_snapshot(renamed)


def _target(instance: BackendEndpoint) -> CanonicalTarget:
    try:
        return backend_target(instance)
    except TargetError as exc:
        raise KeyAdoptionRefused(exc.field, exc.message) from None


def _plaintext(ciphertext: str) -> str | None:
    try:
        return crypto.decrypt(ciphertext) or None
    except CredentialDecryptionError:
        return None


def _state(values: dict[str, Any] | None) -> BackendEndpointState | None:
    """The stored row as the rules see it; an adopted row counts as adopted only while its validation
    proof matches its stored key, target and TLS setting (SPEC 5.2.6)."""
    if values is None:
        return None
    previous = BackendEndpoint(
        url=values["url"],
        port=values["port"],
        ip_address_id=values["ip_address_id"],
        verify_ssl=values["verify_ssl"],
    )
    try:
        prev_target = backend_target(previous)
    except TargetError:
        prev_target = CanonicalTarget(scheme="invalid", host="", port=0)
    key = _plaintext(values["token_ciphertext"])
    adopted = (
        values["key_state"] == KeyStateChoices.ADOPTED
        and key is not None
        and proof_holds(values["key_proof"], key, prev_target, values["verify_ssl"])
    )
    return BackendEndpointState(
        enabled=values["enabled"],
        target=prev_target,
        verify_ssl=values["verify_ssl"],
        has_key=bool(values["token_ciphertext"]),
        proof=values["key_proof"] if adopted and values["enabled"] else None,
        adopted=adopted,
    )


def verify(target: CanonicalTarget, verify_ssl: bool, key: str) -> AdoptionOutcome:
    transport = RequestsTransport(verify_ssl=verify_ssl)
    try:
        return verify_candidate(transport, target, key)
    finally:
        transport.close()


def before_save(instance: BackendEndpoint) -> None:
    """pre_save of BackendEndpoint: plan, verify an explicit candidate, or arrange post-commit configuration."""
    stored = _row_values(instance.pk)
    ciphertext_changed = stored is None or instance.token_ciphertext != stored["token_ciphertext"]
    try:
        candidate = instance.token if (ciphertext_changed and instance.token_ciphertext) else None
    except CredentialDecryptionError:
        raise KeyAdoptionRefused(
            "token", "the stored key cannot be decrypted with the configured key"
        ) from None
    target = _target(instance)
    previous = _state(stored)
    new_state = BackendEndpointState(
        enabled=instance.enabled,
        target=target,
        verify_ssl=instance.verify_ssl,
        has_key=bool(instance.token_ciphertext),
        # the stored proof, only while the stored row is enabled and adopted: enabling authenticates
        proof=previous.proof if previous is not None else None,
    )
    stored_key = None
    if not candidate and instance.token_ciphertext:
        stored_key = _plaintext(instance.token_ciphertext) or "undecryptable"
    try:
        plan: KeyPlan = plan_key_save(
            previous, new_state, candidate, proof_key=proof_key(), stored_key=stored_key
        )
    except CandidateError as exc:
        raise KeyAdoptionRefused(exc.field, exc.message) from None
    instance._hvsync_key_plan = plan  # type: ignore[attr-defined]

    if plan.action is KeyPlanAction.VERIFY_CANDIDATE:
        assert candidate is not None
        snapshot = _snapshot(stored) if stored is not None else None
        outcome = verify(target, instance.verify_ssl, candidate)
        if not outcome.ok:
            logger.warning("backend key candidate refused at %s: %s", outcome.step, outcome.error)
            raise KeyAdoptionRefused(
                "token", f"the backend did not accept the key ({sweep_text(outcome.error, (candidate,))})"
            )
        if snapshot is not None and transaction.get_connection().in_atomic_block:
            locked = _row_values(instance.pk, lock=True)
            conflicts = snapshot_conflicts(snapshot, _snapshot(locked) if locked else {})
            if conflicts:
                raise KeyAdoptionRefused(
                    "non_field_errors",
                    "the backend endpoint was changed by another save while its key was verified "
                    f"({', '.join(conflicts)}); reload and retry",
                )
        instance.key_state = KeyStateChoices.ADOPTED
        instance.key_fingerprint = key_fingerprint(candidate)
        instance.key_proof = issued_proof(candidate, target, instance.verify_ssl)
    elif plan.action is KeyPlanAction.PENDING_GENERATED:
        instance.token = generate_token()  # encrypted before it is ever sent (SPEC 5.2.11)
        instance.key_state = KeyStateChoices.PENDING
        instance.key_fingerprint = ""
        instance.key_proof = ""
    elif plan.action in (KeyPlanAction.STORE_PENDING_CANDIDATE, KeyPlanAction.REVERIFY_STORED):
        instance.key_state = KeyStateChoices.PENDING
        instance.key_fingerprint = ""
        instance.key_proof = ""
    elif plan.action is KeyPlanAction.KEEP and previous is not None and previous.proof:
        instance.key_proof = previous.proof  # still fresh for this key, target and TLS setting
    if not instance.enabled:
        instance.key_proof = ""  # a disabled row keeps no proof: enabling it authenticates (SPEC 5.2.8)


def after_save(instance: BackendEndpoint) -> None:
    """post_save: configuration that needs the committed row runs after commit, never before."""
    plan: KeyPlan | None = getattr(instance, "_hvsync_key_plan", None)
    if plan is None or not plan.network_after_commit:
        return
    pk = instance.pk
    transaction.on_commit(lambda: configure_after_commit(pk))


def configure_after_commit(pk: int) -> AdoptionOutcome | None:
    """Bounded auto-configuration: one verification of the stored key against the persisted target
    (bootstrap only when the backend says it needs one). The result is written with a filtered update
    that compares the snapshot under a row lock; a failure keeps the key and marks the row failed."""
    row = BackendEndpoint.objects.filter(pk=pk).select_related("ip_address").first()
    if row is None or not row.enabled or not row.token_ciphertext:
        return None
    snapshot = _snapshot(_row_values(pk) or {})
    try:
        target, key = backend_target(row), row.token
    except (TargetError, CredentialDecryptionError) as exc:
        logger.warning("backend endpoint %s cannot be configured: %s", pk, type(exc).__name__)
        return None
    outcome = verify(target, row.verify_ssl, key)
    with transaction.atomic():
        locked = _row_values(pk, lock=True)
        if locked is None or snapshot_conflicts(snapshot, _snapshot(locked)):
            logger.warning("backend endpoint %s changed during auto-configuration; result discarded", pk)
            return outcome
        if outcome.ok:
            BackendEndpoint.objects.filter(pk=pk).update(
                key_state=KeyStateChoices.ADOPTED,
                key_fingerprint=key_fingerprint(key),
                key_proof=issued_proof(key, target, row.verify_ssl),
            )
        else:
            logger.warning("backend endpoint %s auto-configuration failed: %s", pk, outcome.error)
            BackendEndpoint.objects.filter(pk=pk).update(
                key_state=KeyStateChoices.FAILED, key_fingerprint="", key_proof=""
            )
    return outcome


def proof_is_current(row: BackendEndpoint) -> bool:
    """Whether an adopted row's validation proof still matches its key, target and TLS setting."""
    try:
        target, key = backend_target(row), row.token
    except (TargetError, CredentialDecryptionError):
        return False
    return bool(key) and proof_holds(row.key_proof, key, target, row.verify_ssl)


def adopt_stored_keys(selected_id: int | None = None) -> list[str]:
    """A sync job's second chance for the backend it is about to use, whose stored key is pending or was
    refused (the backend was down when the row was saved, or the target changed), and its check of an
    adopted row before it trusts it: an adopted row whose proof no longer matches its key, target or TLS
    setting (changed without a save) is verified afresh (SPEC 5.2.6).

    Only the backend in use is verified (issue 39): while an enabled row is adopted with a current proof,
    that row is the one `resolve_backend` uses and no other row is asked anything; otherwise rows are
    verified in the order `resolve_backend` takes them until one is adopted. Re-verifying every
    never-accepted row on each job sent a refused key again and again and locked the NetBox host out of
    those backends; a pending row that is not in use is retried by saving it. Returns why each row tried
    is not usable, for the job's B1 message."""
    rows = BackendEndpoint.objects.filter(enabled=True).exclude(token_ciphertext="").order_by("pk")
    if selected_id is not None:
        rows = rows.filter(pk=selected_id)
    rows = rows.select_related("ip_address")
    if any(row.key_state == KeyStateChoices.ADOPTED and proof_is_current(row) for row in rows):
        return []  # the backend in use is trusted as it is
    reasons = []
    for row in rows:
        pk, name = row.pk, row.name
        outcome = configure_after_commit(pk)
        if outcome is None:
            reasons.append(f"backend endpoint {name!r} (id {pk}) has no usable target or key")
        elif not outcome.ok:
            reasons.append(f"backend endpoint {name!r} (id {pk}): its key was not accepted: {outcome.error}")
        else:
            break
    return reasons


def retarget_by_ip(pk: int) -> None:
    """The IP address a backend endpoint links to changed in IPAM (issue 39). Reached by that IP alone,
    the row's key is pending again (no key goes to the new address before it is verified there) and is
    verified after commit; as the failover address of a URL, the failover check runs before first use."""
    row = BackendEndpoint.objects.filter(pk=pk).first()
    if row is None or row.url:
        return
    BackendEndpoint.objects.filter(pk=pk).update(
        key_state=KeyStateChoices.PENDING, key_fingerprint="", key_proof=""
    )
    transaction.on_commit(lambda: configure_after_commit(pk))
