"""netbox-hvsync: the NetBox plugin of hvsync.

`netbox_hvsync.rules` holds the SPEC's rules in plain Python and must import without NetBox, so the
PluginConfig is only defined when NetBox itself is importable.
"""

__version__ = "0.0.26.post7"

try:
    from netbox.plugins import PluginConfig
except ImportError:  # outside NetBox: only netbox_hvsync.rules is usable
    PluginConfig = None  # type: ignore[assignment,misc]

if PluginConfig is not None:
    from netbox_hvsync.queue import PLUGIN_QUEUE, SYNC_QUEUE

    class HvsyncConfig(PluginConfig):
        name = "netbox_hvsync"
        verbose_name = "hvsync"
        description = "Keeps NetBox true to Proxmox VE through the hvsync backend"
        version = __version__
        author = "hvsync"
        base_url = "hvsync"
        min_version = "4.5.8"
        max_version = "4.7.99"
        # RQ queue of the sync jobs, registered by NetBox as `netbox_hvsync.sync` (docs/plugin.md "Queue")
        queues = [PLUGIN_QUEUE]
        # hvsync_<model>[_list] queries in NetBox's /graphql/ (docs/plugin.md "GraphQL")
        graphql_schema = "graphql.schema.schema"
        default_settings: dict = {
            "encryption_key": "",
            "stream_read_timeout": 120,
            "queue": SYNC_QUEUE,
            # the apply path, POST /api/plugins/hvsync/change-sets/ (docs/apply-path.md)
            "change_sets": True,
        }

        def ready(self) -> None:
            super().ready()
            from netbox_hvsync import signal_receivers  # noqa: F401  (push on save, key adoption, deletion guard)

    config = HvsyncConfig
