"""`/plugins/hvsync/sync-runs/`: NetBox's job list narrowed to hvsync sync runs, each linking to its run page.

Built on `core.views.JobListView` (the same class on NetBox 4.5, 4.6 and 4.7), so the permission
(`core.view_job`, object permissions narrowing the rows), paging, column configuration and the filter tab
behave as on NetBox's own job list. Rows are filtered with the REST list's `SyncJobFilterSet`
(`filtersets.py`, its SQL in `querysets.py`); the run's mode, scope and stage count are read in SQL from the
`data` block (the list still defers `data` itself, which can be large). Jobs are queued from "Schedule a
sync", never added, imported or edited here.
"""

from __future__ import annotations

from typing import Any

import django_tables2 as tables
from core.forms import JobFilterForm
from core.models import Job
from core.tables import JobTable
from core.views import JobListView
from django import forms
from django.db.models import IntegerField, JSONField, QuerySet, TextField
from django.db.models.expressions import RawSQL
from netbox.tables import columns
from utilities.forms import BOOLEAN_WITH_BLANK_CHOICES
from utilities.forms.rendering import FieldSet

from netbox_hvsync.choices import SyncTypeChoices
from netbox_hvsync.filtersets import SyncJobFilterSet
from netbox_hvsync.querysets import sync_jobs

_DATA = f'"{Job._meta.db_table}"."data"'
# the `sync` block when it is an object, else `data` itself (flat legacy rows), as querysets.in_block
_BLOCK = f"(CASE WHEN jsonb_typeof({_DATA} -> 'sync') = 'object' THEN {_DATA} -> 'sync' ELSE {_DATA} END)"
_STAGES = f"({_BLOCK} -> 'stages')"
_ENDPOINTS = f"({_BLOCK} -> 'hv_endpoint_ids')"
# `->` on a missing key, an array or a scalar gives NULL (never an error), so junk rows show as blanks
MODE_SQL = f"CASE WHEN jsonb_typeof({_BLOCK} -> 'mode') = 'string' THEN {_BLOCK} ->> 'mode' END"
TYPES_SQL = f"COALESCE(NULLIF({_BLOCK} -> 'sync_types', 'null'::jsonb), {_BLOCK} -> 'sync_type')"
STAGE_COUNT_SQL = (
    f"CASE jsonb_typeof({_STAGES}) WHEN 'array' THEN jsonb_array_length({_STAGES}) "
    f"WHEN 'object' THEN (SELECT count(*) FROM jsonb_object_keys({_STAGES})) END"
)
ENDPOINT_COUNT_SQL = (
    f"CASE WHEN jsonb_typeof({_ENDPOINTS}) = 'array' THEN jsonb_array_length({_ENDPOINTS}) ELSE 0 END"
)


def sync_run_rows() -> QuerySet:
    """The hvsync sync jobs with the few `data` fields the table shows."""
    return sync_jobs(Job.objects.defer("data").select_related("user")).annotate(
        sync_mode=RawSQL(MODE_SQL, (), output_field=TextField()),
        sync_types=RawSQL(TYPES_SQL, (), output_field=JSONField()),
        stage_count=RawSQL(STAGE_COUNT_SQL, (), output_field=IntegerField()),
        endpoint_count=RawSQL(ENDPOINT_COUNT_SQL, (), output_field=IntegerField()),
    )


def scope_text(types: Any, endpoint_count: int | None) -> str:
    """`all on every endpoint`, `vms, storage on 2 endpoints`: the run's stages and endpoints in one cell."""
    if isinstance(types, str):
        types = [types]
    names = [str(t) for t in types or () if t not in (None, "")] or ["all"]
    count = endpoint_count or 0
    where = "every endpoint" if count == 0 else f"{count} endpoint{'s' if count != 1 else ''}"
    return f"{', '.join(names)} on {where}"


class SyncRunTable(JobTable):
    """Core's job table with the id and name leading to the sync-run page instead of the core job page."""

    id = tables.Column(verbose_name="ID", linkify=("plugins:netbox_hvsync:sync_run", [tables.A("pk")]))
    name = tables.Column(verbose_name="Name", linkify=("plugins:netbox_hvsync:sync_run", [tables.A("pk")]))
    user = tables.Column(verbose_name="Queued by")
    sync_mode = tables.Column(verbose_name="Mode", default="staged")
    scope = tables.Column(verbose_name="Scope", accessor=tables.A("pk"), orderable=False)
    stage_count = tables.Column(verbose_name="Stages")
    actions = columns.ActionsColumn(actions=())

    class Meta(JobTable.Meta):
        fields = (*JobTable.Meta.fields, "sync_mode", "scope", "stage_count")
        default_columns = (
            "id",
            "name",
            "status",
            "sync_mode",
            "scope",
            "stage_count",
            "user",
            "created",
            "started",
            "completed",
        )

    def render_scope(self, record: Job) -> str:
        return scope_text(getattr(record, "sync_types", None), getattr(record, "endpoint_count", 0))

    def value_scope(self, record: Job) -> str:
        return self.render_scope(record)


class SyncRunFilterForm(JobFilterForm):
    """Core's job filters plus the sync-block ones the filterset knows."""

    fieldsets = (
        *JobFilterForm.fieldsets,
        FieldSet("sync_type", "errored", name="Sync"),
    )
    sync_type = forms.MultipleChoiceField(label="Sync type", choices=SyncTypeChoices, required=False)
    errored = forms.NullBooleanField(
        label="Errored", required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES)
    )


class SyncRunListView(JobListView):
    queryset = sync_run_rows()
    filterset = SyncJobFilterSet
    filterset_form = SyncRunFilterForm
    table = SyncRunTable
    template_name = "netbox_hvsync/sync_run_list.html"
    actions = ()
