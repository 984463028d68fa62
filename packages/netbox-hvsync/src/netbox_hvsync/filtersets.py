"""Filter sets for the REST API and list views (SPEC 4.4 names, NetBox lookups such as `__ic`, `__gte`).

The plugin's models, their sidecars, and the sync runs among NetBox's core jobs (`SyncJobFilterSet`, whose
sync-block filters run the SQL of `netbox_hvsync.querysets`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import django_filters
from core.filtersets import JobFilterSet
from dcim.models import Device, Site
from django import forms
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models as db_models
from django.db.models import Model, Q, QuerySet
from ipam.models import IPAddress
from netbox.filtersets import BaseFilterSet, NetBoxModelFilterSet
from tenancy.models import Tenant
from utilities.filters import ContentTypeFilter
from virtualization.models import Cluster, VirtualMachine

from netbox_hvsync import models
from netbox_hvsync.choices import (
    ApplyJobStatusChoices,
    BackupVerificationChoices,
    DeletionRequestStatusChoices,
    KeyStateChoices,
    RemoveJobChoices,
    ReplicationJobTypeChoices,
    SyncedStatusChoices,
    SyncTypeChoices,
    VmTypeChoices,
)
from netbox_hvsync.compat import JobUserFilterSet
from netbox_hvsync.querysets import (
    is_errored,
    matches_hv_endpoint,
    matches_sync_type,
    matches_value,
    matches_vm,
)
from netbox_hvsync.wire.numbers import decimal


class StorableLookups:
    """Filter values the database can compare, else a 400 naming the filter, never a 500 (both found by
    the REST fuzz run, in lookups NetBox generates for every field):
    - `null` is NULL where NULL can be compared (exact matches and their negation) and plain text for every
      other lookup: NetBox turns it into None for all of them, and a regex or partial match against None is
      a server error in Django (`status__regex=null` answered 500);
    - a date-time must carry a UTC offset PostgreSQL accepts (at most 15:59 either way; Python allows up to
      23:59, and `created=...+18:23` answered 500)."""

    NULL_AWARE = frozenset({"exact", "iexact", "in", "isnull"})
    TEXT_LOOKUPS = frozenset(
        {
            "icontains",
            "iexact",
            "istartswith",
            "iendswith",
            "contains",
            "startswith",
            "endswith",
            "regex",
            "iregex",
        }
    )

    @classmethod
    def get_filters(cls) -> dict[str, django_filters.Filter]:
        filters = super().get_filters()  # type: ignore[misc]
        for name in [n for n, item in filters.items() if cls._text_lookup_on_a_number(n, item)]:
            del filters[name]
        for item in filters.values():
            if getattr(item, "null_value", None) is not None and item.lookup_expr not in cls.NULL_AWARE:
                item.null_value = _NEVER_NULL
            if issubclass(getattr(item, "field_class", object), forms.DateTimeField):
                item.extra.setdefault("validators", []).append(storable_offset)
        return filters

    @classmethod
    def _text_lookup_on_a_number(cls, name: str, item: django_filters.Filter) -> bool:
        """NetBox gives a number field with choices (`token_version`) the text lookups of a choice field;
        PostgreSQL cannot run them (`text ~ bigint`: a 500). Such a field keeps its exact and `__n` filters."""
        if "__" not in name or item.lookup_expr not in cls.TEXT_LOOKUPS:
            return False
        model = getattr(getattr(cls, "_meta", None), "model", None)
        try:
            field = model._meta.get_field(item.field_name) if model is not None else None
        except FieldDoesNotExist:
            return False
        return isinstance(field, (db_models.IntegerField, db_models.FloatField, db_models.DecimalField))


_NEVER_NULL = object()  # a null_value no query string can equal
MAX_UTC_OFFSET = timedelta(hours=15, minutes=59)


def storable_offset(value: object) -> None:
    offset = value.utcoffset() if isinstance(value, datetime) else None
    if offset is not None and abs(offset) > MAX_UTC_OFFSET:
        raise ValidationError("The UTC offset must be between -15:59 and +15:59.")


#: At most this many values per filter in one query (`?id=1&id=2&...`); more is a 400 naming the filter.
#: Each value of a model filter is looked up on its own, so an unbounded list is an unbounded query count.
MAX_FILTER_VALUES = 100
#: The largest id PostgreSQL's bigint holds.
MAX_ID = 2**63 - 1
#: Lookups whose values are not numbers even on a number field.
NOT_NUMERIC_LOOKUPS = frozenset({"isnull", "empty"})
INTEGER_FIELDS = (db_models.IntegerField, db_models.AutoField)
#: NetBox's "no object" value of object filters (settings.FILTERS_NULL_CHOICE_VALUE).
NULL_MARKER = "null"


class StrictValues:
    """Integer filters take whole numbers in ASCII digits only, and no filter takes more than
    MAX_FILTER_VALUES values; anything else is a 400 naming the filter (before any value reaches a query).

    `inventory_vm_id=1E+5000` was a 500 and `=1.5` matched VM 1 (a decimal filter cut to an int); Python's
    `int()` also reads `1_0`, `+1` and Arabic-Indic or full-width digits, which Django's id fields took as ids. An
    integer filter is one on an integer column (its lookups too, except `isnull`/`empty`), a model filter
    keyed by an integer primary key, or a filter the set names in `integer_filters`."""

    integer_filters: frozenset[str] = frozenset()

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        self.refused: dict[str, str] = {}
        if data is not None and hasattr(data, "getlist"):
            data = self._screen(data)
        super().__init__(data, *args, **kwargs)  # type: ignore[call-arg]

    def _screen(self, data: Any) -> Any:
        filters = type(self).get_filters()  # type: ignore[attr-defined]
        for name in [n for n in data if n in filters]:
            values = data.getlist(name)
            if len(values) > MAX_FILTER_VALUES:
                self.refused[name] = (
                    f"At most {MAX_FILTER_VALUES} values per filter; {len(values)} were given."
                )
            elif self._is_integer(name, filters[name]):
                bad = [v for v in values if not self._whole_number(v, filters[name])]
                if bad:
                    self.refused[name] = (
                        f"Expected whole numbers (ASCII digits, 0 to {MAX_ID}); got {bad[0][:40]!r}."
                    )
        if self.refused:
            data = data.copy()
            for name in self.refused:
                del data[name]
        return data

    def _is_integer(self, name: str, item: django_filters.Filter) -> bool:
        if name in self.integer_filters:
            return True
        if item.lookup_expr in NOT_NUMERIC_LOOKUPS:
            return False
        if isinstance(item, (django_filters.ModelChoiceFilter, django_filters.ModelMultipleChoiceFilter)):
            queryset = item.extra.get("queryset")
            key = item.extra.get("to_field_name")
            model = getattr(queryset, "model", None)
            return model is not None and key is None and isinstance(model._meta.pk, INTEGER_FIELDS)
        model = getattr(getattr(self, "_meta", None), "model", None)
        try:
            field = model._meta.get_field(item.field_name) if model is not None else None
        except FieldDoesNotExist:
            return False
        return isinstance(field, INTEGER_FIELDS)

    @staticmethod
    def _whole_number(value: str, item: django_filters.Filter) -> bool:
        if value == "":
            return True  # an empty value is "not filtered", as NetBox reads it
        if value == NULL_MARKER and isinstance(item, django_filters.ModelMultipleChoiceFilter):
            return True  # NetBox's `null` of object filters: each filter says what it means
        return decimal(value, low=0, high=MAX_ID) is not None

    @property
    def errors(self) -> Any:
        errors = self.form.errors  # type: ignore[attr-defined]
        for name, message in self.refused.items():
            if name not in errors and name in self.form.fields:  # type: ignore[attr-defined]
                self.form.add_error(name, message)  # type: ignore[attr-defined]
        return self.form.errors  # type: ignore[attr-defined]

    def is_valid(self) -> bool:
        return bool(self.is_bound) and not self.errors  # type: ignore[attr-defined]


class HvsyncModelFilterSet(StrictValues, StorableLookups, NetBoxModelFilterSet):
    """Base of the plugin's model filter sets."""


