"""Wire data the hvsync backend and the NetBox plugin must agree on, loaded from `wire.json` beside it.

This folder (`contracts/wire/`) is the single source: `hvsync_backend/wire` and `netbox_hvsync/wire` are
symlinks to it, so both products ship the same data and the same code. It uses the standard library only
(the plugin has no dependencies of its own) and imports nothing of either product.

- `STAGES` / `STAGE_ROUTES` / `FULL_UPDATE_ROUTE`: the 13 staged-pipeline stages and their stream routes;
- `API_KEY_HEADER`: the header that carries the backend's service API key;
- `SUMMARY_COUNTS`: the counts of a stage's `complete` summary, in the order operators read them;
- `GONE_COUNTS`: the summary's counts of objects marked gone from Proxmox, returned, and deletion requests;
- `SELECTED_KINDS`: the selected-object (`/sync/individual/<kind>`) kinds, their routes and query names;
- `PLUGIN_API` / `PLUGIN_RECORDS`: the plugin's REST root and, for each record kind the backend writes
  there, its route and fields (the plugin's serializer, forms and pages list them; the backend reads them);
- `wire.keys`: the `hvsync_key` custom-field format;
- `wire.redaction`: the credential key list and the redaction both products apply;
- `wire.numbers`: whole numbers read from text (ASCII digits only, bounded);
- `wire.sse`: server-sent-event lines and events, as the stage streams' readers parse them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "API_KEY_HEADER",
    "DATA",
    "FULL_UPDATE_ROUTE",
    "GONE_COUNTS",
    "PLUGIN_API",
    "PLUGIN_RECORDS",
    "SELECTED_KINDS",
    "STAGES",
    "STAGE_ROUTES",
    "STAGE_SLUGS",
    "SUMMARY_COUNTS",
    "WIRE_VERSION",
    "PluginRecord",
    "SelectedKind",
    "StageRoute",
]


@dataclass(frozen=True, slots=True)
class StageRoute:
    """One stage of the staged pipeline: its slug (job data, plugin choices) and its stream route."""

    slug: str
    route: str
    title: str


@dataclass(frozen=True, slots=True)
class SelectedKind:
    """A selected-object sync kind: the backend route, the query names that name one object, and the
    plugin's object type (`app_label.model`) it is offered for (None: backend-only kinds)."""

    kind: str
    route: str
    query: tuple[str, ...]
    object_type: str | None


@dataclass(frozen=True, slots=True)
class PluginRecord:
    """A plugin record kind the backend writes: its REST route (`route` in the plugin's API, `path` from
    NetBox's API root), its fields in the SPEC's order (`fields`), and those of them only the plugin keeps
    (`plugin_only`: the backend neither reads nor writes them)."""

    name: str
    route: str
    fields: tuple[str, ...]
    plugin_only: tuple[str, ...]

    @property
    def path(self) -> str:
        """The route from NetBox's API root (`plugins/hvsync/<route>`), as the backend calls it."""
        return f"{PLUGIN_API}/{self.route}"

    @property
    def read_fields(self) -> tuple[str, ...]:
        """The fields the backend reads and writes: every field but the plugin's own."""
        return tuple(f for f in self.fields if f not in self.plugin_only)


def _load() -> Mapping[str, Any]:
    data: dict[str, Any] = json.loads(Path(__file__).with_name("wire.json").read_text(encoding="utf-8"))
    return MappingProxyType(data)


DATA: Mapping[str, Any] = _load()
WIRE_VERSION: int = int(DATA["version"])
STAGES: tuple[StageRoute, ...] = tuple(StageRoute(**stage) for stage in DATA["stages"])
STAGE_SLUGS: tuple[str, ...] = tuple(stage.slug for stage in STAGES)
STAGE_ROUTES: Mapping[str, str] = MappingProxyType({stage.slug: stage.route for stage in STAGES})
FULL_UPDATE_ROUTE: str = str(DATA["full_update_route"])
API_KEY_HEADER: str = str(DATA["api_key_header"])
SUMMARY_COUNTS: tuple[str, ...] = tuple(DATA["summary_counts"])
GONE_COUNTS: tuple[str, ...] = tuple(DATA.get("gone_counts", ()))
SELECTED_KINDS: Mapping[str, SelectedKind] = MappingProxyType(
    {
        item["kind"]: SelectedKind(item["kind"], item["route"], tuple(item["query"]), item["object_type"])
        for item in DATA["selected_objects"]
    }
)
PLUGIN_API: str = str(DATA["plugin_api"])
PLUGIN_RECORDS: Mapping[str, PluginRecord] = MappingProxyType(
    {
        item["name"]: PluginRecord(
            item["name"], item["route"], tuple(item["fields"]), tuple(item["plugin_only"])
        )
        for item in DATA["plugin_records"]
    }
)
