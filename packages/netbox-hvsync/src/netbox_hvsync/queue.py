"""Which RQ queue a sync job goes on: hvsync's own when a worker serves it, else NetBox's `default`.

On `default` a sync waits behind NetBox's own background jobs (hundreds of search-cache jobs after a big
sync), so the plugin declares a queue of its own. A queue nobody serves would hold a sync forever, so
RQ is asked at each enqueue (each occurrence of a recurring job too) and an unserved queue falls back to
`default`, with a warning in the job's sync block.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

#: The queue as the PluginConfig declares it; NetBox registers it as `<plugin name>.<queue>`.
PLUGIN_QUEUE = "sync"
SYNC_QUEUE = f"netbox_hvsync.{PLUGIN_QUEUE}"
#: NetBox's own default queue (netbox.constants.RQ_QUEUE_DEFAULT), always served by a NetBox worker.
FALLBACK_QUEUE = "default"
#: Seconds the worker check may wait on Redis (connect and each read).
REDIS_TIMEOUT = 3.0

logger = logging.getLogger("netbox_hvsync.queue")


@dataclass(frozen=True)
class QueueChoice:
    """The queue a job goes on, the queue the settings asked for, and why they differ (if they do)."""

    name: str
    requested: str
    warning: str | None = None

    def record(self) -> dict[str, Any]:
        """The `queue` entry of the sync block."""
        return {"name": self.name, "requested": self.requested, "warning": self.warning}


def configured_queue() -> str:
    """PLUGINS_CONFIG["netbox_hvsync"]["queue"], hvsync's own queue unless set."""
    from netbox.plugins import get_plugin_config

    value = get_plugin_config("netbox_hvsync", "queue", SYNC_QUEUE)
    return str(value).strip() if value else SYNC_QUEUE


def bounded_connection(name: str) -> Any:
    """A Redis client for the queue's server whose connect and reads time out once, without retries
    (django-rq's may wait without bound).

    Sentinel or custom pools are used as configured: their own settings decide their timeouts."""
    import redis
    from django_rq.queues import get_connection
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    connection = get_connection(name)
    pool = connection.connection_pool
    if type(pool) is not redis.ConnectionPool:
        return connection
    kwargs = {
        **pool.connection_kwargs,
        "socket_timeout": REDIS_TIMEOUT,
        "socket_connect_timeout": REDIS_TIMEOUT,
        "retry": Retry(NoBackoff(), 0),  # redis-py retries timeouts with a backoff of seconds by default
    }
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs))


def queue_is_served(name: str) -> bool:
    """True when at least one live RQ worker listens on the queue (RQ drops workers whose heartbeat lapsed)."""
    from rq import Queue, Worker

    connection = bounded_connection(name)
    try:
        return any(
            name in worker.queue_names() for worker in Worker.all(queue=Queue(name, connection=connection))
        )
    finally:
        connection.connection_pool.disconnect()


def choose_queue() -> QueueChoice:
    """The configured queue when a worker serves it, else `default` with the reason."""
    from django.conf import settings

    requested = configured_queue()
    if requested == FALLBACK_QUEUE:
        return QueueChoice(requested, requested)
    if requested not in settings.RQ_QUEUES:
        reason = "is not one of NetBox's RQ queues (check the plugin setting `queue`)"
    else:
        try:
            if queue_is_served(requested):
                return QueueChoice(requested, requested)
            reason = "has no RQ worker listening"
        except Exception as exc:  # Redis unreachable or slow: never hold the sync on an unknown queue
            reason = f"could not be checked for RQ workers ({type(exc).__name__})"
    warning = (
        f"queue {requested!r} {reason}; the sync was queued on {FALLBACK_QUEUE!r} instead "
        f'(run `manage.py rqworker {requested} high default low`, see docs/plugin.md "Queue")'
    )
    logger.warning(warning)
    return QueueChoice(FALLBACK_QUEUE, requested, warning)


def queue_warnings(block: dict[str, Any]) -> list[str]:
    """The warning the enqueue recorded in a sync block, for the run to keep among its warnings."""
    warning = (block.get("queue") or {}).get("warning")
    return [str(warning)] if warning else []
