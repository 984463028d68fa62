"""UI views: list, detail, edit, delete and bulk pages for every model, registered the NetBox way."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core.models import Job
from django.contrib import messages
from django.db import models as django_models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.views.generic import View
from netbox.object_actions import AddObject, BulkDelete, BulkEdit, BulkExport, DeleteObject, EditObject
from netbox.views import generic
from utilities.views import ConditionalLoginRequiredMixin, register_model_view

from netbox_hvsync import deletions, filtersets, forms, models, tables
from netbox_hvsync.backend.push import push_hv_by_pk
from netbox_hvsync.querysets import sync_jobs
from netbox_hvsync.rules.grants import touched_toggles
from netbox_hvsync.wire import PLUGIN_RECORDS
from netbox_hvsync.wire.numbers import decimal

from .deletion import BulkApprove, BulkReject

DETAIL_TEMPLATE = "netbox_hvsync/object_detail.html"
#: Sync runs listed on the home page, newest first (each links to its sync-run page).
RECENT_RUNS = 10


def render_value(instance: django_models.Model, name: str) -> SafeString | str:
    """One attribute as NetBox shows it: linked objects, yes/no marks, choice labels, JSON blocks."""
    model_field = instance._meta.get_field(name)
    value = getattr(instance, name)
    if model_field.many_to_many:
        items = list(value.all())
        return (
            mark_safe(", ".join(format_html('<a href="{}">{}</a>', i.get_absolute_url(), i) for i in items))
            or "—"
        )
    if value is None or value == "" or value == []:
        return mark_safe('<span class="text-muted">&mdash;</span>')
    if model_field.is_relation:
        url = getattr(value, "get_absolute_url", None)
        return format_html('<a href="{}">{}</a>', url(), value) if url else str(value)
    if isinstance(value, bool):
        icon, colour = ("check-bold", "success") if value else ("close-thick", "danger")
        return format_html('<span class="text-{}"><i class="mdi mdi-{}"></i></span>', colour, icon)
    if getattr(model_field, "choices", None):
        display = getattr(instance, f"get_{name}_display")()
        colour_getter = getattr(instance, f"get_{name}_color", None)
        colour = colour_getter() if colour_getter else None
        return format_html('<span class="badge text-bg-{}">{}</span>', colour or "secondary", display)
    if isinstance(model_field, django_models.JSONField):
        return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True))
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if hasattr(value, "isoformat"):
        return value.isoformat(timespec="seconds")
    return str(value)


@dataclass(frozen=True)
class ModelUI:
    """What the UI shows of one model; views and URLs are generated from it."""

    model: type
    table: type
    filterset: type
    detail_fields: tuple[str, ...]
    filterset_form: type | None = None
    form: type | None = None
    bulk_edit_form: type | None = None
    extra_rows: dict[str, str] = field(default_factory=dict)  # label -> instance attribute (properties)
    edit_view_base: type = generic.ObjectEditView
    list_actions: tuple[type, ...] = ()  # extra list-view bulk actions (deletion requests: approve/reject)
    list_view_base: type = generic.ObjectListView


def _detail_view(ui: ModelUI) -> type:
    def get_extra_context(self: Any, request: HttpRequest, instance: Any) -> dict[str, Any]:
        rows = [
            (instance._meta.get_field(n).verbose_name, render_value(instance, n)) for n in ui.detail_fields
        ]
        for label, attr in ui.extra_rows.items():
            value = getattr(instance, attr)
            rows.append((label, "Yes" if value is True else "No" if value is False else str(value)))
        return {"attributes": rows, "has_netbox_features": hasattr(instance, "tags")}

    actions = (EditObject, DeleteObject) if ui.form else (DeleteObject,)
    return type(
        f"{ui.model.__name__}View",
        (generic.ObjectView,),
        {
            "queryset": ui.model.objects.all(),
            "template_name": DETAIL_TEMPLATE,
            "actions": actions,
            "get_extra_context": get_extra_context,
        },
    )


def register_ui(ui: ModelUI) -> None:
    """Register list, detail, add/edit, delete, bulk edit and bulk delete views for one model."""
    model, name = ui.model, ui.model.__name__
    list_actions: tuple[type, ...] = (BulkExport, BulkDelete)
    if ui.form:
        list_actions = (AddObject, BulkExport, *((BulkEdit,) if ui.bulk_edit_form else ()), BulkDelete)
    list_actions = (*list_actions, *ui.list_actions)
    register_model_view(model, "list", path="", detail=False)(
        type(
            f"{name}ListView",
            (ui.list_view_base,),
            {
                "queryset": model.objects.all(),
                "table": ui.table,
                "filterset": ui.filterset,
                "filterset_form": ui.filterset_form,
                "actions": list_actions,
            },
        )
    )
    register_model_view(model)(_detail_view(ui))
    if ui.form:
        edit_view = type(
            f"{name}EditView", (ui.edit_view_base,), {"queryset": model.objects.all(), "form": ui.form}
        )
        register_model_view(model, "add", detail=False)(edit_view)
        register_model_view(model, "edit")(edit_view)
    register_model_view(model, "delete")(
        type(f"{name}DeleteView", (generic.ObjectDeleteView,), {"queryset": model.objects.all()})
    )
    if ui.bulk_edit_form:
        register_model_view(model, "bulk_edit", path="edit", detail=False)(
            type(
                f"{name}BulkEditView",
                (HvEndpointGuardedBulkEdit if model is models.HvEndpoint else generic.BulkEditView,),
                {
                    "queryset": model.objects.all(),
                    "filterset": ui.filterset,
                    "table": ui.table,
                    "form": ui.bulk_edit_form,
                },
            )
        )
    register_model_view(model, "bulk_delete", path="delete", detail=False)(
        type(
            f"{name}BulkDeleteView",
            (generic.BulkDeleteView,),
            {"queryset": model.objects.all(), "filterset": ui.filterset, "table": ui.table},
        )
    )


class HvEndpointGuardedBulkEdit(generic.BulkEditView):
    """Bulk edit is local-only (no push): it may not toggle enabled/template builds of a confirmed grant."""

    def _update_objects(self, form: Any, request: HttpRequest) -> Any:
        changed = [name for name in touched_toggles(form.cleaned_data) if form.cleaned_data[name] is not None]
        if changed:
            granted = models.HvEndpoint.objects.filter(
                pk__in=form.cleaned_data["pk"], template_build_grant_confirmed=True
            )
            for endpoint in granted.order_by("pk"):
                endpoint.check_bulk_toggle(changed)  # the refusal is rules.grants'
        return super()._update_objects(form, request)


class DeletionRequestListView(generic.ObjectListView):
    """Lists deletion requests; pending ones past their age are marked expired first (lazily, issue 40)."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        deletions.expire_stale()
        return super().get(request, *args, **kwargs)


