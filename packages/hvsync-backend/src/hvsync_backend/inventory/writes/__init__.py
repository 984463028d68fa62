"""The NetBox client's write strategies, one module each, behind one interface (`base.WriteStrategy`).

`rest.py` sends each batch as a REST list request (one transaction per object in NetBox); `change_sets.py`
sends it as one change set to the plugin's apply path (one transaction). The client picks one per list
path and drives its batches (`NetBoxClient._bulk`); a further writer is a further module here.
"""

from hvsync_backend.inventory.writes.base import WriteStrategy
from hvsync_backend.inventory.writes.change_sets import ChangeSetWrites
from hvsync_backend.inventory.writes.rest import RestWrites

__all__ = ["ChangeSetWrites", "RestWrites", "WriteStrategy"]
