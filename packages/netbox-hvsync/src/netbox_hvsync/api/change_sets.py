"""The apply path: `change-sets/` applies a batch of writes inside NetBox, in one transaction.

Each operation goes through the serializer NetBox's own REST route for that path uses, so field and
custom-field validation, the model's `clean()`, tags, changelog rows, the search index and event rules
behave as they do over REST. What changes is the cost: one request and one transaction per batch instead
of one transaction per object, and only ids in the answer instead of every object re-serialized.
The change set's id becomes the request id of every changelog row it writes, and the outcome is kept in
`AppliedChangeSet` so a client whose answer never came can read it back instead of writing twice.
Format: contracts/wire/change-set.schema.json; guide: docs/apply-path.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError, connections, router, transaction
from django.db.models.deletion import ProtectedError, RestrictedError
from django.utils import timezone
from netbox.api.authentication import TokenWritePermission
from netbox.context import events_queue
from rest_framework import status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from utilities.exceptions import AbortRequest
from utilities.permissions import get_permission_for_model

from netbox_hvsync.api.routes import enabled, target
from netbox_hvsync.models import AppliedChangeSet
from netbox_hvsync.models.change_sets import RETENTION
from netbox_hvsync.wire import change_sets
from netbox_hvsync.wire.change_sets import ChangeSet, ChangeSetError, Operation

ACTIONS = {"create": "add", "update": "change", "delete": "delete"}


class OperationFailed(Exception):
    """An operation NetBox refuses; `broken`: the database refused a statement, so the transaction
    cannot run another one (the later operations are not attempted)."""

    def __init__(self, status_code: int, broken: bool = False, **body: Any) -> None:
        super().__init__(status_code)
        self.status = status_code
        self.broken = broken
        self.body = body


class ChangeSetView(APIView):
    """GET: what this plugin offers (the backend's discovery). POST: apply one change set."""

    permission_classes = [IsAuthenticated, TokenWritePermission]

    def get_view_name(self) -> str:
        return "Change sets"

    def get(self, request: Request) -> Response:
        return Response(
            {
                "enabled": enabled(),
                "versions": [change_sets.FORMAT_VERSION],
                "max_operations": change_sets.MAX_OPERATIONS,
                "paths": sorted(change_sets.WRITABLE_PATHS),
                "retention_seconds": int(RETENTION.total_seconds()),
                # served flat by rows/<path>/ (api/rows.py) while the apply path is on
                "read_paths": sorted(change_sets.WRITABLE_PATHS) if enabled() else [],
            }
        )

    def post(self, request: Request) -> Response:
        if not enabled():
            return Response(
                {"detail": "The apply path is turned off (PLUGINS_CONFIG netbox_hvsync change_sets)."},
                status=status.HTTP_404_NOT_FOUND,
            )
        try:
            change_set = change_sets.parse(request.data)
        except ChangeSetError as exc:
            return Response({"field": exc.field, "detail": exc.message}, status=status.HTTP_400_BAD_REQUEST)
        stored = AppliedChangeSet.objects.filter(pk=change_set.id).first()
        if stored is not None:
            return _replay(stored, request)
        outcome, code = apply(change_set, request)
        return Response(outcome, status=code)


class ChangeSetOutcomeView(APIView):
    """GET change-sets/<id>/: the stored outcome of an applied change set (404: nothing landed)."""

    permission_classes = [IsAuthenticated]

    def get_view_name(self) -> str:
        return "Change set outcome"

    def get(self, request: Request, pk: Any) -> Response:
        stored = AppliedChangeSet.objects.filter(pk=pk).first()
        if stored is None:
            return Response(
                {"id": str(pk), "applied": False, "detail": "No change set with this id was applied."},
                status=status.HTTP_404_NOT_FOUND,
            )
        return _replay(stored, request)


def _replay(stored: AppliedChangeSet, request: Request) -> Response:
    if stored.user_id is not None and stored.user_id != request.user.pk and not request.user.is_superuser:
        return Response(
            {"detail": "This change set was applied by another user."}, status=status.HTTP_403_FORBIDDEN
        )
    return Response({**stored.outcome, "replayed": True})


@contextmanager
def _events_discarded_on_failure() -> Iterator[None]:
    """Events queued by a batch that rolls back must not fire (NetBox flushes the queue after the
    request); keep the queue as it was before the batch."""
    queue = events_queue.get()
    before = dict(queue) if queue is not None else None
    try:
        yield
    except BaseException:
        if queue is not None and before is not None:
            queue.clear()
            queue.update(before)
        raise


class _BatchRejected(Exception):
    """Raised inside the transaction to roll the batch back."""


def apply(change_set: ChangeSet, request: Request) -> tuple[dict[str, Any], int]:
    """Apply every operation in one transaction; if any fails, none lands and each failure is reported."""
    # The changelog groups rows by request id: this batch's rows carry the change set's id.
    django_request = getattr(request, "_request", request)
    django_request.id = change_set.id  # type: ignore[union-attr]
    aliases = {router.db_for_write(target(op.path).model) for op in change_set.operations}
    aliases.add(router.db_for_write(AppliedChangeSet))
    results: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    try:
        with ExitStack() as stack:
            for alias in sorted(aliases):
                stack.enter_context(transaction.atomic(using=alias))
            stack.enter_context(_events_discarded_on_failure())
            callbacks_before = {alias: len(connections[alias].run_on_commit) for alias in aliases}
            AppliedChangeSet.objects.filter(created__lt=timezone.now() - RETENTION).delete()
            ledger = AppliedChangeSet.objects.create(id=change_set.id, user=request.user, outcome={})
            ids: dict[str, int] = {}
            # No savepoint per operation: a failure rolls the whole batch back anyway, and NetBox 4.7
            # coalesces search indexing per savepoint scope (one "Search cache update" job per change
            # set, not one per object).
            for operation in change_set.operations:
                try:
                    result = _apply_one(operation, ids, request)
                except OperationFailed as failure:
                    errors.append(_error(operation, failure.status, failure.body))
                    if failure.broken:
                        break
                    continue
                results.append(result)
                if operation.ref:
                    ids[operation.ref] = result["id"]
            if errors:
                raise _BatchRejected
            outcome = {
                "version": change_sets.FORMAT_VERSION,
                "id": change_set.id,
                "applied": True,
                "results": results,
                "errors": [],
            }
            ledger.outcome = outcome
            ledger.save(update_fields=["outcome"])
            for alias in aliases:
                _coalesce_after_commit(alias, since=callbacks_before[alias])
    except _BatchRejected:
        statuses = [e["status"] for e in errors]
        outcome = {
            "version": change_sets.FORMAT_VERSION,
            "id": change_set.id,
            "applied": False,
            "results": [],
            "errors": errors,
        }
        return outcome, change_sets.error_status(statuses)
    except IntegrityError:
        # The same id committed meanwhile (a client's retry raced its first attempt): answer what landed.
        stored = AppliedChangeSet.objects.filter(pk=change_set.id).first()
        if stored is None:
            raise
        return {**stored.outcome, "replayed": True}, status.HTTP_200_OK
    return outcome, status.HTTP_200_OK


#: Attributes NetBox 4.7 puts on its deferred search-index flush callbacks (netbox/search/deferred.py)
_FLUSH_BATCH = "_netbox_search_flush_batch"
_FLUSH_ALIAS = "_netbox_search_flush_alias"
#: NetBox 4.7's after-commit callback that queues its config-context render sweep (extras/cache.py)
_RENDER_SWEEP = ("extras.cache", "invalidate_config_context_for_objects.<locals>.<lambda>")


def _coalesce_after_commit(alias: str, since: int) -> None:
    """Merge the after-commit work this batch registered into one of each kind (the batch commits whole):

    - search: NetBox 4.7 indexes after commit, one flush (one "Search cache update" job) per savepoint
      scope, and the savepoints it opens while saving some objects (an interface's MAC address, an IP's
      assignment) give each of those its own. They are merged into the first: one job per change set.
    - config context: NetBox 4.7 invalidates a VM's pre-rendered config context on every save and tag
      change and registers, each time, the same parameterless call (queue the render sweep, under an
      advisory lock): 2,000 for 1,000 VMs. The sweep re-renders every invalidated object, so the first
      call does what they all did.

    Releases without either (4.5 and 4.6 index inline and keep no render cache) register none of these,
    and this changes nothing."""
    connection = connections[alias]
    merged_flush: dict[Any, str] | None = None
    render_kept = False
    kept = []
    for entry in connection.run_on_commit[since:]:  # only what this batch registered
        func = entry[1]
        batch = getattr(func, _FLUSH_BATCH, None)
        if batch is not None and getattr(func, _FLUSH_ALIAS, None) == alias:
            if merged_flush is not None:
                for key, op in batch.items():  # a removal wins, as NetBox coalesces
                    if merged_flush.get(key) != "remove":
                        merged_flush[key] = op
                continue
            merged_flush = batch
        elif (getattr(func, "__module__", None), getattr(func, "__qualname__", None)) == _RENDER_SWEEP:
            if render_kept:
                continue
            render_kept = True
        kept.append(entry)
    connection.run_on_commit[since:] = kept


def _error(operation: Operation, code: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"index": operation.index, "op": operation.op, "path": operation.path, "status": code, **body}


def _apply_one(operation: Operation, ids: dict[str, int], request: Request) -> dict[str, Any]:
    """One operation, as NetBox's REST view for its path would do it; `OperationFailed` if refused."""
    spec = target(operation.path)
    action = ACTIONS[operation.op]
    user = request.user
    if not user.has_perm(get_permission_for_model(spec.model, action)):
        raise OperationFailed(403, detail=f"You may not {action} {spec.model._meta.verbose_name_plural}.")
    permitted = spec.model.objects.restrict(user, action)
    instance = None
    if operation.op != "create":
        if isinstance(operation.id, str) and operation.id not in ids:
            raise OperationFailed(400, detail=f"refers to '{operation.id}', whose create failed")
        object_id = ids[operation.id] if isinstance(operation.id, str) else operation.id
        instance = permitted.filter(pk=object_id).first()
        if instance is None:
            if spec.model.objects.filter(pk=object_id).exists():
                raise OperationFailed(403, detail=f"You may not {action} this object.")
            raise OperationFailed(404, detail=f"No {spec.model._meta.verbose_name} with id {object_id}.")
        if hasattr(instance, "snapshot"):
            instance.snapshot()
    try:
        if operation.op == "delete":
            label = str(instance)
            instance.delete()  # type: ignore[union-attr]
            return {"index": operation.index, "op": "delete", "id": object_id, "display": label}
        missing = [name for name in change_sets.references_in(operation.data) if name not in ids]
        if missing:
            raise OperationFailed(400, detail=f"refers to '{missing[0]}', whose create failed")
        data = change_sets.resolve_references(operation.data, ids)
        serializer = spec.serializer(
            instance, data=data, partial=operation.op == "update", context={"request": request}
        )
        if not serializer.is_valid():
            raise OperationFailed(400, errors=serializer.errors)
        saved = serializer.save()
    except (ProtectedError, RestrictedError) as exc:
        raise OperationFailed(409, detail=str(exc.args[0] if exc.args else exc)) from None
    except IntegrityError as exc:
        raise OperationFailed(409, broken=True, detail=str(exc).splitlines()[0]) from None
    except DataError as exc:
        raise OperationFailed(400, broken=True, detail=str(exc).splitlines()[0]) from None
    except DjangoValidationError as exc:
        raise OperationFailed(400, errors=getattr(exc, "message_dict", {"detail": exc.messages})) from None
    except AbortRequest as exc:
        raise OperationFailed(400, detail=str(exc)) from None
    # Object permissions may constrain field values: the saved object must still be one the user may touch
    # (nothing to check when the user's permission has no constraints: `restrict` then added no filter).
    if permitted.query.where and not permitted.filter(pk=saved.pk).exists():
        raise OperationFailed(403, detail=f"You may not {action} an object with these values.")
    return {"index": operation.index, "op": operation.op, "id": saved.pk, "display": str(saved)}
