"""Turning the backend's endpoint registry into what a sync run needs: a NetBox config and hv sources."""

from __future__ import annotations

from dataclasses import dataclass

from hvsync_backend.context import BackendContext
from hvsync_backend.endpoints.service import aget_hv_targets, aget_inventory_target
from hvsync_backend.inventory.client import NetBoxConfig
from hvsync_backend.sync.proxmox import HvSource


@dataclass(frozen=True)
class RunTargets:
    netbox: NetBoxConfig | None
    sources: list[HvSource]
    netbox_missing_reason: str | None = None


async def load_targets(
    context: BackendContext, ids: tuple[int, ...] | None, branch: str | None
) -> RunTargets:
    """The inventory endpoint and the enabled hv endpoints in scope (raises UnknownHvEndpoints)."""
    inventory = await aget_inventory_target(context.registry)
    hv = await aget_hv_targets(context.registry, list(ids) if ids is not None else None)
    sources = [
        HvSource(
            backend_id=t.id,
            name=t.name,
            client=await context.proxmox.client_for(t),
            secrets=tuple(s for s in (t.password, t.token_value) if s),
            site_slug=t.site_slug,
        )
        for t in hv
    ]
    if inventory is None:
        return RunTargets(None, sources, "no enabled inventory endpoint is configured")
    auth = inventory.headers.get("Authorization")
    if not auth:
        return RunTargets(None, sources, "the inventory endpoint has no usable token")
    if not auth.isascii() or not auth.isprintable():  # stored before the API refused such tokens
        return RunTargets(None, sources, "the inventory endpoint's token is not ASCII; store it again")
    config = NetBoxConfig(
        url=inventory.url,
        auth_header=auth,
        verify_ssl=inventory.verify_ssl,
        branch_schema_id=branch,
        transport=context.netbox_transport,
        observer=context.metrics.observer("netbox"),
        apply_path=context.settings.netbox_apply_path,
        max_answer_bytes=context.settings.netbox_max_answer_bytes,
    )
    return RunTargets(config, sources)