class HvsyncFilterSet(StrictValues, StorableLookups, BaseFilterSet):
    """Base of the sidecar filter sets (no tags or custom fields)."""


def _related(model: type, field_name: str, label: str) -> django_filters.ModelMultipleChoiceFilter:
    return django_filters.ModelMultipleChoiceFilter(
        field_name=field_name, queryset=model.objects.all(), distinct=False, label=label
    )


def _search(queryset: QuerySet, value: str, *lookups: str) -> QuerySet:
    value = value.strip()
    if not value:
        return queryset
    condition = Q()
    for lookup in lookups:
        condition |= Q(**{f"{lookup}__icontains": value})
    return queryset.filter(condition)


class BackendEndpointFilterSet(HvsyncModelFilterSet):
    key_state = django_filters.MultipleChoiceFilter(choices=KeyStateChoices, distinct=False)

    class Meta:
        model = models.BackendEndpoint
        fields = ("id", "name", "enabled", "url", "port", "verify_ssl", "key_state", "key_fingerprint")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "url", "comments")


class InventoryEndpointFilterSet(HvsyncModelFilterSet):
    class Meta:
        model = models.InventoryEndpoint
        fields = ("id", "name", "scheme", "domain", "port", "token_version", "verify_ssl", "enabled")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "domain", "comments")


