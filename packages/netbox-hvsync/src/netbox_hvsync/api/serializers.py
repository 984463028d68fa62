"""REST serializers: NetBox-style nested objects, choices as {value, label}, secrets write-only.

Each family lives in `api/serializers_/` (as NetBox's own apps keep theirs); this module re-exports them
all (each `X as X`: an explicit re-export), because NetBox finds a model's serializer here by name
(`<app>.api.serializers.<Model>Serializer`).
"""

from __future__ import annotations

from .serializers_.audit import ApplyJobSerializer as ApplyJobSerializer
from .serializers_.audit import DeletionRequestSerializer as DeletionRequestSerializer
from .serializers_.base import NETBOX_FEATURE_FIELDS as NETBOX_FEATURE_FIELDS
from .serializers_.base import HvsyncModelSerializer as HvsyncModelSerializer
from .serializers_.base import HvsyncSidecarSerializer as HvsyncSidecarSerializer
from .serializers_.base import SecretFieldsMixin as SecretFieldsMixin
from .serializers_.base import StorableRelatedLookups as StorableRelatedLookups
from .serializers_.base import secret_field as secret_field
from .serializers_.endpoints import BackendEndpointSerializer as BackendEndpointSerializer
from .serializers_.endpoints import HvEndpointSerializer as HvEndpointSerializer
from .serializers_.endpoints import InventoryEndpointSerializer as InventoryEndpointSerializer
from .serializers_.proxmox import BackupRoutineSerializer as BackupRoutineSerializer
from .serializers_.proxmox import HvBackupSerializer as HvBackupSerializer
from .serializers_.proxmox import HvClusterSerializer as HvClusterSerializer
from .serializers_.proxmox import HvNodeSerializer as HvNodeSerializer
from .serializers_.proxmox import HvSnapshotSerializer as HvSnapshotSerializer
from .serializers_.proxmox import HvStorageSerializer as HvStorageSerializer
from .serializers_.proxmox import HvTaskHistorySerializer as HvTaskHistorySerializer
from .serializers_.proxmox import ReplicationSerializer as ReplicationSerializer
from .serializers_.sidecars import SIDECAR_COMMON as SIDECAR_COMMON
from .serializers_.sidecars import SyncedDeviceSerializer as SyncedDeviceSerializer
from .serializers_.sidecars import SyncedInterfaceSerializer as SyncedInterfaceSerializer
from .serializers_.sidecars import SyncedIPAddressSerializer as SyncedIPAddressSerializer
from .serializers_.sidecars import SyncedPrefixSerializer as SyncedPrefixSerializer
from .serializers_.sidecars import SyncedVirtualDiskSerializer as SyncedVirtualDiskSerializer
from .serializers_.sidecars import SyncedVirtualMachineSerializer as SyncedVirtualMachineSerializer
from .serializers_.sidecars import SyncedVLANSerializer as SyncedVLANSerializer
