"""The preflight of a sync job (SPEC 6, 7.3): credentials, the backend address, pushes and the blockers.

The rules (`rules.preflight`) decide the order and what blocks; this phase decrypts each endpoint's
credentials (a row that does not decrypt fails the job by name), picks the backend address that answers
(hostname first, then IP), records every push the preflight makes, and writes its outcome into the
sync block before the scope is resolved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import transaction
from netbox_hvsync.backend.failover import probe_candidates
from netbox_hvsync.backend.push import (
    fingerprint_key,
    hv_record,
    record_hv_push,
    record_inventory_push,
    retire_pending,
)
from netbox_hvsync.backend.resolution import ResolvedBackend
from netbox_hvsync.crypto import CredentialDecryptionError, undecryptable
from netbox_hvsync.models import HvEndpoint
from netbox_hvsync.rules.failures import APPLICATION
from netbox_hvsync.rules.preflight import PreflightBlocked, http_steps, run_preflight
from netbox_hvsync.rules.push import PushResult
from netbox_hvsync.rules.redaction import sweep_text
from netbox_hvsync.rules.transport import BackendContext
from netbox_hvsync.sync.state import RunState

Record = TypeVar("Record")


class PreflightPhase(RunState):
    """The preflight part of a sync run (`SyncRun` in `netbox_hvsync.sync.runner`)."""

    @staticmethod
    def decrypted(record_of: Callable[[Any], Record], row: Any) -> Record:
        """A row's record with its credentials; a row whose credentials do not decrypt with the configured
        key (PLUGINS_CONFIG `encryption_key` changed) fails the job by name, before anything is sent."""
        try:
            return record_of(row)
        except CredentialDecryptionError:
            raise CredentialDecryptionError(undecryptable(row)) from None

    def pick_candidate(self, resolved: ResolvedBackend) -> ResolvedBackend:
        """Hostname first, then IP (SPEC 6.2): use the first address of the backend that answers."""
        picked, probes = probe_candidates(resolved)
        if probes:
            self.block["backend_candidates"] = probes
            if picked.context != resolved.context:
                self.logger.warning(
                    "backend %s did not answer at %s; using %s",
                    resolved.row.pk,
                    resolved.context.base_url,
                    picked.context.base_url,
                )
        return picked

    def preflight(
        self,
        resolved: ResolvedBackend | None,
        inventory_records: list,
        hv_records: list,
        unadopted: Sequence[str] = (),
    ) -> Any:
        started = time.monotonic()
        self.logger.info(
            "preflight: %d inventory endpoint(s), %d hv endpoint(s) in scope",
            len(inventory_records),
            len(hv_records),
        )

        def resolve_context(selected: int | None) -> BackendContext | None:
            return resolved.context if resolved is not None else None

        transport = resolved.transport if resolved is not None else None
        steps = http_steps(transport, resolve_context, fingerprint_key())  # type: ignore[arg-type]
        push_inventory, push_hv = steps.push_inventory, steps.push_hv

        def push_inventory_and_record(ctx: BackendContext, record: Any) -> Any:
            result = push_inventory(ctx, record)
            record_inventory_push(record.pk, record, result)
            return result

        def push_hv_and_record(ctx: BackendContext, record: Any, rows: Any) -> Any:
            """SPEC 2.6: push the grant as it is now, not as the job read it. The row is re-read under
            a row lock held until the result is recorded, so a revocation saved since the job started is
            what the backend gets, and one saved during the push waits for it (then pushes itself)."""
            with transaction.atomic():
                row = (
                    HvEndpoint.objects.select_for_update(of=("self",))
                    .select_related("ip_address")
                    .filter(pk=record.pk)
                    .first()
                )
                if row is None:
                    return PushResult(
                        False,
                        f"hv endpoint {record.pk} was deleted after the job started; not pushed",
                        None,
                        failure_kind=APPLICATION,
                    )
                fresh = self.decrypted(hv_record, row)
                result = push_hv(ctx, fresh, rows)
                record_hv_push(fresh, result)
            return result

        steps.push_inventory = push_inventory_and_record
        steps.push_hv = push_hv_and_record
        steps.retire_deleted = lambda ctx: retire_pending(transport, ctx)  # type: ignore[arg-type]
        try:
            report = run_preflight(
                steps,
                inventory_endpoints=inventory_records,
                hv_endpoints=hv_records,
                selected_backend_id=self.block.get("backend_endpoint_id"),
                unusable=unadopted,
            )
        except PreflightBlocked as exc:
            self.block["preflight"] = {"blocked": exc.code, "duration_ms": self._ms(started)}
            raise self.fail(f"Preflight blocked the sync: {exc}") from None
        for warning in report.warnings:
            self.logger.warning("preflight: %s", sweep_text(warning, self.secrets))
        schemes = {r.pk: r.scheme for r in inventory_records}  # the run page warns on "http" (C1)
        self.block["preflight"] = {
            "duration_ms": self._ms(started),
            "phases": report.phases,
            "inventory_pushes": {
                pk: {"ok": r.ok, "status": r.status, "scheme": schemes.get(pk, "")}
                for pk, r in report.inventory_results.items()
            },
            "hv_pushes": {
                pk: {"ok": r.ok, "status": r.status, "backend_id": r.backend_id}
                for pk, r in report.hv_results.items()
            },
            "skipped_hv": {pk: d.value for pk, d in report.skipped_hv.items()},
        }
        self.block["warnings"].extend(report.warnings)
        self.logger.info("preflight done in %d ms", self.block["preflight"]["duration_ms"])
        self.save()
        return report


__all__ = ["PreflightPhase"]
