"""Wire shapes of the endpoint registry. Credentials are write-only: accepted in bodies, never in responses."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hvsync_backend.endpoints.hosts import check_domain_text, check_ip_text

AccessMethod = Literal["token", "password"]
ACCESS_METHODS: tuple[str, ...] = ("token", "password")
Port = Annotated[int, Field(ge=1, le=65535, description="TCP port; required on every row")]
Secret = Annotated[str | None, Field(default=None, max_length=4096, json_schema_extra={"writeOnly": True})]

INVENTORY_SECRET_FIELDS = ("token", "token_key")
HV_SECRET_FIELDS = ("password", "token_value")
SECRET_FIELDS = frozenset((*INVENTORY_SECRET_FIELDS, *HV_SECRET_FIELDS, "api_key", "raw_key"))

_USERNAME = re.compile(r"^[^@\s!:]+@[^@\s!:]+$")
_TOKEN_ID = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*$")
_SLUG = re.compile(r"^[-a-zA-Z0-9_]*$")


def check_ip(value: str) -> str:
    """An IP literal the backend may dial (`endpoints.hosts`: no link-local, unspecified or mapped forms)."""
    return check_ip_text(value)


def check_domain(value: str) -> str:
    """A DNS name or IP literal the backend may dial (`endpoints.hosts`: no numeric forms like 127.1)."""
    return check_domain_text(value)


def check_secret(value: str | None) -> str | None:
    """Blank counts as omitted (keeps a stored credential on update); control characters are refused."""
    if value is None or value == "":
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("must not contain control characters")
    return value


def check_header_secret(value: str | None) -> str | None:
    """A secret sent in an HTTP header (NetBox tokens, Proxmox API token values): visible ASCII only,
    since a header cannot carry anything else and every later request would fail on it."""
    value = check_secret(value)
    if value is not None and not all(0x21 <= ord(c) <= 0x7E for c in value):
        raise ValueError("must be visible ASCII characters only (no spaces or non-ASCII letters)")
    return value


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)


# --- inventory (NetBox) ---------------------------------------------------------------------------------


class InventoryEndpointFields(_Body):
    name: str = Field(default="", max_length=255, description="free text, never used for identity")
    ip_address: str = Field(default="", max_length=64)
    domain: str = Field(default="", max_length=255)
    scheme: Literal["http", "https"] = Field(
        default="https",
        description="URL scheme NetBox is dialled with (https by default); the token goes over plain "
        "http only when this says http",
    )
    token_version: Literal[1, 2] = Field(
        default=2,
        description="NetBox API token version: 1 = 'Token <token>', 2 = 'Bearer nbt_<token_key>.<token>'",
    )
    verify_ssl: bool = True
    enabled: bool = True

    _ip = field_validator("ip_address")(classmethod(lambda cls, v: check_ip(v)))
    _domain = field_validator("domain")(classmethod(lambda cls, v: check_domain(v)))


class InventoryEndpointCreate(InventoryEndpointFields):
    port: Port
    token: Secret = None
    token_key: Secret = None

    _secrets = field_validator("token", "token_key")(classmethod(lambda cls, v: check_header_secret(v)))

    @model_validator(mode="after")
    def _needs_host(self) -> InventoryEndpointCreate:
        if not self.ip_address and not self.domain:
            raise ValueError("ip_address or domain is required")
        return self


class InventoryEndpointUpdate(_Body):
    """Partial update: omitted fields (and omitted, null or blank credentials) keep their stored values.
    Changing ip_address, domain, port or scheme needs the token in the same body (`registry.py`)."""

    name: str | None = Field(default=None, max_length=255)
    ip_address: str | None = Field(default=None, max_length=64)
    domain: str | None = Field(default=None, max_length=255)
    port: Port | None = None
    scheme: Literal["http", "https"] | None = None
    token_version: Literal[1, 2] | None = None
    verify_ssl: bool | None = None
    enabled: bool | None = None
    token: Secret = None
    token_key: Secret = None

    _ip = field_validator("ip_address")(classmethod(lambda cls, v: None if v is None else check_ip(v)))
    _domain = field_validator("domain")(classmethod(lambda cls, v: None if v is None else check_domain(v)))
    _secrets = field_validator("token", "token_key")(classmethod(lambda cls, v: check_header_secret(v)))


class InventoryEndpointOut(BaseModel):
    id: int
    name: str
    ip_address: str
    domain: str
    port: int
    scheme: Literal["http", "https"]
    token_version: Literal[1, 2]
    verify_ssl: bool
    enabled: bool
    has_token: bool = Field(description="a token is stored (the token itself is never returned)")
    has_token_key: bool


# --- hv (Proxmox VE) ------------------------------------------------------------------------------------


def _check_methods(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    if not value:
        raise ValueError("must name at least one of 'token', 'password'")
    if len(set(value)) != len(value):
        raise ValueError("must not repeat a method")
    return value


def _check_username(value: str | None) -> str | None:
    if value and not _USERNAME.match(value):
        raise ValueError("must be a Proxmox user id 'user@realm' (e.g. 'root@pam')")
    return value


def _check_token_name(value: str | None) -> str | None:
    if value and not _TOKEN_ID.match(value):
        raise ValueError("must be the token id only (the part after '!'), e.g. 'hvsync'")
    return value


def _check_slug(value: str | None) -> str | None:
    if value and not _SLUG.match(value):
        raise ValueError("must be a slug (letters, digits, '-' and '_')")
    return value


class HvEndpointCreate(_Body):
    name: str = Field(
        min_length=1, max_length=255, description="'<display_name> (inv:<plugin_pk>)'; free text"
    )
    ip_address: str = Field(default="", max_length=64)
    domain: str = Field(default="", max_length=255)
    port: Port
    scheme: Literal["http", "https"] = "https"
    username: str = Field(default="", max_length=255, description="Proxmox user id, 'user@realm'")
    token_name: str = Field(default="", max_length=128, description="API token id (after '!'); not secret")
    access_methods: list[AccessMethod] | None = Field(
        default=None,
        description="order = preference; default ['token'] when token_value is given, else ['password']",
    )
    verify_ssl: bool = True
    enabled: bool = True
    allow_template_builds: bool = False
    timeout: int = Field(default=15, ge=1, le=600, description="seconds per request")
    max_retries: int = Field(default=2, ge=0, le=10)
    retry_backoff: float = Field(default=0.5, ge=0, le=60, description="seconds, doubled per retry")
    site_slug: str = Field(default="", max_length=100)
    tenant_slug: str = Field(default="", max_length=100)
    password: Secret = None
    token_value: Secret = None

    _ip = field_validator("ip_address")(classmethod(lambda cls, v: check_ip(v)))
    _domain = field_validator("domain")(classmethod(lambda cls, v: check_domain(v)))
    _secrets = field_validator("password")(classmethod(lambda cls, v: check_secret(v)))
    _header_secrets = field_validator("token_value")(classmethod(lambda cls, v: check_header_secret(v)))
    _methods = field_validator("access_methods")(classmethod(lambda cls, v: _check_methods(v)))
    _user = field_validator("username")(classmethod(lambda cls, v: _check_username(v)))
    _token = field_validator("token_name")(classmethod(lambda cls, v: _check_token_name(v)))
    _slugs = field_validator("site_slug", "tenant_slug")(classmethod(lambda cls, v: _check_slug(v)))

    @model_validator(mode="after")
    def _needs_host(self) -> HvEndpointCreate:
        if not self.ip_address and not self.domain:
            raise ValueError("ip_address or domain is required")
        return self


class HvEndpointUpdate(_Body):
    """Partial update: omitted fields (and omitted, null or blank credentials) keep their stored values.
    Changing ip_address, domain, port or scheme needs a credential in the same body (`registry.py`)."""

    name: str | None = Field(default=None, min_length=1, max_length=255)
    ip_address: str | None = Field(default=None, max_length=64)
    domain: str | None = Field(default=None, max_length=255)
    port: Port | None = None
    scheme: Literal["http", "https"] | None = None
    username: str | None = Field(default=None, max_length=255)
    token_name: str | None = Field(default=None, max_length=128)
    access_methods: list[AccessMethod] | None = None
    verify_ssl: bool | None = None
    enabled: bool | None = None
    allow_template_builds: bool | None = None
    timeout: int | None = Field(default=None, ge=1, le=600)
    max_retries: int | None = Field(default=None, ge=0, le=10)
    retry_backoff: float | None = Field(default=None, ge=0, le=60)
    site_slug: str | None = Field(default=None, max_length=100)
    tenant_slug: str | None = Field(default=None, max_length=100)
    password: Secret = None
    token_value: Secret = None

    _ip = field_validator("ip_address")(classmethod(lambda cls, v: None if v is None else check_ip(v)))
    _domain = field_validator("domain")(classmethod(lambda cls, v: None if v is None else check_domain(v)))
    _secrets = field_validator("password")(classmethod(lambda cls, v: check_secret(v)))
    _header_secrets = field_validator("token_value")(classmethod(lambda cls, v: check_header_secret(v)))
    _methods = field_validator("access_methods")(classmethod(lambda cls, v: _check_methods(v)))
    _user = field_validator("username")(classmethod(lambda cls, v: _check_username(v)))
    _token = field_validator("token_name")(classmethod(lambda cls, v: _check_token_name(v)))
    _slugs = field_validator("site_slug", "tenant_slug")(classmethod(lambda cls, v: _check_slug(v)))


class HvEndpointOut(BaseModel):
    id: int
    name: str
    ip_address: str
    domain: str
    port: int
    scheme: Literal["http", "https"]
    username: str
    token_name: str
    access_methods: list[AccessMethod]
    verify_ssl: bool
    enabled: bool
    allow_template_builds: bool
    timeout: int
    max_retries: int
    retry_backoff: float
    site_slug: str
    tenant_slug: str
    has_password: bool = Field(description="a password is stored (never returned)")
    has_token_value: bool = Field(description="a token secret is stored (never returned)")
