"""Sync-job querysets over NetBox's core Job table, evaluated in PostgreSQL (SPEC 4.4 rules 1-5).

`sync_jobs()` narrows core Job rows to hvsync's sync runs; the `Q` builders are the sync-job filters
(`filtersets.SyncJobFilterSet` calls them). They translate the reference predicates of `netbox_hvsync.rules.job_filters` into SQL; a test runs both
over the same rows and requires identical answers.

A sync job is a core Job whose `data` carries a `sync` block (or, for very old rows, whose name starts
with `hvsync`). Each predicate is a `jsonb_path_exists` on `core_job.data` in strict, silent mode, so a
missing key, a JSON null or a value of the wrong type simply does not match (never an SQL error), and
`COALESCE(..., false)` keeps NULL out of negations.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from core.choices import JobStatusChoices
from core.models import Job
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from netbox_hvsync.choices import SYNC_TYPE_ALL

SYNC_JOB_NAME_PREFIX = "hvsync"
FAILED_STATUSES = (JobStatusChoices.STATUS_FAILED, JobStatusChoices.STATUS_ERRORED)


def json_path(path: str, variables: dict[str, Any] | None = None) -> Q:
    """True where the strict JSON path matches `core_job.data`; false (never NULL) otherwise."""
    sql = f'COALESCE(jsonb_path_exists("{Job._meta.db_table}"."data", %s::jsonpath, %s::jsonb, true), false)'
    return Q(RawSQL(sql, (path, json.dumps(variables or {})), output_field=BooleanField()))


def any_of(conditions: Iterable[Q]) -> Q:
    result = Q(pk__in=[])
    for condition in conditions:
        result |= condition
    return result


# `data["sync"]` when it is an object, else `data` itself (flat legacy rows), as rules.job_filters.sync_block
HAS_SYNC_OBJECT = 'strict $.sync ? (@.type() == "object")'


def in_block(rest: str, variables: dict[str, Any] | None = None) -> Q:
    """The strict path `rest` (starting at the block, e.g. `.run_id ? (...)`) matches the sync block."""
    has_sync = json_path(HAS_SYNC_OBJECT)
    return (has_sync & json_path(f"strict $.sync{rest}", variables)) | (
        ~has_sync & json_path(f"strict ${rest}", variables)
    )


# Python truthiness of a JSON value, as a path filter on `@`
TRUTHY = (
    '((@.type() == "string" && @ != "") || (@.type() == "array" && @.size() > 0) || '
    '(@.type() == "number" && @ != 0) || (@.type() == "boolean" && @ == true) || '
    '(@.type() == "object" && exists(@.*)))'
)
ID_EQUALS = "(@ == $n || @ == $s)"  # an id stored as a number or as its string form


def sync_jobs(queryset: QuerySet | None = None) -> QuerySet:
    """Core Job rows that are hvsync sync runs."""
    queryset = Job.objects.all() if queryset is None else queryset
    return queryset.filter(json_path(HAS_SYNC_OBJECT) | Q(name__startswith=SYNC_JOB_NAME_PREFIX))


def _id_list_contains(key: str, value: int) -> Q:
    """The id list at <block>.key (or a single id there) holds the value; rules.job_filters._int_list."""
    variables = {"n": value, "s": str(value)}
    return in_block(f".{key}[*] ? {ID_EQUALS}", variables) | in_block(
        f'.{key} ? (@.type() != "array" && {ID_EQUALS})', variables
    )


def _present(key: str) -> Q:
    """<block>.key is there and not null, [] or "" (what makes an endpoint list specific, rule 1)."""
    return in_block(
        f'.{key} ? (@.type() == "number" || @.type() == "boolean" || @.type() == "object" || '
        f'(@.type() == "array" && @.size() > 0) || (@.type() == "string" && @ != ""))'
    )


def _types_listed(key: str, wanted: Iterable[str]) -> Q:
    """<block>.key (a list or one string) names one of the wanted types."""
    return any_of(
        in_block(f".{key}[*] ? (@ == $v)", {"v": v})
        | in_block(f'.{key} ? (@.type() == "string" && @ == $v)', {"v": v})
        for v in wanted
    )


def _types_recorded(key: str) -> Q:
    """<block>.key names at least one type (a non-blank string, or a list with a non-blank entry)."""
    named = (
        '(@.type() == "string" && @ != "") || @.type() == "number" || @.type() == "boolean" || '
        '@.type() == "object" || @.type() == "array"'
    )
    return in_block(f".{key}[*] ? ({named})") | in_block(f'.{key} ? (@.type() == "string" && @ != "")')


def matches_sync_type(values: Iterable[str]) -> Q:
    """Rule 2: `all`, no types or an empty list match everything; the legacy key counts when the list is absent.

    Mirrors rules.job_filters.recorded_sync_types: `sync_types` when present and not null, else `sync_type`.
    """
    wanted = sorted(set(values) | {SYNC_TYPE_ALL})
    plural_present = in_block('.sync_types ? (@.type() != "null")')
    plural_listed = _types_listed("sync_types", wanted)
    plural_named = _types_recorded("sync_types")
    singular_listed = _types_listed("sync_type", wanted)
    singular_named = _types_recorded("sync_type")
    return (plural_present & (plural_listed | ~plural_named)) | (
        ~plural_present & (singular_listed | ~singular_named)
    )


def matches_hv_endpoint(endpoint_ids: Iterable[int]) -> Q:
    """Rule 1: an empty, absent or null endpoint list means every endpoint (a list of junk is not a wildcard)."""
    return ~_present("hv_endpoint_ids") | any_of(
        _id_list_contains("hv_endpoint_ids", e) for e in endpoint_ids
    )


def matches_vm(vm_ids: Iterable[int]) -> Q:
    """Rule 3: only runs that listed the VM; an empty list is not a wildcard."""
    return any_of(_id_list_contains("vm_ids", v) for v in vm_ids)


def matches_value(key: str, value: str) -> Q:
    return in_block(f".{key} ? (@ == $v)", {"v": value})


def is_errored() -> Q:
    """Rule 4: a failed/errored status, or recorded errors (rules.job_filters.is_errored)."""
    stage_failed = f"? (@.ok == false || exists(@.error ? {TRUTHY}) || exists(@.errors ? {TRUTHY}))"
    return (
        Q(status__in=FAILED_STATUSES)
        | in_block(f".errors ? {TRUTHY}")
        | in_block(f".error ? {TRUTHY}")
        | in_block(f".stages[*] {stage_failed}")
        | in_block(f'.stages ? (@.type() == "object").* {stage_failed}')
    )
