"""Persistence: SQLAlchemy 2 models, engine/session factory and the Alembic migrations shipped inside."""
