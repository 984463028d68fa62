"""REST routes of the plugin (mounted by NetBox at /api/plugins/hvsync/)."""

from django.urls import path
from netbox.api.routers import NetBoxRouter

from . import change_sets, rows, sync_views, views

app_name = "netbox_hvsync-api"

router = NetBoxRouter()
router.APIRootView = views.HvsyncRootView
router.register("backend-endpoints", views.BackendEndpointViewSet)
router.register("inventory-endpoints", views.InventoryEndpointViewSet)
router.register("hv-endpoints", views.HvEndpointViewSet)
router.register("clusters", views.HvClusterViewSet)
router.register("nodes", views.HvNodeViewSet)
router.register("storage", views.HvStorageViewSet)
router.register("backups", views.HvBackupViewSet)
router.register("snapshots", views.HvSnapshotViewSet)
router.register("task-history", views.HvTaskHistoryViewSet)
router.register("backup-routines", views.BackupRoutineViewSet)
router.register("replications", views.ReplicationViewSet)
router.register("deletion-requests", views.DeletionRequestViewSet)
router.register("apply-jobs", views.ApplyJobViewSet)
router.register("sync-jobs", views.SyncJobViewSet, basename="syncjob")
router.register("synced-virtual-machines", views.SyncedVirtualMachineViewSet)
router.register("synced-devices", views.SyncedDeviceViewSet)
router.register("synced-interfaces", views.SyncedInterfaceViewSet)
router.register("synced-virtual-disks", views.SyncedVirtualDiskViewSet)
router.register("synced-ip-addresses", views.SyncedIPAddressViewSet)
router.register("synced-vlans", views.SyncedVLANViewSet)
router.register("synced-prefixes", views.SyncedPrefixViewSet)

urlpatterns = [
    path("sync/schedule/", sync_views.SyncScheduleView.as_view(), name="sync-schedule"),
    path("change-sets/", change_sets.ChangeSetView.as_view(), name="change-sets"),
    path("change-sets/<uuid:pk>/", change_sets.ChangeSetOutcomeView.as_view(), name="change-set"),
    path("rows/<path:path>/", rows.RowsView.as_view(), name="rows"),
    path("jobs/<int:pk>/cancel/", sync_views.JobCancelView.as_view(), name="job-cancel"),
    *router.urls,
]
