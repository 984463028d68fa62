"""How long NetBox's RQ worker lets a sync job run: the job timeout the plugin sets on every enqueue.

Without one, RQ applies NetBox's `RQ_DEFAULT_TIMEOUT` (300 s on a stock NetBox) and kills a longer sync
half-written. SPEC 8 sizes the preflight's hard push ceiling (1800 s) as 25 % of the default job timeout,
so a sync job gets at least 7200 s. After the preflight, each Proxmox endpoint in scope runs its stages,
so the timeout grows with them:

    job timeout = max(7200, 1800 + 1800 x endpoints in scope)      (seconds)

`PLUGINS_CONFIG["netbox_hvsync"]["job_timeout"]` (whole seconds) replaces the rule when set.
"""

from __future__ import annotations

from typing import Final

from .constants import DEFAULT_JOB_TIMEOUT, PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING

__all__ = ["JOB_TIMEOUT_FLOOR", "MIN_CONFIGURED_JOB_TIMEOUT", "STAGE_ALLOWANCE_PER_ENDPOINT", "job_timeout"]

#: Never less than the default job timeout SPEC 8 implies (the hard push ceiling is 25 % of it).
JOB_TIMEOUT_FLOOR: Final[int] = int(DEFAULT_JOB_TIMEOUT)
#: Time allowed for one Proxmox endpoint's stages after the preflight: 30 minutes (the initial sync of
#: 1,000 guests took 152-248 s on two cores; docs/plugin.md "Queue").
STAGE_ALLOWANCE_PER_ENDPOINT: Final[int] = 1800
#: The lowest `job_timeout` setting accepted: NetBox's own default job timeout.
MIN_CONFIGURED_JOB_TIMEOUT: Final[int] = 300


def job_timeout(endpoints: int, configured: int | None = None) -> int:
    """Seconds RQ may run a sync job whose scope has `endpoints` Proxmox endpoints.

    `configured` (the plugin setting) wins as given; the settings check has already refused a value
    below `MIN_CONFIGURED_JOB_TIMEOUT`."""
    if endpoints < 0:
        raise ValueError("endpoints in scope cannot be negative")
    if configured is not None:
        return configured
    ruled = int(PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING) + STAGE_ALLOWANCE_PER_ENDPOINT * endpoints
    return max(JOB_TIMEOUT_FLOOR, ruled)
