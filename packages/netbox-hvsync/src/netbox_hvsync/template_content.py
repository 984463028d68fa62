"""Panels on NetBox's VM, device and cluster pages linking to the Proxmox records behind them, and the
"Sync run" button on NetBox's core job page of an hvsync sync job."""

from __future__ import annotations

from typing import Any

from core.models import Job
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from netbox.plugins import PluginTemplateExtension

from netbox_hvsync import models
from netbox_hvsync.querysets import sync_jobs

PANEL = "netbox_hvsync/inc/proxmox_panel.html"


def _link(obj: Any) -> SafeString | str:
    return format_html('<a href="{}">{}</a>', obj.get_absolute_url(), obj) if obj is not None else "—"


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
        rows: list[tuple[str, Any]] = []
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
        return rows


class DevicePanel(ProxmoxPanel):
    models = ["dcim.device"]

    def rows(self, obj: Any, user: Any) -> list[tuple[str, Any]]:
        nodes = list(
            models.HvNode.objects.restrict(user, "view").filter(device=obj).select_related("cluster")
        )
        state = models.SyncedDevice.objects.restrict(user, "view").filter(device=obj).first()
        rows: list[tuple[str, Any]] = []
        if nodes:
            rows.append(("Proxmox node", _links(nodes)))
            rows.append(("Proxmox cluster", _links([n.cluster for n in nodes])))
        if state is not None:
            rows.append(("Sync state", _link(state)))
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
    """Approve / Reject on a pending request's page, for users who may change it (four eyes: rules.deletion)."""

    models = ["netbox_hvsync.deletionrequest"]

    def buttons(self) -> str:
        obj = self.context["object"]
        user = self.context["request"].user
        if obj.status != "pending" or not user.has_perm("netbox_hvsync.change_deletionrequest", obj):
            return ""
        return self.render(
            "netbox_hvsync/inc/deletion_request_buttons.html", extra_context={"request_row": obj}
        )


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
