"""Panels on NetBox's VM, device and cluster pages linking to the Proxmox records behind them, and the
"Sync run" button on NetBox's core job page of an hvsync sync job."""

from __future__ import annotations

from typing import Any

from core.models import Job
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timezone import localtime
from netbox.plugins import PluginTemplateExtension, get_plugin_config

from netbox_hvsync import models
from netbox_hvsync.querysets import sync_jobs
from netbox_hvsync.rules.deletions import (
    APPROVE_PERMISSION,
    APPROVED,
    OPEN_STATUSES,
    Decider,
    decision_refusal,
)

PANEL = "netbox_hvsync/inc/proxmox_panel.html"


def _link(obj: Any) -> SafeString | str:
    return format_html('<a href="{}">{}</a>', obj.get_absolute_url(), obj) if obj is not None else "—"


def gone_badge(state: Any) -> list[tuple[str, Any]]:
    """The "Gone from Proxmox since ..." row of a sync-state record marked gone (none while present)."""
    if state is None or state.gone_since is None:
        return []
    since = date_format(localtime(state.gone_since), "SHORT_DATETIME_FORMAT")
    badge = format_html(
        '<span class="badge text-bg-danger" id="hvsync-gone-badge">Gone from Proxmox since {}</span>', since
    )
    return [("Proxmox", badge)]


def _links(objects: list[Any]) -> SafeString | str:
    if not objects:
        return "—"
    return format_html(", ".join("{}" for _ in objects), *(_link(o) for o in objects))


class ProxmoxPanel(PluginTemplateExtension):
    """Renders only for users allowed to view the plugin's records, and only when there is something to show."""

    def rows(self, obj: Any, user: Any) -> list[tuple[str, Any]]:
        raise NotImplementedError

    def right_page(self) -> str:
        request = self.context["request"]
        rows = self.rows(self.context["object"], request.user)
        return self.render(PANEL, extra_context={"hvsync_rows": rows}) if rows else ""


class VirtualMachinePanel(ProxmoxPanel):
    models = ["virtualization.virtualmachine"]

    def rows(self, obj: Any, user: Any) -> list[tuple[str, Any]]:
        state = models.SyncedVirtualMachine.objects.restrict(user, "view").filter(virtual_machine=obj).first()
        rows: list[tuple[str, Any]] = gone_badge(state)
        if state is not None:
            rows += [
                ("Sync state", _link(state)),
                ("Proxmox endpoint", _link(state.endpoint)),
                ("VMID", state.vmid),
                ("Type", state.get_vm_type_display()),
                ("Node", state.node_name or "—"),
                ("Template", "Yes" if state.is_template else "No"),
            ]
        snapshots = list(models.HvSnapshot.objects.restrict(user, "view").filter(virtual_machine=obj)[:10])
        backups = list(models.HvBackup.objects.restrict(user, "view").filter(virtual_machine=obj)[:10])
        replications = list(
            models.Replication.objects.restrict(user, "view").filter(virtual_machine=obj)[:10]
        )
        if snapshots:
            rows.append(("Snapshots", _links(snapshots)))
        if backups:
            rows.append(("Backups", _links(backups)))
        if replications:
            rows.append(("Replications", _links(replications)))
        rows += deletion_request_rows(obj, user)
        return rows


class DevicePanel(ProxmoxPanel):
    models = ["dcim.device"]

    def rows(self, obj: Any, user: Any) -> list[tuple[str, Any]]:
        nodes = list(
            models.HvNode.objects.restrict(user, "view").filter(device=obj).select_related("cluster")
        )
        state = models.SyncedDevice.objects.restrict(user, "view").filter(device=obj).first()
        rows: list[tuple[str, Any]] = gone_badge(state)
        if nodes:
            rows.append(("Proxmox node", _links(nodes)))
            rows.append(("Proxmox cluster", _links([n.cluster for n in nodes])))
        if state is not None:
            rows.append(("Sync state", _link(state)))
        rows += deletion_request_rows(obj, user)
        return rows


class ClusterPanel(ProxmoxPanel):
    models = ["virtualization.cluster"]

    def rows(self, obj: Any, user: Any) -> list[tuple[str, Any]]:
        clusters = list(
            models.HvCluster.objects.restrict(user, "view").filter(cluster=obj).select_related("endpoint")
        )
        if not clusters:
            return []
        return [
            ("Proxmox cluster", _links(clusters)),
            ("Proxmox endpoint", _links([c.endpoint for c in clusters])),
        ]


class DeletionRequestButtons(PluginTemplateExtension):
    """Approve / Reject with a comment on a pending request's page, for users holding
    `approve_deletionrequest`; Approve is not offered to the requester (four eyes: rules.deletions)."""

    models = ["netbox_hvsync.deletionrequest"]

    def buttons(self) -> str:
        obj = self.context["object"]
        user = self.context["request"].user
        if obj.status != "pending" or not user.has_perm(APPROVE_PERMISSION):
            return ""
        refusal = decision_refusal(
            obj.status,
            obj.requested_by_id,
            Decider(user.pk, has_permission=True, is_superuser=user.is_superuser),
            APPROVED,
            allow_self_approval=bool(get_plugin_config("netbox_hvsync", "allow_self_approval")),
        )
        return self.render(
            "netbox_hvsync/inc/deletion_request_buttons.html",
            extra_context={"request_row": obj, "may_approve": refusal is None},
        )


def deletion_request_rows(obj: Any, user: Any) -> list[tuple[str, Any]]:
    """The object's open deletion request, linked from its page (issue 40)."""
    found = (
        models.DeletionRequest.objects.restrict(user, "view")
        .filter(
            object_type=ContentType.objects.get_for_model(obj),
            object_id=obj.pk,
            status__in=OPEN_STATUSES,
        )
        .first()
    )
    if found is None:
        return []
    link = format_html(
        '<a href="{}" id="hvsync-open-deletion-request">{} ({})</a>',
        found.get_absolute_url(),
        f"Deletion request {found.pk}",
        found.get_status_display(),
    )
    return [("Deletion request", link)]


class SyncRunButton(PluginTemplateExtension):
    """ "Sync run" on NetBox's core job page, for hvsync sync jobs only (the page the job has in the plugin)."""

    models = ["core.job"]

    def buttons(self) -> str:
        job = self.context["object"]
        if not sync_jobs(Job.objects.filter(pk=job.pk)).exists():
            return ""
        url = reverse("plugins:netbox_hvsync:sync_run", kwargs={"pk": job.pk})
        return format_html(
            '<a href="{}" class="btn btn-primary" id="hvsync-sync-run-link">'
            '<i class="mdi mdi-sync"></i> Sync run</a>',
            url,
        )


template_extensions = [VirtualMachinePanel, DevicePanel, ClusterPanel, DeletionRequestButtons, SyncRunButton]