class DeletionRequestEditView(generic.ObjectEditView):
    """The requester of a new deletion request is whoever files it; the decision is someone else's."""

    def alter_object(self, obj: Any, request: HttpRequest, url_args: Any, url_kwargs: Any) -> Any:
        if obj.pk is None:
            obj.requested_by = request.user
        return obj


ENDPOINT_CONNECTION = ("ip_address", "domain", "port", "verify_ssl")

MODEL_UIS: tuple[ModelUI, ...] = (
    ModelUI(
        models.BackendEndpoint,
        tables.BackendEndpointTable,
        filtersets.BackendEndpointFilterSet,
        (
            "name",
            "enabled",
            "url",
            "ip_address",
            "port",
            "verify_ssl",
            "key_state",
            "key_fingerprint",
            "comments",
        ),
        forms.BackendEndpointFilterForm,
        forms.BackendEndpointForm,
        forms.BackendEndpointBulkEditForm,
        {"API key stored": "has_token", "Key pending": "is_pending"},
    ),
    ModelUI(
        models.InventoryEndpoint,
        tables.InventoryEndpointTable,
        filtersets.InventoryEndpointFilterSet,
        (
            "name",
            "enabled",
            "scheme",
            *ENDPOINT_CONNECTION,
            "token_version",
            "token_key",
            "pushed_credential_fingerprint",
            "comments",
        ),
        forms.InventoryEndpointFilterForm,
        forms.InventoryEndpointForm,
        forms.InventoryEndpointBulkEditForm,
        {"API token stored": "has_token"},
    ),
    ModelUI(
        models.HvEndpoint,
        tables.HvEndpointTable,
        filtersets.HvEndpointFilterSet,
        (
            "name",
            "enabled",
            "site",
            "tenant",
            *ENDPOINT_CONNECTION,
            "username",
            "access_methods",
            "token_name",
            "timeout",
            "max_retries",
            "retry_backoff",
            "sync_mode_vm",
            "sync_mode_vm_template",
            "allow_template_builds",
            "template_build_grant_confirmed",
            "backend_id",
            "comments",
        ),
        forms.HvEndpointFilterForm,
        forms.HvEndpointForm,
        forms.HvEndpointBulkEditForm,
        {
            "Token secret stored": "has_token_value",
            "Password stored": "has_password",
            "Name at the backend": "backend_name",
        },
    ),
    ModelUI(
        models.HvCluster,
        tables.HvClusterTable,
        filtersets.HvClusterFilterSet,
        PLUGIN_RECORDS["cluster"].fields,
        forms.HvClusterFilterForm,
        forms.HvClusterForm,
        forms.simple_bulk_edit_form(models.HvCluster),
    ),
    ModelUI(
        models.HvNode,
        tables.HvNodeTable,
        filtersets.HvNodeFilterSet,
        PLUGIN_RECORDS["node"].fields,
        forms.HvNodeFilterForm,
        forms.HvNodeForm,
        forms.simple_bulk_edit_form(models.HvNode),
    ),
    ModelUI(
        models.HvStorage,
        tables.HvStorageTable,
        filtersets.HvStorageFilterSet,
        PLUGIN_RECORDS["storage"].fields,
        forms.HvStorageFilterForm,
        forms.HvStorageForm,
        forms.simple_bulk_edit_form(models.HvStorage),
    ),
    ModelUI(
        models.HvBackup,
        tables.HvBackupTable,
        filtersets.HvBackupFilterSet,
        PLUGIN_RECORDS["backup"].fields,
        forms.HvBackupFilterForm,
        forms.HvBackupForm,
        forms.simple_bulk_edit_form(models.HvBackup),
    ),
    ModelUI(
        models.HvSnapshot,
        tables.HvSnapshotTable,
        filtersets.HvSnapshotFilterSet,
        PLUGIN_RECORDS["snapshot"].fields,
        forms.HvSnapshotFilterForm,
        forms.HvSnapshotForm,
        forms.simple_bulk_edit_form(models.HvSnapshot),
    ),
    ModelUI(
        models.HvTaskHistory,
        tables.HvTaskHistoryTable,
        filtersets.HvTaskHistoryFilterSet,
        PLUGIN_RECORDS["task-history"].fields,
        forms.HvTaskHistoryFilterForm,
        forms.HvTaskHistoryForm,
        forms.simple_bulk_edit_form(models.HvTaskHistory),
    ),
    ModelUI(
        models.BackupRoutine,
        tables.BackupRoutineTable,
        filtersets.BackupRoutineFilterSet,
        models.BackupRoutine.spec_fields,
        forms.BackupRoutineFilterForm,
        forms.BackupRoutineForm,
        forms.BackupRoutineBulkEditForm,
    ),
    ModelUI(
        models.Replication,
        tables.ReplicationTable,
        filtersets.ReplicationFilterSet,
        models.Replication.spec_fields,
        forms.ReplicationFilterForm,
        forms.ReplicationForm,
        forms.ReplicationBulkEditForm,
    ),
    ModelUI(
        models.DeletionRequest,
        tables.DeletionRequestTable,
        filtersets.DeletionRequestFilterSet,
        (
            "endpoint",
            "object_type",
            "object_id",
            "object_repr",
            "identity",
            "run_id",
            "job",
            "reason",
            "gone_since",
            "status",
            "requested_by",
            "decided_by",
            "decided_at",
            "comment",
            "applied_at",
            "error",
        ),
        forms.DeletionRequestFilterForm,
        forms.DeletionRequestForm,
        edit_view_base=DeletionRequestEditView,
        list_actions=(BulkApprove, BulkReject),
        list_view_base=DeletionRequestListView,
    ),
    ModelUI(
        models.ApplyJob,
        tables.ApplyJobTable,
        filtersets.ApplyJobFilterSet,
        ("endpoint", "status", "started", "finished", "error", "plan", "result"),
        forms.ApplyJobFilterForm,
    ),
    ModelUI(
        models.SyncedVirtualMachine,
        tables.SyncedVirtualMachineTable,
        filtersets.SyncedVirtualMachineFilterSet,
        (
            "endpoint",
            "virtual_machine",
            "cluster",
            "node_name",
            "vmid",
            "vm_type",
            "is_template",
            "last_seen",
            "last_run_id",
        ),
    ),
    ModelUI(
        models.SyncedDevice,
        tables.SyncedDeviceTable,
        filtersets.SyncedDeviceFilterSet,
        ("endpoint", "device", "node", "node_name", "last_seen", "last_run_id"),
    ),
    ModelUI(
        models.SyncedInterface,
        tables.SyncedInterfaceTable,
        filtersets.SyncedInterfaceFilterSet,
        ("endpoint", "vm_interface", "interface", "vmid", "node_name", "key", "last_seen", "last_run_id"),
    ),
    ModelUI(
        models.SyncedVirtualDisk,
        tables.SyncedVirtualDiskTable,
        filtersets.SyncedVirtualDiskFilterSet,
        ("endpoint", "virtual_disk", "vmid", "key", "last_seen", "last_run_id"),
    ),
    ModelUI(
        models.SyncedIPAddress,
        tables.SyncedIPAddressTable,
        filtersets.SyncedIPAddressFilterSet,
        (
            "endpoint",
            "ip_address",
            "vmid",
            "node_name",
            "interface_key",
            "address",
            "last_seen",
            "last_run_id",
        ),
    ),
    ModelUI(
        models.SyncedVLAN,
        tables.SyncedVLANTable,
        filtersets.SyncedVLANFilterSet,
        ("endpoint", "vlan", "zone", "vnet", "last_seen", "last_run_id"),
    ),
    ModelUI(
        models.SyncedPrefix,
        tables.SyncedPrefixTable,
        filtersets.SyncedPrefixFilterSet,
        ("endpoint", "prefix", "vnet", "subnet", "last_seen", "last_run_id"),
    ),
)

