"""Alembic: migrations create the schema the models describe, and re-running them is a no-op."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from hvsync_backend.db.models import Base
from hvsync_backend.db.session import current_revision, head_revision, make_engine, upgrade_to_head
from sqlalchemy import inspect


def test_migrations_match_models_and_are_idempotent(database_url) -> None:
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    upgrade_to_head(engine)
    assert current_revision(engine) == head_revision(engine) == "0004"
    assert {"api_keys", "inventory_endpoints", "hv_endpoints"} <= set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
    engine.dispose()
