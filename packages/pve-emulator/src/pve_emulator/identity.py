"""Who is calling, and whether a user's or token's ``expire`` has passed: shared by the HTTP layer
(which authenticates) and the state model (which checks permissions), neither knowing the other."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Identity", "expired"]


def expired(expire: int | None, now: float) -> bool:
    """A user's or API token's ``expire`` (epoch seconds, 0 = never) has passed, as PVE checks it."""
    return bool(expire) and int(expire or 0) < now


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling: a user, optionally through one of its API tokens (``user@realm!name``)."""

    userid: str
    tokenid: str | None = None
    via: str = "ticket"

    @property
    def subject(self) -> str:
        return self.tokenid or self.userid
