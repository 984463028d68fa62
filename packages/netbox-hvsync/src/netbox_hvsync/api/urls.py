"""REST routes of the plugin (mounted by NetBox at /api/plugins/hvsync/)."""

from django.urls import path
from netbox.api.routers import NetBoxRouter

from netbox_hvsync.wire import PLUGIN_RECORDS

from . import change_sets, rows, sync_views, views

app_name = "netbox_hvsync-api"

router = NetBoxRouter()
router.APIRootView = views.HvsyncRootView
router.register("backend-endpoints", views.BackendEndpointViewSet)
router.register("inventory-endpoints", views.InventoryEndpointViewSet)
router.register("hv-endpoints", views.HvEndpointViewSet)
router.register(PLUGIN_RECORDS["cluster"].route, views.HvClusterViewSet)
router.register(PLUGIN_RECORDS["node"].route, views.HvNodeViewSet)
router.register(PLUGIN_RECORDS["storage"].route, views.HvStorageViewSet)
router.register(PLUGIN_RECORDS["backup"].route, views.HvBackupViewSet)
router.register(PLUGIN_RECORDS["snapshot"].route, views.HvSnapshotViewSet)
router.register(PLUGIN_RECORDS["task-history"].route, views.HvTaskHistoryViewSet)
router.register(PLUGIN_RECORDS["backup-routine"].route, views.BackupRoutineViewSet)
router.register(PLUGIN_RECORDS["replication"].route, views.ReplicationViewSet)
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
