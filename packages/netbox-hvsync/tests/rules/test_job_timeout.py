"""The sync job's RQ timeout (netbox_hvsync.rules.job_timeout): SPEC 8's 7200 s at least, more with more
endpoints, the plugin setting as given."""

import pytest
from netbox_hvsync.rules import constants
from netbox_hvsync.rules.job_timeout import (
    JOB_TIMEOUT_FLOOR,
    MIN_CONFIGURED_JOB_TIMEOUT,
    STAGE_ALLOWANCE_PER_ENDPOINT,
    job_timeout,
)


def test_the_floor_is_the_default_job_timeout_spec_8_implies() -> None:
    """ "hard push ceiling | 1800 s (25% of the default job timeout, implying 7200 s)"."""
    assert JOB_TIMEOUT_FLOOR == 7200 == 4 * constants.PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING
    assert MIN_CONFIGURED_JOB_TIMEOUT == 300  # NetBox's RQ_DEFAULT_TIMEOUT: a stock worker's limit


@pytest.mark.parametrize(
    ("endpoints", "seconds"),
    [(0, 7200), (1, 7200), (2, 7200), (3, 7200), (4, 9000), (5, 10800), (10, 19800)],
)
def test_the_hard_ceiling_plus_a_stage_allowance_per_endpoint_never_below_7200(
    endpoints: int, seconds: int
) -> None:
    assert job_timeout(endpoints) == seconds
    assert seconds == max(7200, 1800 + STAGE_ALLOWANCE_PER_ENDPOINT * endpoints)


def test_more_endpoints_never_get_less_time() -> None:
    ruled = [job_timeout(n) for n in range(50)]
    assert ruled == sorted(ruled) and ruled[-1] > ruled[0]
    assert all(seconds > 300 for seconds in ruled)  # always past a stock NetBox's 300 s


@pytest.mark.parametrize("configured", [300, 600, 7200, 86400])
def test_the_setting_replaces_the_rule_whatever_the_scope(configured: int) -> None:
    assert job_timeout(0, configured) == configured
    assert job_timeout(40, configured) == configured


def test_a_negative_scope_is_a_bug() -> None:
    with pytest.raises(ValueError, match="negative"):
        job_timeout(-1)