def gone_filter() -> django_filters.BooleanFilter:
    """`gone=true`: marked gone from Proxmox (`gone_since` set); `gone=false`: present."""
    return django_filters.BooleanFilter(
        field_name="gone_since", lookup_expr="isnull", exclude=True, label="Gone from Proxmox"
    )


class HvEndpointFilterSet(HvsyncModelFilterSet):
    site_id = _related(Site, "site", "Site (ID)")
    tenant_id = _related(Tenant, "tenant", "Tenant (ID)")
    ip_address_id = _related(IPAddress, "ip_address", "IP address (ID)")

    class Meta:
        model = models.HvEndpoint
        fields = (
            "id",
            "name",
            "domain",
            "port",
            "username",
            "token_name",
            "verify_ssl",
            "enabled",
            "timeout",
            "max_retries",
            "sync_mode_vm",
            "sync_mode_vm_template",
            "gone_policy",
            "gone_status",
            "auto_approve_deletions",
            "allow_template_builds",
            "template_build_grant_confirmed",
            "site",
            "tenant",
            "backend_id",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "domain", "username", "comments")


class HvClusterFilterSet(HvsyncModelFilterSet):
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    cluster_id = _related(Cluster, "cluster", "NetBox cluster (ID)")

    class Meta:
        model = models.HvCluster
        fields = ("id", "name", "endpoint", "cluster")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "cluster__name")


class HvNodeFilterSet(HvsyncModelFilterSet):
    cluster_id = _related(models.HvCluster, "cluster", "Proxmox cluster (ID)")
    endpoint_id = _related(models.HvEndpoint, "cluster__endpoint", "Proxmox endpoint (ID)")
    device_id = _related(Device, "device", "Device (ID)")

    class Meta:
        model = models.HvNode
        fields = ("id", "name", "node_id", "online", "cluster", "device")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "device__name")


class HvStorageFilterSet(HvsyncModelFilterSet):
    gone = gone_filter()
    cluster_id = _related(models.HvCluster, "cluster", "Proxmox cluster (ID)")
    endpoint_id = _related(models.HvEndpoint, "cluster__endpoint", "Proxmox endpoint (ID)")
    node_id = _related(models.HvNode, "nodes", "Proxmox node (ID)")

    class Meta:
        model = models.HvStorage
        fields = ("id", "name", "storage_type", "shared", "active", "enabled", "cluster")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "storage_type")


class HvBackupFilterSet(HvsyncModelFilterSet):
    gone = gone_filter()
    storage_id = _related(models.HvStorage, "storage", "Proxmox storage (ID)")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")
    verification_state = django_filters.MultipleChoiceFilter(
        choices=BackupVerificationChoices, distinct=False
    )

    class Meta:
        model = models.HvBackup
        fields = ("id", "volid", "vmid", "format", "protected", "storage", "virtual_machine", "ctime")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "volid", "notes", "virtual_machine__name")


class HvSnapshotFilterSet(HvsyncModelFilterSet):
    gone = gone_filter()
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")

    class Meta:
        model = models.HvSnapshot
        fields = ("id", "name", "parent", "vmstate", "virtual_machine", "snaptime")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "description", "virtual_machine__name")


class HvTaskHistoryFilterSet(HvsyncModelFilterSet):
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    node_id = _related(models.HvNode, "node", "Proxmox node (ID)")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")

    class Meta:
        model = models.HvTaskHistory
        fields = (
            "id",
            "upid",
            "task_type",
            "vmid",
            "user",
            "status",
            "endpoint",
            "node",
            "virtual_machine",
            "starttime",
            "endtime",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "upid", "task_type", "user", "status")


