"""The backend's tables. Secret columns hold Fernet ciphertext (``*_enc``) or bcrypt hashes, never plaintext."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, LargeBinary, String, Text, UniqueConstraint, false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class ApiKey(Base):
    """A service API key. ``key_hash`` is bcrypt over the SHA-256 digest of the key (bcrypt reads 72 bytes)."""

    __tablename__ = "api_keys"
    # Ids are never reused (SQLite would reuse the highest rowid after a delete): a cached verification
    # maps to an id, and another key must never inherit it.
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    label: Mapped[str] = mapped_column(String(200), default="", nullable=False)
    key_hash: Mapped[bytes] = mapped_column(LargeBinary(80), nullable=False)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True, nullable=False)
    created_at: Mapped[float] = mapped_column(Float, default=time.time, nullable=False)
    # 1 only on the key registered through bootstrap: the unique constraint makes concurrent
    # first registrations (even from several processes) produce exactly one row.
    bootstrap_slot: Mapped[int | None] = mapped_column(Integer, nullable=True, unique=True)
    # True for keys generated here as ``hvsk_<id>_<random>``: only a presented key naming this id can match.
    id_in_key: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), nullable=False)


class InventoryEndpoint(Base):
    """The single NetBox endpoint; ``singleton`` is always 1 and unique, so a second row cannot exist."""

    __tablename__ = "inventory_endpoints"
    __table_args__ = (UniqueConstraint("singleton", name="uq_inventory_endpoints_singleton"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    singleton: Mapped[int] = mapped_column(Integer, default=1, nullable=False)
    name: Mapped[str] = mapped_column(String(255), default="", nullable=False)
    ip_address: Mapped[str] = mapped_column(String(64), default="", nullable=False)
    domain: Mapped[str] = mapped_column(String(255), default="", nullable=False)
    port: Mapped[int] = mapped_column(Integer, nullable=False)
    #: "http" or "https": the token is sent over plain http only when this says so (migration 0004).
    scheme: Mapped[str] = mapped_column(String(5), default="https", server_default="https", nullable=False)
    token_version: Mapped[int] = mapped_column(Integer, default=2, nullable=False)
    verify_ssl: Mapped[bool] = mapped_column(Boolean, default=True, nullable=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, nullable=False)
    token_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    token_key_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[float] = mapped_column(Float, default=time.time, onupdate=time.time, nullable=False)


class HvEndpoint(Base):
    """A Proxmox VE endpoint. Names are free text; the plugin's ``(inv:<pk>)`` suffix is not enforced unique."""

    __tablename__ = "hv_endpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    ip_address: Mapped[str] = mapped_column(String(64), default="", nullable=False)
    domain: Mapped[str] = mapped_column(String(255), default="", nullable=False)
    port: Mapped[int] = mapped_column(Integer, nullable=False)
    scheme: Mapped[str] = mapped_column(String(5), default="https", nullable=False)
    username: Mapped[str] = mapped_column(String(255), default="", nullable=False)
    token_name: Mapped[str] = mapped_column(String(255), default="", nullable=False)
    access_methods: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    verify_ssl: Mapped[bool] = mapped_column(Boolean, default=True, nullable=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, nullable=False)
    allow_template_builds: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False)
    timeout: Mapped[int] = mapped_column(Integer, default=15, nullable=False)
    max_retries: Mapped[int] = mapped_column(Integer, default=2, nullable=False)
    retry_backoff: Mapped[float] = mapped_column(Float, default=0.5, nullable=False)
    site_slug: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    tenant_slug: Mapped[str] = mapped_column(String(100), default="", nullable=False)
    password_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    token_value_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[float] = mapped_column(Float, default=time.time, onupdate=time.time, nullable=False)


class RunLease(Base):
    """One (Proxmox endpoint, stage) pair a writing sync run holds (`sync/leases.py`); the primary key
    makes a second holder impossible across processes, and `expires_at` frees a crashed process's pairs."""

    __tablename__ = "run_leases"

    endpoint_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    stage: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), nullable=False)
    expires_at: Mapped[float] = mapped_column(Float, nullable=False)
    #: the caller's job id (the plugin's sync-job run id), by which it can cancel the run from any worker
    job: Mapped[str] = mapped_column(String(64), default="", nullable=False)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False)
