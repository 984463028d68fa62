"""Change-set writes: each batch is one change set on the plugin's apply path (one transaction in NetBox).

If NetBox refuses some objects of a set the whole set rolls back; the refused ones are reported and the
rest is sent again as a new set. A set whose answer never came is read back under its id before it is
sent again (the plugin answers a repeated id with the stored outcome), so it is never applied twice.
"""

from __future__ import annotations

from typing import Any

from hvsync_backend.inventory.apply_path import change_set, is_outcome
from hvsync_backend.inventory.batching import BatchSizer
from hvsync_backend.inventory.errors import NetBoxAuthError, NetBoxError, NetBoxHTTPError, NetBoxUnreachable
from hvsync_backend.inventory.transport import NetBoxTransport, summarise
from hvsync_backend.inventory.writes.base import item_error, timed
from hvsync_backend.wire import change_sets

__all__ = ["ChangeSetWrites"]


class ChangeSetWrites:
    """The apply-path write strategy (`WriteStrategy`): change sets through the client's transport."""

    def __init__(self, client: NetBoxTransport, sizer: BatchSizer) -> None:
        self.client = client
        self.sizer = sizer

    async def write(self, method: str, path: str, chunk: list[dict[str, Any]]) -> list[Any]:
        """One change set. If NetBox refuses some of its objects the whole set rolls back; the refused
        ones are reported and the rest is sent again as a new change set, so one bad object fails alone."""
        body = change_set(method, path, chunk)
        try:
            outcome = await timed(self.sizer, len(chunk), self._send(body, method, path))
        except NetBoxError as exc:
            error = item_error(exc, 0) if isinstance(exc, NetBoxHTTPError) else exc
            return [error] * len(chunk)
        if outcome.get("applied"):
            by_index = {int(r["index"]): r for r in outcome.get("results") or []}
            return [None if method == "DELETE" else {"id": by_index[i]["id"]} for i in range(len(chunk))]
        refused = {int(e["index"]): e for e in outcome.get("errors") or [] if isinstance(e, dict)}
        results: list[Any] = [None] * len(chunk)
        for i, refusal in refused.items():
            results[i] = self._refusal(refusal, path)
        rest = [i for i in range(len(chunk)) if i not in refused]
        if rest and refused:
            again = await self.write(method, path, [chunk[i] for i in rest])
            for i, answer in zip(rest, again, strict=True):
                results[i] = answer
        elif rest:  # refused without naming an object: report it on each
            failure = NetBoxHTTPError(
                "NetBox did not apply the change set and named no object", status=400, path=path
            )
            for i in rest:
                results[i] = failure
        return results

    async def _send(self, body: dict[str, Any], method: str, path: str) -> dict[str, Any]:
        """POST a change set; when no answer comes (or NetBox fails it with a 5xx), read back what landed
        under its id, and only if nothing did, send the same change set again (the plugin answers a
        repeated id with the stored outcome, so even a racing first attempt is not applied twice)."""
        route = f"{change_sets.ROUTE}/"
        first: NetBoxError | None = None
        for _attempt in range(2):
            try:
                answer = await self.client.request("POST", route, json=body, writes=(method, path))
                return dict(answer)
            except NetBoxHTTPError as exc:
                if is_outcome(exc.body):
                    return dict(exc.body)
                if (exc.status or 0) < 500:
                    raise
                first = first or exc
            except NetBoxUnreachable as exc:
                first = first or exc
            landed = await self._read_back(body["id"])
            if landed is not None:
                return landed
        assert first is not None
        raise first

    async def _read_back(self, set_id: str) -> dict[str, Any] | None:
        """The stored outcome of an applied change set, or None if nothing landed under `set_id`."""
        try:
            answer = await self.client.request("GET", f"{change_sets.ROUTE}/{set_id}/")
        except NetBoxError:
            return None
        return dict(answer) if is_outcome(answer) else None

    def _refusal(self, error: dict[str, Any], path: str) -> NetBoxHTTPError:
        status = int(error.get("status") or 400)
        body = self.client.redact(error.get("errors") or error.get("detail"))
        cls: type[NetBoxHTTPError] = NetBoxAuthError if status in (401, 403) else NetBoxHTTPError
        return cls(
            f"NetBox rejected the object ({status}): {summarise(body)}",
            status=status,
            body=body,
            path=f"/api/{path}/",
        )
