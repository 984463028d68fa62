"""Supporting NetBox objects a stage needs (site, manufacturer, roles, tags...): found by slug, created
when missing, never modified. Cached per run; in a dry run nothing is created (the id stays None).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from hvsync_backend.inventory.errors import NetBoxError
from hvsync_backend.sync.run import KEY_FIELD, MANAGED_TAG, StageAborted, SyncContext

#: Object types whose managed objects carry the identity key custom field.
KEY_OBJECT_TYPES = (
    "dcim.device",
    "dcim.interface",
    "virtualization.cluster",
    "virtualization.virtualmachine",
    "virtualization.virtualdisk",
    "virtualization.vminterface",
    "ipam.ipaddress",
    "ipam.vlan",
    "ipam.vlangroup",
    "ipam.prefix",
)


def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")
    return slug[:100] or "x"


#: what a lookup by slug reads: plain fields only, so the plugin's rows route may answer it (`flat`)
SUPPORT_FIELDS = ("id", "slug")


def prefetch_support(ctx: SyncContext, path: str, slugs: list[str]) -> None:
    """Start `ensure`'s lookups ahead of time (the same queries, so the run's cache answers them)."""
    for slug in slugs:
        if f"{path}:{slug}" not in ctx.lookups.support_ids:
            ctx.netbox.prefetch(path, {"slug": slug}, fields=SUPPORT_FIELDS, flat=True)


async def ensure(ctx: SyncContext, path: str, slug: str, create: dict[str, Any]) -> int | None:
    """The id of the object with `slug` at `path`, creating it with `create` if missing."""
    cache_key = f"{path}:{slug}"
    if cache_key in ctx.lookups.support_ids:
        return ctx.lookups.support_ids[cache_key]
    rows = await ctx.netbox.list_all(path, {"slug": slug}, fields=SUPPORT_FIELDS, flat=True)
    if rows:
        ctx.lookups.support_ids[cache_key] = int(rows[0]["id"])
        return ctx.lookups.support_ids[cache_key]
    if ctx.options.dry_run:
        ctx.plans.append({"action": "create", "kind": f"support {path}", "object": slug, "fields": create})
        ctx.lookups.support_ids[cache_key] = None
        return None
    [result] = await ctx.netbox.bulk_create(path, [{**create, "slug": slug}])
    if isinstance(result, NetBoxError):
        # A concurrent creator may have won; read again before failing.
        rows = await ctx.netbox.list_all(path, {"slug": slug}, fields=SUPPORT_FIELDS, flat=True)
        if not rows:
            raise StageAborted(result.as_problem(f"{path} {slug}"))
        ctx.lookups.support_ids[cache_key] = int(rows[0]["id"])
        return ctx.lookups.support_ids[cache_key]
    ctx.lookups.support_ids[cache_key] = int(result["id"])
    return ctx.lookups.support_ids[cache_key]


async def ensure_tags(ctx: SyncContext, names: set[str]) -> dict[str, str]:
    """Tag name -> slug for Proxmox tags (and the managed tag), creating missing tags."""
    wanted = {name: slugify(name) for name in names}
    missing = {slug for slug in wanted.values() if f"tag:{slug}" not in ctx.lookups.support_ids}
    if missing:
        rows = await ctx.netbox.list_all("extras/tags", fields=SUPPORT_FIELDS, flat=True)
        for row in rows:
            ctx.lookups.support_ids[f"tag:{row['slug']}"] = int(row["id"])
        to_create = [
            {"name": name, "slug": slug, "color": "2196f3" if slug == MANAGED_TAG else "9e9e9e"}
            for name, slug in wanted.items()
            if f"tag:{slug}" not in ctx.lookups.support_ids
        ]
        if to_create and not ctx.options.dry_run:
            results = await ctx.netbox.bulk_create("extras/tags", to_create)
            for body, result in zip(to_create, results, strict=True):
                if isinstance(result, NetBoxError):
                    await ctx.problem(
                        result.as_problem(f"tag {body['name']}"), f"tag {body['name']}: create failed"
                    )
                else:
                    ctx.lookups.support_ids[f"tag:{body['slug']}"] = int(result["id"])
    return wanted


def custom_field_definitions() -> list[dict[str, Any]]:
    """The custom fields hvsync needs in NetBox (identity key on every managed object type)."""
    return [
        {
            "name": KEY_FIELD,
            "label": "hvsync identity",
            "type": "text",
            "object_types": list(KEY_OBJECT_TYPES),
            "description": "Proxmox identity of an object hvsync manages (endpoint|kind|id). Do not edit.",
            "required": False,
            "ui_editable": "hidden",
            "search_weight": 0,
            "filter_logic": "exact",
        }
    ]


async def reconcile_custom_fields(ctx: SyncContext) -> dict[str, Any]:
    """Create or update hvsync's custom-field definitions; returns what it did per field."""
    result: dict[str, Any] = {}
    for definition in custom_field_definitions():
        rows = await ctx.netbox.list_all(
            "extras/custom-fields",
            {"name": definition["name"]},
            fields=("id", "name", "type", "object_types", "ui_editable", "filter_logic", "label"),
        )
        if not rows:
            if ctx.options.dry_run:
                result[definition["name"]] = "would_create"
                continue
            [created] = await ctx.netbox.bulk_create("extras/custom-fields", [definition])
            if isinstance(created, NetBoxError):
                raise StageAborted(created.as_problem(f"custom field {definition['name']}"))
            result[definition["name"]] = "created"
            continue
        row = rows[0]
        have_types = set(row.get("object_types") or [])
        changes: dict[str, Any] = {}
        if not set(definition["object_types"]) <= have_types:
            changes["object_types"] = sorted(have_types | set(definition["object_types"]))
        type_value = (
            row.get("type", {}).get("value") if isinstance(row.get("type"), dict) else row.get("type")
        )
        if type_value != definition["type"]:
            changes["type"] = definition["type"]
        if not changes:
            result[definition["name"]] = "unchanged"
            continue
        if ctx.options.dry_run:
            result[definition["name"]] = "would_update"
            continue
        [updated] = await ctx.netbox.bulk_update("extras/custom-fields", [{"id": row["id"], **changes}])
        if isinstance(updated, NetBoxError):
            raise StageAborted(updated.as_problem(f"custom field {definition['name']}"))
        result[definition["name"]] = "updated"
    return result


async def prepare(ctx: SyncContext) -> None:
    """Once per run: the identity custom field and the managed tag exist (checked side by side: neither
    depends on the other)."""
    if ctx.lookups.prepared:
        return
    await asyncio.gather(reconcile_custom_fields(ctx), ensure_tags(ctx, {MANAGED_TAG}))
    ctx.lookups.prepared = True
