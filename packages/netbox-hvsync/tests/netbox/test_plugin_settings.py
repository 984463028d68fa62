"""PLUGINS_CONFIG["netbox_hvsync"] is checked when NetBox starts (netbox_hvsync.HvsyncConfig.validate over
netbox_hvsync.rules.settings): an unknown key or a wrong type stops `manage.py check` with a message
naming it, before anything else runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

P = 'PLUGINS_CONFIG["netbox_hvsync"]'


def netbox_check(tmp_path: Path, plugins_config: str) -> subprocess.CompletedProcess[str]:
    """`netbox check` (NetBox's manage.py) on this instance's configuration with PLUGINS_CONFIG replaced."""
    base = os.environ["NETBOX_CONFIGURATION"]
    (tmp_path / "hvsync_bad_configuration.py").write_text(
        f"from {base} import *  # noqa: F403\nPLUGINS_CONFIG = {plugins_config}\n"
    )
    env = {
        **os.environ,
        "NETBOX_CONFIGURATION": "hvsync_bad_configuration",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    netbox = Path(sys.executable).parent / "netbox"  # the release's manage.py launcher
    return subprocess.run(
        [str(netbox), "check"], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_netbox_refuses_to_start_on_an_unknown_key_and_a_wrong_type(tmp_path):
    secret = "not-a-fernet-key-but-a-secret-all-the-same"
    config = {"netbox_hvsync": {"stream_read_timout": 60, "job_timeout": "2h", "encryption_key": secret}}
    ran = netbox_check(tmp_path, repr(config))
    assert ran.returncode != 0
    assert "django.core.exceptions.ImproperlyConfigured: netbox_hvsync: " in ran.stderr
    assert (
        f"{P} has an unknown setting 'stream_read_timout' (did you mean \"stream_read_timeout\"?)"
        in ran.stderr
    )
    assert f'{P}["job_timeout"] must be an integer or None, got a string' in ran.stderr
    assert f'{P}["encryption_key"] must be a urlsafe base64 Fernet key (32 bytes), or empty' in ran.stderr
    assert secret not in ran.stderr + ran.stdout


def test_validate_applies_defaults_and_accepts_every_documented_setting():
    from netbox_hvsync import HvsyncConfig
    from netbox_hvsync.rules.settings import defaults

    given = {"stream_read_timeout": 45.0, "job_timeout": 14400, "queue": "default", "change_sets": False}
    HvsyncConfig.validate(given, "4.7.3")
    assert given == {
        **defaults(),
        "stream_read_timeout": 45.0,
        "job_timeout": 14400,
        "queue": "default",
        "change_sets": False,
    }
    assert HvsyncConfig.default_settings == defaults()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"change_sets": "false"}, f'{P}["change_sets"] must be true or false, got a string'),
        ({"job_timeout": 120}, f'{P}["job_timeout"] must be at least 300, got 120'),
        ({"Queue": "default"}, f"{P} has an unknown setting 'Queue' (did you mean \"queue\"?)"),
        (None, f"{P} must be a dict, got None"),
    ],
)
def test_validate_names_the_bad_setting(config, message):
    from django.core.exceptions import ImproperlyConfigured
    from netbox_hvsync import HvsyncConfig

    with pytest.raises(ImproperlyConfigured) as raised:
        HvsyncConfig.validate(config, "4.7.3")
    assert message in str(raised.value)


def test_the_plugin_defaults_agree_with_the_code_that_reads_them():
    """The schema's defaults are the ones the readers fall back to (queue, stream read timeout)."""
    from netbox_hvsync.backend.http import STREAM_READ_TIMEOUT
    from netbox_hvsync.backend.resolution import MIN_STREAM_READ_TIMEOUT
    from netbox_hvsync.queue import SYNC_QUEUE
    from netbox_hvsync.rules.settings import SETTINGS

    by_name = {setting.name: setting for setting in SETTINGS}
    assert by_name["queue"].default == SYNC_QUEUE
    assert by_name["stream_read_timeout"].default == STREAM_READ_TIMEOUT
    assert by_name["stream_read_timeout"].minimum == MIN_STREAM_READ_TIMEOUT