for _ui in MODEL_UIS:
    register_ui(_ui)


def _selected_hv_endpoint(request: HttpRequest, wanted: str = "") -> models.HvEndpoint | None:
    """The dashboard's Proxmox endpoint: `hv_endpoint=<pk>`, else the first enabled one the user may view."""
    visible = models.HvEndpoint.objects.restrict(request.user, "view").filter(enabled=True).order_by("name")
    pk = decimal(wanted, low=1, high=2**63 - 1)
    if pk is not None:
        return visible.filter(pk=pk).first()
    return visible.first()


def _push_message(request: HttpRequest, endpoint: models.HvEndpoint, push: Any) -> None:
    """The push's outcome as a flash message: pushed (backend id), failed (redacted reason, status), or
    not pushed because no backend endpoint is usable."""
    if push is None:
        messages.warning(request, f"{endpoint.name}: not pushed: no usable backend endpoint")
    elif push.ok:
        suffix = f" (backend id {push.backend_id})" if push.backend_id is not None else ""
        messages.success(request, f"{endpoint.name}: pushed to the backend{suffix}")
    else:
        status = f" (HTTP {push.status})" if push.status else ""
        messages.error(request, f"{endpoint.name}: push failed: {push.error}{status}")


class HomeView(ConditionalLoginRequiredMixin, View):
    """The plugin's landing page (the dashboard): counts per record type, the selected Proxmox endpoint
    with a "Push now" button, and the way to the sync-state page.

    SPEC 4.5's opportunistic push ("viewing the dashboard pushes the selected hv endpoint") is the
    button: a GET has no side effect (a prefetch, a crawler or a reload never sends credentials), the
    push is a POST of the page's own form (CSRF-protected), for an enabled endpoint the user may view,
    answered with the outcome as a message and a redirect back to the page."""

    def post(self, request: HttpRequest) -> HttpResponse:
        selected = _selected_hv_endpoint(request, request.POST.get("hv_endpoint", ""))
        if selected is None:
            messages.error(request, "Nothing pushed: no enabled Proxmox endpoint you may view was selected")
            return redirect("plugins:netbox_hvsync:home")
        _push_message(request, selected, push_hv_by_pk(selected.pk))
        return redirect(f"{reverse('plugins:netbox_hvsync:home')}?hv_endpoint={selected.pk}")

    def get(self, request: HttpRequest) -> HttpResponse:
        selected = _selected_hv_endpoint(request, request.GET.get("hv_endpoint", ""))
        sections = []
        for ui in MODEL_UIS:
            opts = ui.model._meta
            if request.user.has_perm(f"{opts.app_label}.view_{opts.model_name}"):
                sections.append(
                    {
                        "label": opts.verbose_name_plural,
                        "url": f"plugins:netbox_hvsync:{opts.model_name}_list",
                        "count": ui.model.objects.restrict(request.user, "view").count(),
                    }
                )
        endpoints = models.HvEndpoint.objects.restrict(request.user, "view").filter(enabled=True)
        recent_runs = (
            list(sync_jobs(Job.objects.restrict(request.user, "view")).order_by("-created")[:RECENT_RUNS])
            if request.user.has_perm("core.view_job")
            else []
        )
        return render(
            request,
            "netbox_hvsync/home.html",
            {
                "sections": sections,
                "selected": selected,
                "endpoints": endpoints.order_by("name"),
                "recent_runs": recent_runs,
            },
        )
