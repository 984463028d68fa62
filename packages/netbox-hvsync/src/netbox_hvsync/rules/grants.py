"""The confirmed template-build grant of an hv endpoint (SPEC 2.6).

The plugin records the last effective template-build grant confirmed by a successful push. A failed
revocation leaves it true, which blocks local/model/UI/REST deletion and local-only bulk toggles until a
later normal save confirms the backend grant is false.
"""

from __future__ import annotations

from collections.abc import Collection

from .push import PushResult

GUARDED_TOGGLE_FIELDS = frozenset({"enabled", "allow_template_builds"})


def next_grant_confirmed(previous: bool, result: PushResult) -> bool:
    """The flag after a push: what the push confirmed, or unchanged when it confirmed nothing."""
    return previous if result.grant_confirmed is None else result.grant_confirmed


def deletion_refusal(grant_confirmed: bool, label: str) -> str | None:
    """Why deleting the endpoint is refused, or None when it may be deleted."""
    if not grant_confirmed:
        return None
    return (
        f"{label} cannot be deleted: the backend may still grant template builds for it. Save it with "
        "template builds disabled so a successful push confirms the revocation, then delete it."
    )


def bulk_toggle_refusal(grant_confirmed: bool, label: str, fields: Collection[str]) -> str | None:
    """Local-only bulk edits of `enabled` / `allow_template_builds` are refused while the grant is confirmed
    true, because they would change the plugin row without revoking the backend grant."""
    touched = sorted(GUARDED_TOGGLE_FIELDS.intersection(fields))
    if not grant_confirmed or not touched:
        return None
    return (
        f"{label}: bulk change of {', '.join(touched)} refused while the backend grant of template builds is "
        "confirmed; edit the endpoint itself so the change is pushed"
    )
