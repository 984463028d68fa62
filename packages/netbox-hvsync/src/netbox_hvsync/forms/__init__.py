"""UI forms by kind, as NetBox's own apps keep theirs: edit forms (`model_forms`), bulk edit
(`bulk_edit`), list filters (`filtersets`), and the fields and mixin they share (`fields`, `mixins`).

Every form is re-exported here (`from netbox_hvsync.forms import X`, `forms.X` in the views).
"""

from __future__ import annotations

from .bulk_edit import (
    BackendEndpointBulkEditForm,
    BackupRoutineBulkEditForm,
    EnabledBulkEditForm,
    HvEndpointBulkEditForm,
    InventoryEndpointBulkEditForm,
    ReplicationBulkEditForm,
    StatusBulkEditForm,
    simple_bulk_edit_form,
)
from .fields import KEEP_STORED, optional_field, secret_field
from .filtersets import (
    ApplyJobFilterForm,
    BackendEndpointFilterForm,
    BackupRoutineFilterForm,
    DeletionRequestFilterForm,
    HvBackupFilterForm,
    HvClusterFilterForm,
    HvEndpointFilterForm,
    HvNodeFilterForm,
    HvSnapshotFilterForm,
    HvStorageFilterForm,
    HvTaskHistoryFilterForm,
    InventoryEndpointFilterForm,
    ReplicationFilterForm,
    filter_form,
)
from .mixins import SecretsFormMixin
from .model_forms import (
    BackendEndpointForm,
    BackupRoutineForm,
    DeletionRequestForm,
    HvBackupForm,
    HvClusterForm,
    HvEndpointForm,
    HvNodeForm,
    HvSnapshotForm,
    HvStorageForm,
    HvTaskHistoryForm,
    InventoryEndpointForm,
    ReplicationForm,
)

__all__ = [
    "KEEP_STORED",
    "ApplyJobFilterForm",
    "BackendEndpointBulkEditForm",
    "BackendEndpointFilterForm",
    "BackendEndpointForm",
    "BackupRoutineBulkEditForm",
    "BackupRoutineFilterForm",
    "BackupRoutineForm",
    "DeletionRequestFilterForm",
    "DeletionRequestForm",
    "EnabledBulkEditForm",
    "HvBackupFilterForm",
    "HvBackupForm",
    "HvClusterFilterForm",
    "HvClusterForm",
    "HvEndpointBulkEditForm",
    "HvEndpointFilterForm",
    "HvEndpointForm",
    "HvNodeFilterForm",
    "HvNodeForm",
    "HvSnapshotFilterForm",
    "HvSnapshotForm",
    "HvStorageFilterForm",
    "HvStorageForm",
    "HvTaskHistoryFilterForm",
    "HvTaskHistoryForm",
    "InventoryEndpointBulkEditForm",
    "InventoryEndpointFilterForm",
    "InventoryEndpointForm",
    "ReplicationBulkEditForm",
    "ReplicationFilterForm",
    "ReplicationForm",
    "SecretsFormMixin",
    "StatusBulkEditForm",
    "filter_form",
    "optional_field",
    "secret_field",
    "simple_bulk_edit_form",
]
