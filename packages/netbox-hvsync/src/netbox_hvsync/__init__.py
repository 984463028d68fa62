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
    from netbox_hvsync.queue import PLUGIN_QUEUE
    from netbox_hvsync.rules import settings as plugin_settings

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
        # every setting, its type, default and range: netbox_hvsync.rules.settings (docs/plugin.md "Settings")
        default_settings: dict = plugin_settings.defaults()

        @classmethod
        def validate(cls, user_config: dict, netbox_version: str) -> None:
            """NetBox's checks (release range, defaults), then ours: an unknown key or a bad value in
            PLUGINS_CONFIG["netbox_hvsync"] stops NetBox at start-up with a message naming each one."""
            from django.core.exceptions import ImproperlyConfigured

            if isinstance(user_config, dict):  # NetBox's own checks need a dict; ours says what it got
                super().validate(user_config, netbox_version)
            found = plugin_settings.problems(user_config)
            if found:
                raise ImproperlyConfigured("netbox_hvsync: " + "; ".join(found))

        def ready(self) -> None:
            super().ready()
            from netbox_hvsync import (
                gone_marks,  # noqa: F401  (the gone policy on a sidecar's transition)
                signal_receivers,  # noqa: F401  (push on save, key adoption, deletion guard)
            )

    config = HvsyncConfig
