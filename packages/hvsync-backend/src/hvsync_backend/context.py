"""Everything one running backend shares: settings, database, key store, lockout, cipher, Proxmox clients.

Built once by ``create_app`` (and by the CLI). Start-up problems (database down, bad encryption key) are
recorded in ``problems`` instead of crashing, so ``/health`` can say why the service is not ready.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from hvsync_backend.auth.cache import VerificationCache
from hvsync_backend.auth.keys import KeyStore
from hvsync_backend.auth.lockout import LockoutTracker
from hvsync_backend.config import Settings
from hvsync_backend.db.session import make_engine, make_session_factory, upgrade_to_head
from hvsync_backend.endpoints.crypto import CredentialCipher, load_or_create_key_file, parse_keys
from hvsync_backend.endpoints.registry import EndpointRegistry
from hvsync_backend.hv.pool import ProxmoxClientPool
from hvsync_backend.metrics import Metrics
from hvsync_backend.sync.job_reads import JobReads

log = logging.getLogger("hvsync_backend")


class NotReady(RuntimeError):
    """A route needs a part that failed to start (its reason is in ``BackendContext.problems``)."""


@dataclass
class BackendContext:
    settings: Settings
    engine: Engine
    session_factory: sessionmaker[Session]
    keys: KeyStore
    lockout: LockoutTracker
    proxmox: ProxmoxClientPool
    _registry: EndpointRegistry | None = None
    problems: dict[str, str] = field(default_factory=dict)
    #: Builds the transport of every NetBox client (None: the network); exists for tests (a fake NetBox).
    netbox_transport: Callable[[], httpx.AsyncBaseTransport] | None = None
    #: This instance's Prometheus series (its own registry; see metrics.py).
    metrics: Metrics = field(default_factory=Metrics)
    #: The Proxmox answers of recent jobs, shared by each job's stage streams.
    job_reads: JobReads = field(default_factory=JobReads)

    @property
    def registry(self) -> EndpointRegistry:
        if self._registry is None:
            raise NotReady(self.problems.get("encryption_key", "encryption key not loaded"))
        return self._registry


def load_cipher(settings: Settings) -> CredentialCipher:
    if settings.encryption_key is not None:
        return CredentialCipher(parse_keys(settings.encryption_key.get_secret_value()))
    return CredentialCipher(load_or_create_key_file(settings.resolved_key_file))


def build_context(settings: Settings, migrate: bool = True) -> BackendContext:
    settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url)
    factory = make_session_factory(engine)
    metrics = Metrics()
    context = BackendContext(
        settings=settings,
        engine=engine,
        session_factory=factory,
        keys=KeyStore(factory, settings.bcrypt_rounds, VerificationCache(), slots=settings.bcrypt_slots),
        lockout=LockoutTracker(
            settings.lockout_threshold,
            settings.lockout_seconds,
            on_lock=metrics.locked_out,
            window=settings.lockout_window_seconds,
            global_budget=settings.lockout_global_budget,
        ),
        proxmox=ProxmoxClientPool(
            observer=metrics.observer("proxmox"), max_answer_bytes=settings.proxmox_max_answer_bytes
        ),
        metrics=metrics,
        job_reads=JobReads(settings.job_reads_keep_seconds, settings.job_reads_max_jobs),
    )
    metrics.watch_key_cache(lambda: len(context.keys.cache))
    if migrate:
        try:
            upgrade_to_head(engine)
        except Exception as exc:
            context.problems["database"] = (
                f"migrations not applied: {type(exc).__name__}: {exc}".splitlines()[0]
            )
            log.error("database not ready: %s", context.problems["database"])
    try:
        context._registry = EndpointRegistry(factory, load_cipher(settings))
    except (ValueError, OSError) as exc:
        context.problems["encryption_key"] = f"encryption key unusable: {type(exc).__name__}"
        log.error("%s", context.problems["encryption_key"])
    return context
