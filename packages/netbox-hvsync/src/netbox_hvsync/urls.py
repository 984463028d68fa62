"""UI routes under /plugins/hvsync/ (views are generated per model in views.objects.MODEL_UIS)."""

from django.urls import include, path
from utilities.urls import get_model_urls

from .views import (
    DeletionRequestBulkDecideView,
    DeletionRequestDecideView,
    HomeView,
    SyncRunListView,
    SyncRunView,
    SyncScheduleView,
    SyncStateView,
)

ROUTES = (
    ("backend-endpoints", "backendendpoint"),
    ("inventory-endpoints", "inventoryendpoint"),
    ("hv-endpoints", "hvendpoint"),
    ("clusters", "hvcluster"),
    ("nodes", "hvnode"),
    ("storage", "hvstorage"),
    ("backups", "hvbackup"),
    ("snapshots", "hvsnapshot"),
    ("task-history", "hvtaskhistory"),
    ("backup-routines", "backuproutine"),
    ("replications", "replication"),
    ("deletion-requests", "deletionrequest"),
    ("apply-jobs", "applyjob"),
    ("synced-virtual-machines", "syncedvirtualmachine"),
    ("synced-devices", "synceddevice"),
    ("synced-interfaces", "syncedinterface"),
    ("synced-virtual-disks", "syncedvirtualdisk"),
    ("synced-ip-addresses", "syncedipaddress"),
    ("synced-vlans", "syncedvlan"),
    ("synced-prefixes", "syncedprefix"),
)

urlpatterns = [
    path("", HomeView.as_view(), name="home"),
    path(
        "deletion-requests/approve/",
        DeletionRequestBulkDecideView.as_view(decision="approved"),
        name="deletionrequest_bulk_approve",
    ),
    path(
        "deletion-requests/reject/",
        DeletionRequestBulkDecideView.as_view(decision="rejected"),
        name="deletionrequest_bulk_reject",
    ),
    path("sync-state/", SyncStateView.as_view(), name="sync_state"),
    path("sync/schedule/", SyncScheduleView.as_view(), name="sync_schedule"),
    path("sync-runs/", SyncRunListView.as_view(), name="sync_run_list"),
    path("sync-runs/<int:pk>/", SyncRunView.as_view(), name="sync_run"),
    path(
        "deletion-requests/<int:pk>/approve/",
        DeletionRequestDecideView.as_view(decision="approved"),
        name="deletionrequest_approve",
    ),
    path(
        "deletion-requests/<int:pk>/reject/",
        DeletionRequestDecideView.as_view(decision="rejected"),
        name="deletionrequest_reject",
    ),
]
for prefix, model_name in ROUTES:
    urlpatterns += [
        path(f"{prefix}/", include(get_model_urls("netbox_hvsync", model_name, detail=False))),
        path(f"{prefix}/<int:pk>/", include(get_model_urls("netbox_hvsync", model_name))),
    ]
