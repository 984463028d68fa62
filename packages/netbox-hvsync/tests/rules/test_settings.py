"""The plugin's settings schema (netbox_hvsync.rules.settings): each unknown key and each bad value is
named in words an operator can act on; text values are never echoed."""

import base64

import pytest
from netbox_hvsync.queue import SYNC_QUEUE
from netbox_hvsync.rules.settings import SETTINGS, Setting, defaults, problems

P = 'PLUGINS_CONFIG["netbox_hvsync"]'
FERNET_KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()


def test_the_settings_and_their_defaults() -> None:
    assert defaults() == {
        "encryption_key": "",
        "stream_read_timeout": 120,
        "queue": SYNC_QUEUE,
        "change_sets": True,
        "job_timeout": None,
        "deletion_request_max_age_days": 30,
        "allow_self_approval": False,
    }
    assert [s.name for s in SETTINGS] == list(defaults())


def test_the_defaults_are_valid_and_so_is_an_empty_config() -> None:
    assert problems(defaults()) == []
    assert problems({}) == []


def test_good_values_pass() -> None:
    config = {
        "encryption_key": FERNET_KEY,
        "stream_read_timeout": 45.5,
        "queue": "default",
        "change_sets": False,
        "job_timeout": 14400,
    }
    assert problems(config) == []
    assert problems({"stream_read_timeout": 30, "job_timeout": None}) == []


def test_an_unknown_key_is_named_with_the_closest_known_one() -> None:
    [message] = problems({"stream_read_timout": 60})
    assert message == (
        f"{P} has an unknown setting 'stream_read_timout' (did you mean \"stream_read_timeout\"?); "
        "known settings: allow_self_approval, change_sets, deletion_request_max_age_days, encryption_key, "
        "job_timeout, queue, stream_read_timeout"
    )
    [message] = problems({"RQ_DEFAULT_TIMEOUT": 7200})
    assert "unknown setting 'RQ_DEFAULT_TIMEOUT'; known settings:" in message


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"stream_read_timeout": "120"}, f'{P}["stream_read_timeout"] must be a number, got a string'),
        ({"stream_read_timeout": True}, f'{P}["stream_read_timeout"] must be a number, got true or false'),
        ({"stream_read_timeout": 10}, f'{P}["stream_read_timeout"] must be at least 30, got 10'),
        ({"change_sets": "no"}, f'{P}["change_sets"] must be true or false, got a string'),
        ({"change_sets": 0}, f'{P}["change_sets"] must be true or false, got an integer'),
        ({"queue": None}, f'{P}["queue"] must be a string, got None'),
        ({"job_timeout": "2h"}, f'{P}["job_timeout"] must be an integer or None, got a string'),
        ({"job_timeout": 7200.0}, f'{P}["job_timeout"] must be an integer or None, got a number'),
        ({"job_timeout": False}, f'{P}["job_timeout"] must be an integer or None, got true or false'),
        ({"job_timeout": 60}, f'{P}["job_timeout"] must be at least 300, got 60'),
        ({"encryption_key": 42}, f'{P}["encryption_key"] must be a string, got an integer'),
        (
            {"deletion_request_max_age_days": -1},
            f'{P}["deletion_request_max_age_days"] must be at least 0, got -1',
        ),
        (
            {"deletion_request_max_age_days": "30"},
            f'{P}["deletion_request_max_age_days"] must be an integer, got a string',
        ),
        ({"allow_self_approval": "yes"}, f'{P}["allow_self_approval"] must be true or false, got a string'),
    ],
)
def test_a_wrong_type_or_range_names_the_key(config: dict[str, object], message: str) -> None:
    assert problems(config) == [message]


def test_a_bad_encryption_key_is_named_and_never_echoed() -> None:
    for bad in ("not-a-fernet-key-at-all!", base64.urlsafe_b64encode(b"short").decode()):
        [message] = problems({"encryption_key": bad})
        assert message == f'{P}["encryption_key"] must be a urlsafe base64 Fernet key (32 bytes), or empty'
        assert bad not in message


def test_every_problem_is_reported_at_once() -> None:
    found = problems({"queue": 1, "job_timeout": 1, "typo": 1})
    assert len(found) == 3 and "'typo'" in found[0]
    assert '["queue"]' in found[1] and '["job_timeout"]' in found[2]


def test_settings_that_are_not_a_dict() -> None:
    assert problems(["queue"]) == [f"{P} must be a dict, got list"]


def test_adding_a_setting_is_one_entry() -> None:
    extra = Setting("batch_size", (int,), 100, minimum=1)
    assert extra.problem(0) == f'{P}["batch_size"] must be at least 1, got 0'
    assert extra.problem(5) is None
