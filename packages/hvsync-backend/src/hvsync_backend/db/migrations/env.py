"""Alembic environment: runs on the engine handed in by hvsync_backend.db.session (no alembic.ini)."""

from alembic import context
from hvsync_backend.db.models import Base

engine = context.config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
