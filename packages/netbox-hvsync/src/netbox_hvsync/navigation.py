"""The "hvsync" menu. The sync-state page is deliberately absent: it is reached from the home footer."""

from django.db import DatabaseError
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString
from netbox.plugins import PluginMenu, PluginMenuButton, PluginMenuItem


def _deletion_requests_label() -> SafeString:
    """ "Deletion requests" with the count of pending ones as a badge; evaluated each time the menu renders
    (NetBox builds the menu once, so the label is lazy)."""
    from netbox_hvsync.models import DeletionRequest

    try:
        pending = DeletionRequest.objects.filter(status="pending").count()
    except DatabaseError:
        pending = 0
    if not pending:
        return format_html("{}", "Deletion requests")
    return format_html(
        'Deletion requests <span class="badge text-bg-warning ms-1" id="hvsync-pending-deletions" '
        'title="pending">{}</span>',
        pending,
    )


def _item(model_name: str, label: object, add: bool = True) -> PluginMenuItem:
    buttons = ()
    if add:
        buttons = (
            PluginMenuButton(
                link=f"plugins:netbox_hvsync:{model_name}_add",
                title="Add",
                icon_class="mdi mdi-plus-thick",
                permissions=[f"netbox_hvsync.add_{model_name}"],
            ),
        )
    return PluginMenuItem(
        link=f"plugins:netbox_hvsync:{model_name}_list",
        link_text=label,
        permissions=[f"netbox_hvsync.view_{model_name}"],
        buttons=buttons,
    )


menu = PluginMenu(
    label="hvsync",
    icon_class="mdi mdi-sync",
    groups=(
        (
            "Connections",
            (
                PluginMenuItem(link="plugins:netbox_hvsync:home", link_text="Overview"),
                PluginMenuItem(
                    link="plugins:netbox_hvsync:sync_schedule",
                    link_text="Schedule a sync",
                    permissions=["core.add_job", "netbox_hvsync.view_hvendpoint"],
                ),
                PluginMenuItem(
                    link="plugins:netbox_hvsync:sync_run_list",
                    link_text="Sync runs",
                    permissions=["core.view_job"],
                ),
                _item("backendendpoint", "Backend endpoints"),
                _item("inventoryendpoint", "Inventory endpoints"),
                _item("hvendpoint", "Proxmox endpoints"),
            ),
        ),
        (
            "Proxmox",
            (
                _item("hvcluster", "Clusters"),
                _item("hvnode", "Nodes"),
                _item("hvstorage", "Storage"),
                _item("hvbackup", "Backups"),
                _item("hvsnapshot", "Snapshots"),
                _item("hvtaskhistory", "Task history"),
                _item("backuproutine", "Backup routines"),
                _item("replication", "Replications"),
            ),
        ),
        (
            "Audit",
            (
                _item("deletionrequest", lazy(_deletion_requests_label, SafeString)()),
                _item("applyjob", "Apply jobs", add=False),
            ),
        ),
        (
            "Sync state",
            (
                _item("syncedvirtualmachine", "Synced VMs", add=False),
                _item("synceddevice", "Synced devices", add=False),
                _item("syncedinterface", "Synced interfaces", add=False),
                _item("syncedvirtualdisk", "Synced disks", add=False),
                _item("syncedipaddress", "Synced IP addresses", add=False),
                _item("syncedvlan", "Synced VLANs", add=False),
                _item("syncedprefix", "Synced prefixes", add=False),
            ),
        ),
    ),
)
