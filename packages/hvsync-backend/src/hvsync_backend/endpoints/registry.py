"""Create, update and list endpoint rows; encrypts credentials on the way in and never returns them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hvsync_backend.db.models import HvEndpoint, InventoryEndpoint
from hvsync_backend.db.session import session_scope
from hvsync_backend.endpoints.crypto import CredentialCipher
from hvsync_backend.endpoints.schemas import (
    HvEndpointCreate,
    HvEndpointOut,
    HvEndpointUpdate,
    InventoryEndpointCreate,
    InventoryEndpointOut,
    InventoryEndpointUpdate,
)
from hvsync_backend.errors import AlreadyExists, FieldError, NotFound

#: Where an endpoint points: changing any of these needs the credential again (C2 of issue 39).
INVENTORY_TARGET_FIELDS = ("ip_address", "domain", "port", "scheme")
HV_TARGET_FIELDS = ("ip_address", "domain", "port", "scheme")


def inventory_out(row: InventoryEndpoint) -> InventoryEndpointOut:
    return InventoryEndpointOut(
        id=row.id,
        name=row.name,
        ip_address=row.ip_address,
        domain=row.domain,
        port=row.port,
        scheme=row.scheme,  # type: ignore[arg-type]
        token_version=row.token_version,  # type: ignore[arg-type]
        verify_ssl=row.verify_ssl,
        enabled=row.enabled,
        has_token=row.token_enc is not None,
        has_token_key=row.token_key_enc is not None,
    )


def hv_out(row: HvEndpoint) -> HvEndpointOut:
    return HvEndpointOut(
        id=row.id,
        name=row.name,
        ip_address=row.ip_address,
        domain=row.domain,
        port=row.port,
        scheme=row.scheme,  # type: ignore[arg-type]
        username=row.username,
        token_name=row.token_name,
        access_methods=list(row.access_methods),
        verify_ssl=row.verify_ssl,
        enabled=row.enabled,
        allow_template_builds=row.allow_template_builds,
        timeout=row.timeout,
        max_retries=row.max_retries,
        retry_backoff=row.retry_backoff,
        site_slug=row.site_slug,
        tenant_slug=row.tenant_slug,
        has_password=row.password_enc is not None,
        has_token_value=row.token_value_enc is not None,
    )


def _plain_updates(body: Any, secret_fields: tuple[str, ...]) -> dict[str, Any]:
    data = body.model_dump(exclude_unset=True)
    return {k: v for k, v in data.items() if k not in secret_fields and v is not None}


def _moved(
    row: InventoryEndpoint | HvEndpoint, before: tuple[Any, ...], fields: tuple[str, ...]
) -> list[str]:
    """The target fields whose value changed (names compared without case or a trailing dot)."""
    changed = []
    for name, old in zip(fields, before, strict=True):
        new = getattr(row, name)
        if name == "domain":
            old, new = old.lower().rstrip("."), new.lower().rstrip(".")
        if old != new:
            changed.append(name)
    return changed


def _retarget_refused(field: str, changed: list[str]) -> FieldError:
    return FieldError(
        field,
        f"changing {', '.join(changed)} points the endpoint somewhere else: send {field} again with "
        "the change (a stored credential is never sent to a new target)",
    )


class EndpointRegistry:
    def __init__(self, factory: sessionmaker[Session], cipher: CredentialCipher) -> None:
        self.session_factory = factory
        self.cipher = cipher

    # --- inventory -------------------------------------------------------------------------------------
    def list_inventory(self) -> list[InventoryEndpointOut]:
        with self.session_factory() as session:
            return [
                inventory_out(r)
                for r in session.scalars(select(InventoryEndpoint).order_by(InventoryEndpoint.id))
            ]

    def create_inventory(self, body: InventoryEndpointCreate) -> InventoryEndpointOut:
        fields = body.model_dump(exclude={"token", "token_key"})
        row = InventoryEndpoint(
            singleton=1,
            token_enc=self.cipher.encrypt_optional(body.token),
            token_key_enc=self.cipher.encrypt_optional(body.token_key),
            **fields,
        )
        try:
            with session_scope(self.session_factory) as session:
                existing = session.execute(select(InventoryEndpoint.id)).scalar()
                if existing is not None:
                    raise AlreadyExists(existing)
                session.add(row)
        except IntegrityError:
            with self.session_factory() as session:
                existing = session.execute(select(InventoryEndpoint.id)).scalar()
            raise AlreadyExists(existing or 0) from None
        return inventory_out(row)

    def update_inventory(self, endpoint_id: int, body: InventoryEndpointUpdate) -> InventoryEndpointOut:
        with session_scope(self.session_factory) as session:
            row = session.get(InventoryEndpoint, endpoint_id, with_for_update=True)
            if row is None:
                raise NotFound
            before = tuple(getattr(row, name) for name in INVENTORY_TARGET_FIELDS)
            for key, value in _plain_updates(body, ("token", "token_key")).items():
                setattr(row, key, value)
            if not row.ip_address and not row.domain:
                raise FieldError("ip_address", "ip_address or domain is required")
            changed = _moved(row, before, INVENTORY_TARGET_FIELDS)
            if changed and row.token_enc is not None and body.token is None:
                raise _retarget_refused("token", changed)
            if body.token is not None:
                row.token_enc = self.cipher.encrypt(body.token)
            if body.token_key is not None:
                row.token_key_enc = self.cipher.encrypt(body.token_key)
            session.flush()
            return inventory_out(row)

    # --- hv --------------------------------------------------------------------------------------------
    def list_hv(self) -> list[HvEndpointOut]:
        with self.session_factory() as session:
            return [hv_out(r) for r in session.scalars(select(HvEndpoint).order_by(HvEndpoint.id))]

    def create_hv(self, body: HvEndpointCreate) -> HvEndpointOut:
        fields = body.model_dump(exclude={"password", "token_value", "access_methods"})
        methods = body.access_methods or (["token"] if body.token_value else ["password"])
        row = HvEndpoint(
            access_methods=list(methods),
            password_enc=self.cipher.encrypt_optional(body.password),
            token_value_enc=self.cipher.encrypt_optional(body.token_value),
            **fields,
        )
        with session_scope(self.session_factory) as session:
            session.add(row)
        return hv_out(row)

    def update_hv(self, endpoint_id: int, body: HvEndpointUpdate) -> HvEndpointOut:
        with session_scope(self.session_factory) as session:
            row = session.get(HvEndpoint, endpoint_id, with_for_update=True)
            if row is None:
                raise NotFound
            before = tuple(getattr(row, name) for name in HV_TARGET_FIELDS)
            for key, value in _plain_updates(body, ("password", "token_value")).items():
                setattr(row, key, list(value) if key == "access_methods" else value)
            if not row.ip_address and not row.domain:
                raise FieldError("ip_address", "ip_address or domain is required")
            changed = _moved(row, before, HV_TARGET_FIELDS)
            stored = row.password_enc is not None or row.token_value_enc is not None
            if changed and stored:
                if body.password is None and body.token_value is None:
                    first = "token_value" if row.access_methods[0] == "token" else "password"
                    raise _retarget_refused(first, changed)
                # Only what came with the move goes to the new target: the other credential is wiped.
                row.password_enc = None
                row.token_value_enc = None
            if body.password is not None:
                row.password_enc = self.cipher.encrypt(body.password)
            if body.token_value is not None:
                row.token_value_enc = self.cipher.encrypt(body.token_value)
            session.flush()
            return hv_out(row)

    def retire_hv(self, endpoint_id: int) -> HvEndpointOut:
        """Disable the endpoint and wipe its credentials (the plugin deleted it); idempotent."""
        with session_scope(self.session_factory) as session:
            row = session.get(HvEndpoint, endpoint_id, with_for_update=True)
            if row is None:
                raise NotFound
            row.enabled = False
            row.allow_template_builds = False
            row.password_enc = None
            row.token_value_enc = None
            session.flush()
            return hv_out(row)