class BackupRoutineFilterSet(HvsyncModelFilterSet):
    gone = gone_filter()
    """SPEC 4.4: id, endpoint, job_id, enabled, node, storage, status, keep_*; node_id, storage_id; q."""

    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    node_id = _related(models.HvNode, "node", "Proxmox node (ID)")
    storage_id = _related(models.HvStorage, "storage", "Proxmox storage (ID)")
    status = django_filters.MultipleChoiceFilter(choices=SyncedStatusChoices, distinct=False)

    class Meta:
        model = models.BackupRoutine
        fields = (
            "id",
            "endpoint",
            "job_id",
            "enabled",
            "node",
            "storage",
            "status",
            "keep_last",
            "keep_daily",
            "keep_weekly",
            "keep_monthly",
            "keep_yearly",
            "keep_all",
            "schedule",
            "repeat_missed",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "job_id", "comment")


class ReplicationFilterSet(HvsyncModelFilterSet):
    gone = gone_filter()
    """SPEC 4.4: every listed field, virtual_machine_id, and q over id, VM name, target, comment, source."""

    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")
    hv_node_id = _related(models.HvNode, "hv_node", "Proxmox node (ID)")
    job_type = django_filters.MultipleChoiceFilter(choices=ReplicationJobTypeChoices, distinct=False)
    remove_job = django_filters.MultipleChoiceFilter(
        choices=RemoveJobChoices, distinct=False, null_value=None
    )
    status = django_filters.MultipleChoiceFilter(choices=SyncedStatusChoices, distinct=False)

    class Meta:
        model = models.Replication
        fields = (
            "id",
            "endpoint",
            "replication_id",
            "virtual_machine",
            "hv_node",
            "guest",
            "target",
            "job_type",
            "schedule",
            "disable",
            "source",
            "jobnum",
            "remove_job",
            "status",
            "rate",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(
            queryset, value, "replication_id", "virtual_machine__name", "target", "comment", "source"
        )


class DeletionRequestFilterSet(HvsyncModelFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=DeletionRequestStatusChoices, distinct=False)
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    kind = ContentTypeFilter(field_name="object_type", label="Kind of object (app_label.model)")

    class Meta:
        model = models.DeletionRequest
        fields = (
            "id",
            "status",
            "object_type",
            "object_id",
            "object_repr",
            "identity",
            "run_id",
            "job",
            "gone_since",
            "requested_by",
            "decided_by",
            "decided_at",
            "applied_at",
            "endpoint",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "object_repr", "identity", "reason", "comment")


class ApplyJobFilterSet(HvsyncModelFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=ApplyJobStatusChoices, distinct=False)
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")

    class Meta:
        model = models.ApplyJob
        fields = ("id", "status", "endpoint", "started", "finished")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "error")


#
# Sidecars
#


class SyncedObjectFilterSet(HvsyncFilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    gone = gone_filter()
    search_fields: tuple[str, ...] = ()

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, *self.search_fields)


class SyncedVirtualMachineFilterSet(SyncedObjectFilterSet):
    search_fields = ("node_name", "virtual_machine__name", "last_run_id")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")
    vm_type = django_filters.MultipleChoiceFilter(choices=VmTypeChoices, distinct=False)

    class Meta:
        model = models.SyncedVirtualMachine
        fields = ("id", "endpoint", "cluster", "node_name", "vmid", "vm_type", "is_template", "last_run_id")


class SyncedDeviceFilterSet(SyncedObjectFilterSet):
    search_fields = ("node_name", "device__name")
    device_id = _related(Device, "device", "Device (ID)")

    class Meta:
        model = models.SyncedDevice
        fields = ("id", "endpoint", "node", "node_name", "last_run_id")


class SyncedInterfaceFilterSet(SyncedObjectFilterSet):
    search_fields = ("key", "node_name")

    class Meta:
        model = models.SyncedInterface
        fields = ("id", "endpoint", "vm_interface", "interface", "vmid", "node_name", "key", "last_run_id")


class SyncedVirtualDiskFilterSet(SyncedObjectFilterSet):
    search_fields = ("key",)

    class Meta:
        model = models.SyncedVirtualDisk
        fields = ("id", "endpoint", "virtual_disk", "vmid", "key", "last_run_id")


