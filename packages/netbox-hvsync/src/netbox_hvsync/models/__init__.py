"""The plugin's database models (NetBox glue; the rules live in netbox_hvsync.core)."""

from .audit import *  # noqa: F403
from .endpoints import *  # noqa: F403
from .sidecars import *  # noqa: F403
from .synced import *  # noqa: F403
