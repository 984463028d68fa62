"""Stopping the backend's runs of a cancelled sync job: stopping the RQ worker only closes its stream, and
the backend run would go on writing. Every stage stream of a job carries the job's run id as `job=`, so
the backend can stop them from any of its workers (`POST /sync/cancel`, hvsync_backend/sync/leases.py)."""

from __future__ import annotations

from urllib.parse import urlencode

from core.models import Job
from netbox_hvsync.backend.resolution import resolve_backend
from netbox_hvsync.rules.transport import TransportError, call

#: Seconds the cancel view waits for the backend's answer to POST /sync/cancel.
CANCEL_TIMEOUT = 5.0


def stop_backend_runs(job: Job) -> str:
    """Best effort: ask the job's backend to stop the stage runs it started for this job (they carry the
    job's run id as `job=`). A killed worker only closes its stream; without this the backend run would
    go on writing. Returns a line for the job log ("" when there is nothing to ask)."""
    sync = (job.data or {}).get("sync") or {}
    run_id = str(sync.get("run_id") or "")
    if not run_id:
        return ""
    resolved = resolve_backend(sync.get("backend_endpoint_id"))
    if resolved is None:
        return "backend runs not stopped: no usable backend endpoint"
    ctx = resolved.context
    try:
        answer = call(
            resolved.transport,
            "POST",
            ctx.url("/sync/cancel") + "?" + urlencode({"job": run_id}),
            headers=ctx.auth_headers(),
            timeout=CANCEL_TIMEOUT,
        )
    except TransportError as exc:
        return f"backend runs not stopped: backend unreachable ({exc.kind})"
    finally:
        resolved.transport.close()
    if answer.status != 200 or not isinstance(answer.body, dict):
        return f"backend runs not stopped: backend answered HTTP {answer.status}"
    return f"backend asked to stop this job's runs ({answer.body.get('cancelled', 0)} stage lease(s))"
