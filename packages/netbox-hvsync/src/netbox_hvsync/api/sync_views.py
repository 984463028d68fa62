"""`sync/schedule/` and `jobs/{id}/cancel/`: queue and cancel sync jobs, each under its own permission.

The schedule body is validated by `netbox_hvsync.scheduling` (shared with the UI schedule form).
"""

from __future__ import annotations

import logging
from typing import Any

import django_rq
from core.api.serializers import JobSerializer
from core.choices import JobStatusChoices
from core.models import Job
from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from netbox.api.authentication import TokenPermissions
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from netbox_hvsync.backend.cancel import stop_backend_runs
from netbox_hvsync.jobs import enqueue_sync
from netbox_hvsync.querysets import sync_jobs
from netbox_hvsync.scheduling import SCHEDULE_PERMISSIONS, SyncScheduleSerializer, missing_permissions

logger = logging.getLogger("netbox_hvsync.api")

CANCELLABLE = (
    JobStatusChoices.STATUS_PENDING,
    JobStatusChoices.STATUS_SCHEDULED,
    JobStatusChoices.STATUS_RUNNING,
)


class JobCancelPermission(TokenPermissions):
    """Cancelling changes a job: POST maps to `core.change_job` instead of `core.add_job`."""

    perms_map = {**TokenPermissions.perms_map, "POST": ["%(app_label)s.change_%(model_name)s"]}


class SyncScheduleView(APIView):
    """POST: queue a sync (needs `scheduling.SCHEDULE_PERMISSIONS`, and view permission on every object
    the body names). Answers 201 with the core job row."""

    queryset = Job.objects.all()  # TokenPermissions: POST requires core.add_job; token must be write-enabled

    def get_view_name(self) -> str:
        return "Schedule sync"

    @extend_schema(request=SyncScheduleSerializer, responses={201: JobSerializer})
    def post(self, request: Request) -> Response:
        if missing := missing_permissions(request.user):
            raise PermissionDenied(
                f"Scheduling a sync requires the {' and '.join(SCHEDULE_PERMISSIONS)} permissions "
                f"(missing: {', '.join(missing)})."
            )
        body = SyncScheduleSerializer(data=request.data, context={"user": request.user})
        body.is_valid(raise_exception=True)
        job = enqueue_sync(user=request.user, **body.validated_data)
        logger.info("sync job %s queued by %s", job.pk, request.user)
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_201_CREATED)


class JobCancelView(APIView):
    """POST: cancel a pending, scheduled or running sync job (needs `core.change_job` on that job)."""

    queryset = Job.objects.all()
    permission_classes = [JobCancelPermission]

    def get_view_name(self) -> str:
        return "Cancel sync job"

    @extend_schema(request=None, responses={200: JobSerializer})
    def post(self, request: Request, pk: int) -> Response:
        if not request.user.has_perm("core.change_job"):
            raise PermissionDenied("Cancelling a job requires the core.change_job permission.")
        job = get_object_or_404(sync_jobs(Job.objects.restrict(request.user, "change")), pk=pk)
        if job.status not in CANCELLABLE:
            return Response(
                {
                    "detail": f"Job {job.pk} is {job.status}; only pending, scheduled or running jobs can be cancelled."
                },
                status=status.HTTP_409_CONFLICT,
            )
        _stop_rq_job(job)
        stopped = stop_backend_runs(job)
        with transaction.atomic():
            job.log(_cancel_record(request.user))
            if stopped:
                job.log(_note(stopped))
            job.terminate(status=JobStatusChoices.STATUS_FAILED, error=f"Cancelled by {request.user}")
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_200_OK)


def _cancel_record(user: Any) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"levelno": logging.WARNING, "levelname": "WARNING", "msg": f"Cancelled by {user}"}
    )


def _note(message: str) -> logging.LogRecord:
    return logging.makeLogRecord({"levelno": logging.INFO, "levelname": "INFO", "msg": message})


def _stop_rq_job(job: Job) -> None:
    """Best effort: drop the queued RQ job, or ask the worker to stop a running one."""
    from rq.command import send_stop_job_command
    from rq.exceptions import InvalidJobOperation, NoSuchJobError
    from rq.job import Job as RQJob

    try:
        queue = django_rq.get_queue(job.queue_name or "default")
        rq_job = RQJob.fetch(str(job.job_id), connection=queue.connection)
        if job.status == JobStatusChoices.STATUS_RUNNING:
            send_stop_job_command(queue.connection, str(job.job_id))
        else:
            rq_job.cancel()
    except (NoSuchJobError, InvalidJobOperation):
        pass
    except Exception as exc:  # Redis unreachable: the row is still marked, the worker checks it
        logger.warning("could not stop RQ job %s: %s", job.job_id, type(exc).__name__)
