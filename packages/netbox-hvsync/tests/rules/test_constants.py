"""SPEC 8 limits as constants."""

from netbox_hvsync.rules import constants as c


def test_spec_8_values() -> None:
    """SPEC 8: generated plugin token length 64 characters; inventory push timeout default 10 s; hv push
    timeout default 15 s; soft push budget 600 s; hard push ceiling 1800 s (25% of the default job
    timeout, implying 7200 s)."""
    assert c.GENERATED_TOKEN_LENGTH == 64
    assert c.INVENTORY_PUSH_TIMEOUT == 10
    assert c.HV_PUSH_TIMEOUT == 15
    assert c.PREFLIGHT_ENDPOINT_PUSH_BUDGET == 600
    assert c.PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING == 1800
    assert c.PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING == 0.25 * c.DEFAULT_JOB_TIMEOUT == 0.25 * 7200


def test_batch_failure_detail_limit_is_chosen_and_positive() -> None:
    """SPEC 8: "The value of BATCH_FAILURE_DETAIL_LIMIT: not shown." We choose 10 (docs/plugin-rules.md)."""
    assert c.BATCH_FAILURE_DETAIL_LIMIT == 10


def test_header_name_is_the_spec_wire_name() -> None:
    """SPEC: "The header that carries the backend key is X-Service-API-Key"."""
    assert c.API_KEY_HEADER == "X-Service-API-Key"
