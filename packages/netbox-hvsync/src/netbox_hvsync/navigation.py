"""The "hvsync" menu. The sync-state page is deliberately absent: it is reached from the home footer."""

from netbox.plugins import PluginMenu, PluginMenuButton, PluginMenuItem


def _item(model_name: str, label: str, add: bool = True) -> PluginMenuItem:
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
                _item("deletionrequest", "Deletion requests"),
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
