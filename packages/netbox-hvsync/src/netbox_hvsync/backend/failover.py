"""Hostname and IP candidates of one backend during a sync job (SPEC 6.2, 7.3).

A backend endpoint row may give both a URL (hostname) and an IP address. The job tries the hostname
first. Before the preflight it probes `GET /health` (no credentials) on each candidate and uses the first
that answers at all. During the stage loop, a stage that fails with a *transport* failure (no
backend-authored answer) is tried again on the other candidates; an application failure (the backend
answered) is final, because another address of the same backend would answer the same. When every
candidate failed, the rules' `select_candidate_failure` picks what is reported: the first backend-authored
failure, else the last transport failure. Later stages keep using the candidate that last answered.

The key's validation proof covers the first candidate only. Before the key (and the credentials the
preflight pushes) first go to another candidate in a job, that address must pass the failover check
(`rules.adoption.verify_failover_address`: it identifies itself as an initialised hvsync backend and
accepts the key); an address that fails it is never used (issue 39: the IP address a backend endpoint
links to can change in IPAM without the endpoint being saved).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from netbox_hvsync.backend.resolution import ResolvedBackend
from netbox_hvsync.rules.adoption import verify_failover_address
from netbox_hvsync.rules.failures import APPLICATION, TRANSPORT, CandidateFailure, select_candidate_failure
from netbox_hvsync.rules.stage_runner import StageRun
from netbox_hvsync.rules.transport import BackendContext, TransportError, call

logger = logging.getLogger("netbox_hvsync.failover")

HEALTH_PATH = "/health"
#: The probe only asks "does anything answer here"; the preflight's own health wait decides readiness.
PROBE_TIMEOUT = 5.0


def probe_candidates(resolved: ResolvedBackend) -> tuple[ResolvedBackend, list[dict[str, Any]]]:
    """The backend switched to the first candidate that answers `/health`, with one record per probe.

    With a single candidate nothing is probed. When none answers, the first candidate stays in use and
    the preflight reports the backend as unreachable."""
    if len(resolved.all_candidates) < 2:
        return resolved, []
    probes: list[dict[str, Any]] = []
    for ctx in resolved.all_candidates:
        try:
            answer = call(
                resolved.transport,
                "GET",
                ctx.url(HEALTH_PATH),
                headers={"Accept": "application/json"},
                timeout=PROBE_TIMEOUT,
            )
        except TransportError as exc:
            probes.append(
                {"address": ctx.base_url, "ok": False, "failure_kind": TRANSPORT, "error": exc.kind}
            )
            continue
        if not candidate_verified(resolved, ctx):
            probes.append({"address": ctx.base_url, "ok": False, "error": "failed the failover check"})
            continue
        probes.append({"address": ctx.base_url, "ok": True, "status": answer.status})
        return resolved.using(ctx), probes
    return resolved, probes


def candidate_verified(resolved: ResolvedBackend, ctx: BackendContext) -> bool:
    """The first candidate is covered by the key's validation proof; another is checked once per job
    before anything with the key goes there."""
    if ctx == resolved.all_candidates[0] or ctx.base_url in resolved.verified:
        return True
    outcome = verify_failover_address(resolved.transport, ctx.base_url, ctx.api_key)
    if not outcome.ok:
        logger.warning(
            "backend %s: address %s failed the failover check (%s); not used",
            resolved.row.pk,
            ctx.base_url,
            outcome.error,
        )
        return False
    resolved.verified.add(ctx.base_url)
    return True


def failure_kind(run: StageRun) -> str | None:
    return None if run.ok else (run.failure_payload or {}).get("failure_kind", TRANSPORT)


def run_on_candidates(
    resolved: ResolvedBackend, run_one: Callable[[BackendContext], StageRun]
) -> tuple[StageRun, BackendContext, list[dict[str, Any]]]:
    """Run one stage on the candidate in use, then on the others while failures are transport failures.

    Returns the run to report, the candidate it ran on, and one record per candidate tried (empty when the
    backend has a single address)."""
    order = [resolved.context, *(c for c in resolved.all_candidates if c != resolved.context)]
    runs: list[tuple[BackendContext, StageRun]] = []
    for ctx in order:
        if runs and not candidate_verified(resolved, ctx):
            continue
        run = run_one(ctx)
        runs.append((ctx, run))
        if run.ok or failure_kind(run) == APPLICATION:
            break
    records = (
        [
            {"address": c.base_url, "ok": r.ok, "status": r.status, "failure_kind": failure_kind(r)}
            for c, r in runs
        ]
        if len(order) > 1
        else []
    )
    ctx, run = runs[-1]
    if run.ok:
        return run, ctx, records
    failures = [
        CandidateFailure(c.base_url, failure_kind(r) or TRANSPORT, r.message, r.status) for c, r in runs
    ]
    picked = select_candidate_failure(failures)
    ctx, run = runs[next(i for i, f in enumerate(failures) if f is picked)]
    return run, ctx, records
