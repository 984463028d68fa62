"""The confirmed template-build grant of an hv endpoint (SPEC 2.6): the one guard every path asks.

The plugin records the last effective template-build grant confirmed by a successful push. A failed
revocation leaves it true, which blocks local/model/UI/REST deletion and local-only bulk toggles until a
later normal save confirms the backend grant is false. The model, its queryset, the REST viewset and the
UI bulk views all ask `deletion_refusal` / `bulk_toggle_refusal`; pushes (the post-save hook and every
sync job's preflight) record the flag through `next_grant_confirmed`.
"""

from __future__ import annotations

from collections.abc import Collection

from .push import PushResult

GUARDED_TOGGLE_FIELDS = frozenset({"enabled", "allow_template_builds"})


def next_grant_confirmed(previous: bool, result: PushResult) -> bool:
    """The flag after a push: what the push confirmed, or unchanged when it confirmed nothing."""
    return previous if result.grant_confirmed is None else result.grant_confirmed


def endpoint_label(name: str) -> str:
    """How a refusal names the endpoint (the name is what the operator sees in lists and forms)."""
    return f"Proxmox endpoint {name!r}"


def deletion_refusal(grant_confirmed: bool, label: str) -> str | None:
    """Why deleting the endpoint is refused, or None when it may be deleted."""
    if not grant_confirmed:
        return None
    return (
        f"{label} cannot be deleted: the backend may still grant template builds for it. Save it with "
        "template builds disabled so a successful push confirms the revocation, then delete it."
    )


def touched_toggles(fields: Collection[str]) -> list[str]:
    """The guarded fields among `fields`, sorted (what a local-only bulk change would alter)."""
    return sorted(GUARDED_TOGGLE_FIELDS.intersection(fields))


def bulk_toggle_refusal(grant_confirmed: bool, label: str, fields: Collection[str]) -> str | None:
    """Local-only bulk edits of `enabled` / `allow_template_builds` are refused while the grant is confirmed
    true, because they would change the plugin row without revoking the backend grant."""
    touched = touched_toggles(fields)
    if not grant_confirmed or not touched:
        return None
    return (
        f"{label}: bulk change of {', '.join(touched)} refused while the backend grant of template builds is "
        "confirmed; enabled/allow_template_builds change only by editing the endpoint itself, so the change "
        "is pushed and the backend confirms the revocation"
    )
