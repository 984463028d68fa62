"""`/plugins/hvsync/sync-state/`: the backend's bootstrap report and the repair action (SPEC 4.6, 5.3, 7.3).

GET (view permission on the backend endpoint) asks the backend for `GET /extras/bootstrap-status` and
shows the rules' badge, the detail and the raw (redacted) payload. POST is the repair: the rules' `run_repair`
checks the hard stops (missing `rules.repair.REPAIR_PERMISSIONS`, a repair sync already running), calls the
backend's custom-field reconcile best-effort, then queues a full sync through `enqueue_sync`, the same
pipeline as the full-update button; the flash message links the job. Both queue what the schedule
serializer accepts for this user (`scheduling`): the endpoints they may view. Two repairs racing queue one
sync: the queueing takes a transaction-scoped PostgreSQL advisory lock and looks for a running repair
again under it. Nothing here talks to Proxmox.
"""

from __future__ import annotations

import json
from typing import Any

from core.choices import JobStatusChoices
from core.models import Job
from django.contrib import messages
from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.utils.html import format_html
from django.views import View
from utilities.views import ConditionalLoginRequiredMixin

from netbox_hvsync.backend.resolution import resolve_backend
from netbox_hvsync.jobs import SYNC_JOB_NAME, enqueue_sync
from netbox_hvsync.rules.redaction import redact
from netbox_hvsync.rules.repair import (
    BOOTSTRAP_VIEW_PERMISSION,
    REPAIR_PERMISSIONS,
    RepairAlreadyRunning,
    bootstrap_badge,
    run_repair,
)
from netbox_hvsync.rules.transport import TransportError, call
from netbox_hvsync.scheduling import SCHEDULE_PERMISSIONS, SyncScheduleSerializer, missing_permissions
from netbox_hvsync.sync.branching import branching_installed

BOOTSTRAP_STATUS_PATH = "/extras/bootstrap-status"
RECONCILE_PATH = "/extras/custom-fields/reconcile"
BACKEND_READ_TIMEOUT = 10.0
RECONCILE_TIMEOUT = 60.0
ACTIVE_STATES = (
    JobStatusChoices.STATUS_PENDING,
    JobStatusChoices.STATUS_SCHEDULED,
    JobStatusChoices.STATUS_RUNNING,
)
BADGE_COLORS = {"ok": "green", "problem": "red", "skipped": "yellow", "unavailable": "gray"}
#: pg_advisory_xact_lock key serializing repair queueing (any constant no other code uses; "hvsyncR1").
REPAIR_LOCK_KEY = 0x6876_7379_6E63_5231


def full_sync_body(request: HttpRequest, use_branch: bool = False) -> tuple[dict[str, Any] | None, str]:
    """What a full sync of this user may cover (the schedule serializer's answer), or why it cannot run."""
    body = SyncScheduleSerializer(data={"use_branch": use_branch}, context={"user": request.user})
    if body.is_valid():
        return dict(body.validated_data), ""
    reasons = [
        f"{field}: {error}"
        for field, errors in body.errors.items()
        for error in (errors if isinstance(errors, list) else [errors])
    ]
    return None, "; ".join(reasons)


def repair_running() -> Job | None:
    return (
        Job.objects.filter(name=SYNC_JOB_NAME, status__in=ACTIVE_STATES, data__sync__repair=True)
        .order_by("-pk")
        .first()
    )


def fetch_bootstrap_status() -> tuple[int | None, Any, list[str]]:
    """(status, body, secrets to hide); status None when no backend is usable or it did not answer."""
    resolved = resolve_backend()
    if resolved is None:
        return None, {"detail": "no enabled backend endpoint with a key"}, []
    hidden = [resolved.context.api_key]
    try:
        answer = call(
            resolved.transport,
            "GET",
            resolved.context.url(BOOTSTRAP_STATUS_PATH),
            headers=resolved.context.auth_headers(),
            timeout=BACKEND_READ_TIMEOUT,
        )
    except TransportError as exc:
        return None, {"detail": f"backend unreachable ({exc.kind})"}, hidden
    finally:
        resolved.transport.close()
    if answer.is_redirect:
        return answer.status, {"detail": "redirect refused"}, hidden
    return answer.status, answer.body if answer.is_json else {"detail": "non-JSON answer"}, hidden


