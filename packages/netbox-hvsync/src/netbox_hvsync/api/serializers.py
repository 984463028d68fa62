"""REST serializers: NetBox-style nested objects, choices as {value, label}, secrets write-only.

Each family lives in `api/serializers_/` (as NetBox's own apps keep theirs); this module re-exports them
all, because NetBox finds a model's serializer here by name (`<app>.api.serializers.<Model>Serializer`).
"""

from __future__ import annotations

from .serializers_.audit import ApplyJobSerializer, DeletionRequestSerializer
from .serializers_.base import (
    NETBOX_FEATURE_FIELDS,
    HvsyncModelSerializer,
    HvsyncSidecarSerializer,
    SecretFieldsMixin,
    StorableRelatedLookups,
    secret_field,
)
from .serializers_.endpoints import (
    BackendEndpointSerializer,
    HvEndpointSerializer,
    InventoryEndpointSerializer,
)
from .serializers_.proxmox import (
    BackupRoutineSerializer,
    HvBackupSerializer,
    HvClusterSerializer,
    HvNodeSerializer,
    HvSnapshotSerializer,
    HvStorageSerializer,
    HvTaskHistorySerializer,
    ReplicationSerializer,
)
from .serializers_.sidecars import (
    SIDECAR_COMMON,
    SyncedDeviceSerializer,
    SyncedInterfaceSerializer,
    SyncedIPAddressSerializer,
    SyncedPrefixSerializer,
    SyncedVirtualDiskSerializer,
    SyncedVirtualMachineSerializer,
    SyncedVLANSerializer,
)

__all__ = [
    "NETBOX_FEATURE_FIELDS",
    "SIDECAR_COMMON",
    "ApplyJobSerializer",
    "BackendEndpointSerializer",
    "BackupRoutineSerializer",
    "DeletionRequestSerializer",
    "HvBackupSerializer",
    "HvClusterSerializer",
    "HvEndpointSerializer",
    "HvNodeSerializer",
    "HvSnapshotSerializer",
    "HvStorageSerializer",
    "HvTaskHistorySerializer",
    "HvsyncModelSerializer",
    "HvsyncSidecarSerializer",
    "InventoryEndpointSerializer",
    "ReplicationSerializer",
    "SecretFieldsMixin",
    "StorableRelatedLookups",
    "SyncedDeviceSerializer",
    "SyncedIPAddressSerializer",
    "SyncedInterfaceSerializer",
    "SyncedPrefixSerializer",
    "SyncedVLANSerializer",
    "SyncedVirtualDiskSerializer",
    "SyncedVirtualMachineSerializer",
    "secret_field",
]