class SyncedIPAddressFilterSet(SyncedObjectFilterSet):
    search_fields = ("address", "interface_key", "node_name")

    class Meta:
        model = models.SyncedIPAddress
        fields = (
            "id",
            "endpoint",
            "ip_address",
            "vmid",
            "node_name",
            "interface_key",
            "address",
            "last_run_id",
        )


class SyncedVLANFilterSet(SyncedObjectFilterSet):
    search_fields = ("zone", "vnet")

    class Meta:
        model = models.SyncedVLAN
        fields = ("id", "endpoint", "vlan", "zone", "vnet", "last_run_id")


class SyncedPrefixFilterSet(SyncedObjectFilterSet):
    search_fields = ("vnet", "subnet")

    class Meta:
        model = models.SyncedPrefix
        fields = ("id", "endpoint", "prefix", "vnet", "subnet", "last_run_id")


#
# Sync jobs (core Job rows with a sync block)
#


def chosen(value: list[Any]) -> list[Any]:
    """The objects of a model-choice filter's value: django-filter passes NetBox's `null` marker through
    with them (`node_id=null` reached the database as an id: a 500, found by the REST fuzz run). A run's
    endpoint scope is never null, so the marker selects nothing of its own."""
    return [item for item in value or () if isinstance(item, Model)]


class SyncJobFilterSet(StrictValues, JobFilterSet, JobUserFilterSet):
    """Every core job filter (user filters the same on every release) plus the sync-block filters of
    SPEC 4.4. Integer filters are strict and every filter takes at most MAX_FILTER_VALUES values
    (`StrictValues`)."""

    integer_filters = frozenset({"inventory_vm_id"})

    sync_type = django_filters.MultipleChoiceFilter(
        choices=SyncTypeChoices, method="filter_sync_type", label="Sync type"
    )
    hv_endpoint_id = django_filters.ModelMultipleChoiceFilter(
        queryset=models.HvEndpoint.objects.all(), method="filter_hv_endpoint", label="Proxmox endpoint (ID)"
    )
    cluster_id = django_filters.ModelMultipleChoiceFilter(
        queryset=models.HvCluster.objects.all(), method="filter_cluster", label="Proxmox cluster (ID)"
    )
    node_id = django_filters.ModelMultipleChoiceFilter(
        queryset=models.HvNode.objects.all(), method="filter_node", label="Proxmox node (ID)"
    )
    inventory_vm_id = django_filters.NumberFilter(method="filter_vm", label="Targeted virtual machine (ID)")
    run_id = django_filters.CharFilter(method="filter_run_id", label="Run id")
    batch_object_type = django_filters.CharFilter(
        method="filter_batch_object_type", label="Batch object type"
    )
    errored = django_filters.BooleanFilter(method="filter_errored", label="Errored")

    class Meta(JobFilterSet.Meta):
        pass

    def filter_sync_type(self, queryset: QuerySet, name: str, value: list[str]) -> QuerySet:
        return queryset.filter(matches_sync_type(value)) if value else queryset

    def filter_hv_endpoint(self, queryset: QuerySet, name: str, value: list[models.HvEndpoint]) -> QuerySet:
        value = chosen(value)
        return queryset.filter(matches_hv_endpoint(e.pk for e in value)) if value else queryset

    def filter_cluster(self, queryset: QuerySet, name: str, value: list[models.HvCluster]) -> QuerySet:
        value = chosen(value)
        if not value:
            return queryset
        return queryset.filter(matches_hv_endpoint(c.endpoint_id for c in value))

    def filter_node(self, queryset: QuerySet, name: str, value: list[models.HvNode]) -> QuerySet:
        value = chosen(value)
        if not value:
            return queryset
        endpoint_ids = models.HvCluster.objects.filter(nodes__in=value).values_list("endpoint_id", flat=True)
        return queryset.filter(matches_hv_endpoint(list(endpoint_ids)))

    def filter_vm(self, queryset: QuerySet, name: str, value: Any) -> QuerySet:
        return queryset if value is None else queryset.filter(matches_vm([int(value)]))

    def filter_run_id(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(matches_value("run_id", value)) if value else queryset

    def filter_batch_object_type(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if not value:
            return queryset
        return queryset.filter(matches_value("batch_object_type", value))

    def filter_errored(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.filter(is_errored()) if value else queryset.exclude(is_errored())