def reconcile_custom_fields() -> tuple[bool, str]:
    """Best effort: (ok, message); any refusal is a warning for the caller, never a stop."""
    resolved = resolve_backend()
    if resolved is None:
        return False, "no usable backend endpoint"
    try:
        answer = call(
            resolved.transport,
            "POST",
            resolved.context.url(RECONCILE_PATH),
            headers=resolved.context.auth_headers(),
            timeout=RECONCILE_TIMEOUT,
        )
    except TransportError as exc:
        return False, f"backend unreachable ({exc.kind})"
    finally:
        resolved.transport.close()
    body = answer.body if isinstance(answer.body, dict) else {}
    if answer.status == 200 and body.get("ok") is True:
        return True, ""
    detail = body.get("detail") or body.get("error") or "no detail"
    return False, f"HTTP {answer.status}: {str(redact(detail))[:300]}"


class SyncStateView(ConditionalLoginRequiredMixin, View):
    template_name = "netbox_hvsync/sync_state_page.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm(BOOTSTRAP_VIEW_PERMISSION):
            return HttpResponseForbidden(
                "viewing the bootstrap status needs view permission on backend endpoints"
            )
        status, body, hidden = fetch_bootstrap_status()
        badge = bootstrap_badge(status, body)
        context = {
            "badge": badge,
            "badge_color": BADGE_COLORS.get(badge.state, "gray"),
            "payload": json.dumps(redact(badge.payload, hidden), indent=2, sort_keys=True, default=str),
            "can_repair": not missing_permissions(request.user, REPAIR_PERMISSIONS),
            "running": repair_running(),
            "branching": branching_installed(),
        }
        return render(request, self.template_name, context)

    def post(self, request: HttpRequest) -> HttpResponse:
        if request.POST.get("action") == "full_sync":
            return self.full_sync(request)
        queued: dict[str, Job] = {}
        allowed = not missing_permissions(request.user, REPAIR_PERMISSIONS)
        body: dict[str, Any] | None = {}
        if allowed:
            body, reason = full_sync_body(request)
            if body is None:
                messages.error(request, f"Repair not started: {reason}")
                return redirect("plugins:netbox_hvsync:sync_state")

        def queue_full_sync() -> int:
            with transaction.atomic():
                with connection.cursor() as cursor:  # released at commit, after the job row is in
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [REPAIR_LOCK_KEY])
                if repair_running() is not None:
                    raise RepairAlreadyRunning()
                job = enqueue_sync(user=request.user, **(body or {}))
                job.data["sync"]["repair"] = True
                job.save(update_fields=["data"])
            queued["job"] = job
            return int(job.pk)

        outcome = run_repair(
            has_permission=allowed,
            repair_running=repair_running() is not None,
            reconcile=reconcile_custom_fields,
            queue_full_sync=queue_full_sync,
        )
        if not outcome.ok:
            messages.error(request, f"Repair not started: {outcome.error}")
            return redirect("plugins:netbox_hvsync:sync_state")
        for warning in outcome.warnings:
            messages.warning(request, warning)
        job = queued["job"]
        messages.success(
            request,
            format_html('Repair queued: <a href="{}">full sync job {}</a>', job.get_absolute_url(), job.pk),
        )
        return redirect("plugins:netbox_hvsync:sync_state")

    def full_sync(self, request: HttpRequest) -> HttpResponse:
        """The full-update button: the same `enqueue_sync` pipeline as REST `sync/schedule/` and repair."""
        if missing_permissions(request.user):
            messages.error(
                request,
                f"Full sync not queued: it needs the {' and '.join(SCHEDULE_PERMISSIONS)} permissions",
            )
            return redirect("plugins:netbox_hvsync:sync_state")
        use_branch = request.POST.get("use_branch") in ("on", "true", "1")
        if use_branch and not branching_installed():
            messages.error(request, "Full sync not queued: netbox-branching is not installed")
            return redirect("plugins:netbox_hvsync:sync_state")
        body, reason = full_sync_body(request, use_branch)
        if body is None:
            messages.error(request, f"Full sync not queued: {reason}")
            return redirect("plugins:netbox_hvsync:sync_state")
        job = enqueue_sync(user=request.user, **body)
        where = " in a working branch" if use_branch else ""
        messages.success(
            request,
            format_html('Full sync queued{}: <a href="{}">job {}</a>', where, job.get_absolute_url(), job.pk),
        )
        return redirect("plugins:netbox_hvsync:sync_state")
