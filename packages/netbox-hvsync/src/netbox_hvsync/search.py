"""Entries of the plugin's records in NetBox's global search (loaded by PluginConfig as `search.indexes`)."""

from netbox.search import SearchIndex

from netbox_hvsync import models


class InventoryEndpointIndex(SearchIndex):
    model = models.InventoryEndpoint
    fields = (("name", 100), ("domain", 300), ("comments", 5000))
    display_attrs = ("domain", "port")


class HvEndpointIndex(SearchIndex):
    model = models.HvEndpoint
    fields = (("name", 100), ("domain", 300), ("username", 500), ("comments", 5000))
    display_attrs = ("domain", "port", "username", "site")


class HvClusterIndex(SearchIndex):
    model = models.HvCluster
    fields = (("name", 100),)
    display_attrs = ("endpoint", "cluster")


class HvNodeIndex(SearchIndex):
    model = models.HvNode
    fields = (("name", 100),)
    display_attrs = ("cluster", "device")


class HvStorageIndex(SearchIndex):
    model = models.HvStorage
    fields = (("name", 100), ("storage_type", 500))
    display_attrs = ("cluster", "storage_type")


class BackupRoutineIndex(SearchIndex):
    model = models.BackupRoutine
    fields = (("job_id", 100), ("comment", 500))
    display_attrs = ("endpoint", "schedule", "status")


class ReplicationIndex(SearchIndex):
    model = models.Replication
    fields = (("replication_id", 100), ("target", 300), ("source", 300), ("comment", 500))
    display_attrs = ("virtual_machine", "source", "target", "status")


# The backend endpoint (a singleton) is not indexed: indexing adds an on-commit callback to its save,
# which the key-adoption tests count exactly.
indexes = [
    InventoryEndpointIndex,
    HvEndpointIndex,
    HvClusterIndex,
    HvNodeIndex,
    HvStorageIndex,
    BackupRoutineIndex,
    ReplicationIndex,
]
