"""The test and demo NetBox configuration (tools/netbox_instance.py CONFIG_TEMPLATE) holds only what an
operator following docs/plugin.md's install section has: nothing that hides a stock NetBox's behaviour
(it had RQ_DEFAULT_TIMEOUT = 7200, which hid syncs killed at NetBox's 300 s)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import netbox_instance
from netbox_hvsync.rules.settings import problems

#: NetBox's required settings, netbox-branching's (its install docs), the plugins, a documented plugin
#: setting, and three NetBox settings at the values of NetBox's own configuration example
#: (DEBUG, TIME_ZONE; DEVELOPER only for `manage makemigrations`).
DOCUMENTED = {
    "ALLOWED_HOSTS",
    "DATABASES",
    "DATABASE_ROUTERS",
    "REDIS",
    "SECRET_KEY",
    "API_TOKEN_PEPPERS",
    "PLUGINS",
    "PLUGINS_CONFIG",
    "DEBUG",
    "DEVELOPER",
    "TIME_ZONE",
}


def config_text() -> str:
    return netbox_instance.CONFIG_TEMPLATE.format(secret_key="s" * 50, pepper="p" * 50, **netbox_instance.PG)


def test_the_configuration_sets_only_documented_settings() -> None:
    tree = ast.parse(config_text())
    names = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and not target.id.startswith("_")
    }
    assert names == DOCUMENTED
    assert not [name for name in names if name.startswith("RQ_")]  # RQ_DEFAULT_TIMEOUT: NetBox's 300 s


def test_its_plugin_settings_pass_the_plugins_start_up_check(monkeypatch) -> None:
    monkeypatch.setenv("HVSYNC_STREAM_READ_TIMEOUT", "45")
    monkeypatch.delenv("HVSYNC_NETBOX_CORE_ONLY", raising=False)
    values: dict[str, object] = {}
    source = config_text().replace("from netbox_branching.utilities import DynamicSchemaDict", "")
    exec(compile(source, "hvsync_netbox_configuration.py", "exec"), {"DynamicSchemaDict": dict}, values)
    assert values["PLUGINS"] == ["netbox_hvsync", "netbox_branching"]
    assert problems(values["PLUGINS_CONFIG"]["netbox_hvsync"]) == []
    assert values["PLUGINS_CONFIG"]["netbox_hvsync"] == {"stream_read_timeout": 45.0}


def test_the_configuration_is_replaced_in_one_rename(tmp_path: Path) -> None:
    """An instance starting beside another run of the same release never reads a half-written file."""
    target = tmp_path / "hvsync_netbox_configuration.py"
    netbox_instance._replace_file(target, "A = 1\n")
    assert target.read_text() == "A = 1\n"
    inode = os.stat(target).st_ino
    netbox_instance._replace_file(target, "A = 1\n")  # unchanged: left alone
    assert os.stat(target).st_ino == inode
    netbox_instance._replace_file(target, "A = 2\n")
    assert target.read_text() == "A = 2\n" and os.stat(target).st_ino != inode
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temporary file left
