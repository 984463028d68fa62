"""The plugin's UI views: object views of every model (`objects`), the four-eyes decision on deletion
requests (`deletion`), the sync schedule form (`schedule`), the repair page (`sync_state`), the sync-run
page (`sync_run`, what it shows: `run_report`) and the list of sync runs (`sync_run_list`).

Importing the package registers every model view (`register_model_view`), which `urls.py` then finds
through NetBox's `get_model_urls`.
"""

from .deletion import DeletionRequestBulkDecideView, DeletionRequestDecideView
from .objects import HomeView
from .schedule import SyncScheduleView
from .sync_run import SyncRunView
from .sync_run_list import SyncRunListView
from .sync_state import SyncStateView

__all__ = [
    "DeletionRequestBulkDecideView",
    "DeletionRequestDecideView",
    "HomeView",
    "SyncRunListView",
    "SyncRunView",
    "SyncScheduleView",
    "SyncStateView",
]
