"""The plugin's database models (NetBox glue; the rules live in netbox_hvsync.rules)."""

from .audit import *  # noqa: F403
from .change_sets import *  # noqa: F403
from .endpoints import *  # noqa: F403
from .proxmox import *  # noqa: F403
from .sidecars import *  # noqa: F403
