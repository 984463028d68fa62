"""The plugin's migrations describe its models exactly: a model change without its migration would
apply nowhere (NetBox refuses `makemigrations` outside DEVELOPER mode, so operators cannot make it)."""

from __future__ import annotations


def test_models_have_no_changes_without_a_migration() -> None:
    from django.apps import apps
    from django.db.migrations.autodetector import MigrationAutodetector
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.state import ProjectState

    loader = MigrationLoader(None, ignore_no_migrations=True)
    detector = MigrationAutodetector(loader.project_state(), ProjectState.from_apps(apps))
    changes = detector.changes(graph=loader.graph, trim_to_apps={"netbox_hvsync"})
    pending = [op.describe() for migration in changes.get("netbox_hvsync", []) for op in migration.operations]
    assert pending == []
    assert ("netbox_hvsync", "0002_hvendpoint_sync_modes") in loader.disk_migrations
