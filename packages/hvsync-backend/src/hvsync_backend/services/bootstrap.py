"""Bootstrap status and custom-field reconcile: NetBox-side setup hvsync depends on."""

from __future__ import annotations

from typing import Any

from hvsync_backend.context import BackendContext
from hvsync_backend.endpoints.service import aget_inventory_target
from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig
from hvsync_backend.inventory.errors import NetBoxError
from hvsync_backend.services.targets import load_targets
from hvsync_backend.sync.options import SyncOptions
from hvsync_backend.sync.run import MANAGED_TAG, StageAborted, SyncContext
from hvsync_backend.sync.support import custom_field_definitions, reconcile_custom_fields

PLUGIN_APP = "netbox_hvsync"


async def _nothing(event: str, data: dict[str, Any]) -> None:
    return None


async def check(netbox: NetBoxConfig) -> dict[str, Any]:
    """Read-only checks; `ok` false names every real problem."""
    problems: list[dict[str, Any]] = []
    report: dict[str, Any] = {"skipped": False, "inventory_url": netbox.url}
    async with NetBoxClient(netbox) as nb:
        try:
            status = await nb.get("status/")
            report["netbox_version"] = status.get("netbox-version")
            plugins = status.get("plugins") or {}
            report["plugin_installed"] = PLUGIN_APP in plugins
            report["plugin_version"] = plugins.get(PLUGIN_APP)
            if PLUGIN_APP not in plugins:
                problems.append(
                    {
                        "source": "netbox",
                        "status": None,
                        "detail": "the netbox_hvsync plugin is not installed",
                    }
                )
            fields: dict[str, Any] = {}
            for definition in custom_field_definitions():
                rows = await nb.list_all(
                    "extras/custom-fields",
                    {"name": definition["name"]},
                    fields=("id", "name", "object_types"),
                )
                have = set(rows[0].get("object_types") or []) if rows else set()
                missing = sorted(set(definition["object_types"]) - have)
                fields[definition["name"]] = {"present": bool(rows), "missing_object_types": missing}
                if not rows or missing:
                    problems.append(
                        {
                            "source": "netbox",
                            "status": None,
                            "detail": f"custom field {definition['name']} is "
                            + ("missing" if not rows else f"not enabled for {', '.join(missing)}"),
                        }
                    )
            report["custom_fields"] = fields
            types = await nb.list_all(
                "core/object-types", {"app_label": PLUGIN_APP}, fields=("id", "app_label", "model")
            )
            report["content_types"] = sorted(t.get("model") for t in types)
            if not types:
                problems.append(
                    {"source": "netbox", "status": None, "detail": "no netbox_hvsync content types in NetBox"}
                )
            tags = await nb.list_all("extras/tags", {"slug": MANAGED_TAG}, fields=("id", "slug"))
            report["managed_tag"] = bool(tags)
        except NetBoxError as exc:
            problems.append(exc.as_problem())
    report["ok"] = not problems
    report["problems"] = problems
    return report


async def status(context: BackendContext) -> dict[str, Any]:
    targets = await load_targets(context, None, None)
    if targets.netbox is None:
        existing = await aget_inventory_target(context.registry, enabled_only=False)
        if existing is None:  # SPEC 4.3: skipped only when the backend has no inventory endpoint of its own
            return {
                "ok": True,
                "skipped": True,
                "reason": "no_inventory_session",
                "detail": targets.netbox_missing_reason,
            }
        # one exists but cannot be used: a real problem the repair page must show, not a skip
        detail = (
            "the inventory endpoint is disabled" if not existing.enabled else targets.netbox_missing_reason
        )
        return {
            "ok": False,
            "skipped": False,
            "reason": "inventory_endpoint_unusable",
            "detail": detail,
            "problems": [{"source": "backend", "status": None, "detail": detail}],
        }
    report = await check(targets.netbox)
    report["hv_endpoints"] = len(targets.sources)
    return report


async def reconcile(context: BackendContext, options: SyncOptions) -> tuple[dict[str, Any], int]:
    targets = await load_targets(context, None, options.inventory_branch_schema_id)
    if targets.netbox is None:
        return {
            "ok": False,
            "skipped": True,
            "reason": "no_inventory_session",
            "detail": targets.netbox_missing_reason,
        }, 409
    async with NetBoxClient(targets.netbox) as nb:
        ctx = SyncContext(netbox=nb, sources=[], options=options, emit=_nothing)
        try:
            result = await reconcile_custom_fields(ctx)
        except StageAborted as exc:
            return {"ok": False, "error": exc.problem}, 502
        except NetBoxError as exc:
            code = 502 if exc.status is None or exc.status >= 500 else exc.status
            return {"ok": False, "error": exc.as_problem()}, code
    return {"ok": True, "dry_run": options.dry_run, "custom_fields": result}, 200
