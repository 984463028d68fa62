"""One stage request with retries, attempt records and a composed failure (SPEC 6.2, 6.3, 7.3).

Glue opens the stream (`GET /<stage>/stream` with query flags) through `open_stream`; this module
decides what each attempt was, whether to retry (statuses of 500 and above only), which status the
plugin reports, and the one message both the job error and the raised error carry.

`run_stage_rebinding` adds SPEC 5.2.10: after a 401 the stored key is re-checked read-only (the caller's
`recheck`: GET /auth/keys with the stored key, never a substitute key or a bootstrap). When the backend
accepts it again the stage is retried in a new failure-selection epoch of the stage's `AttemptLog`, so the
composed error of the retried run is chosen from its own attempts only; a failed re-check ends there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .failures import (
    AttemptLog,
    AttemptRecord,
    classify_answer,
    is_bootstrapping_answer,
    primary_attempt,
    propagate_status,
    readiness_advisory,
    should_retry,
)
from .redaction import redacted_detail, sweep_text
from .sse import consume_stage_stream
from .transport import TransportError, read_answer


class StreamResponse(Protocol):
    """The part of a streaming `requests.Response` the runner reads."""

    status_code: int
    headers: Mapping[str, str]

    @property
    def text(self) -> str: ...

    def iter_lines(self) -> Iterable[str | bytes]: ...


class KeyRecheck(Protocol):
    """What a read-only re-check of the stored key answered (`rules.adoption.AdoptionOutcome`)."""

    @property
    def ok(self) -> bool: ...

    @property
    def status(self) -> int | None: ...

    @property
    def error(self) -> str: ...


@dataclass
class StageRun:
    stage: str
    ok: bool
    status: int
    attempts: list[AttemptRecord] = field(default_factory=list)
    message: str = ""
    advisory: str | None = None
    recheck_key: bool = False
    complete: dict[str, Any] | None = None
    failure_payload: dict[str, Any] | None = None
    #: the last read-only re-check of the stored key after a 401 (`ok`, `status`, `error`)
    key_recheck: dict[str, Any] | None = None
    #: how many times a successful re-check started a new epoch and retried the stage
    rebinds: int = 0


def default_backoff(attempt: int) -> float:
    return float(min(2 ** (attempt - 1), 8))


def run_stage(
    stage: str,
    open_stream: Callable[[], StreamResponse],
    *,
    max_attempts: int = 3,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    backoff: Callable[[int], float] = default_backoff,
    known_secrets: Iterable[str] = (),
    on_step: Callable[[dict[str, Any]], None] | None = None,
    log: AttemptLog | None = None,
) -> StageRun:
    """Run one stage; a failed run carries a stamped payload and the composed primary cause.

    With a `log`, attempts are recorded in its current epoch (numbered on from its earlier epochs) and the
    primary cause is chosen from that epoch; the readiness advisory is evaluated over all its attempts."""
    secrets = tuple(s for s in known_secrets if s)
    log = log if log is not None else AttemptLog()
    earlier = len(log.all_attempts())
    attempts: list[AttemptRecord] = []
    last_status: int | None = None
    for number in range(earlier + 1, earlier + max_attempts + 1):
        started = clock()
        try:
            response = open_stream()
        except TransportError as exc:
            detail = f"{exc.kind}: {sweep_text(str(exc), secrets)}"
            attempt = AttemptRecord(number, None, detail, "transport", clock() - started)
        else:
            if response.status_code == 200:
                outcome = consume_stage_stream(response.iter_lines(), on_step=on_step, known_secrets=secrets)
                if outcome.ok:
                    return StageRun(stage, True, 200, attempts, complete=outcome.complete)
                attempt = AttemptRecord(
                    number, None, outcome.error, outcome.failure_kind or "transport", clock() - started
                )
                attempts.append(attempt)
                log.record(attempt)
                last_status = None
                break  # a stream-level failure has no HTTP status of 500 and above: not retried
            answer = read_answer(response)
            kind = classify_answer(answer)
            if answer.is_redirect:
                detail = f"redirect refused (HTTP {answer.status})"
            elif answer.is_json:
                detail = redacted_detail(answer.body, answer.text, secrets)
            else:
                detail = f"non-JSON body (HTTP {answer.status})"
            attempt = AttemptRecord(
                number,
                answer.status,
                detail,
                kind,
                clock() - started,
                bootstrapping=is_bootstrapping_answer(answer),
            )
        attempts.append(attempt)
        log.record(attempt)
        last_status = attempt.status
        if not should_retry(attempt.status) or number == earlier + max_attempts:
            break
        sleep(backoff(number - earlier))
    primary = primary_attempt(log.current) if log.current else None
    decision = propagate_status(primary.status if primary is not None else last_status)
    message = log.composed_message(what=f"stage {stage}")
    primary = primary or primary_attempt(attempts)
    payload = {
        "stage": stage,
        "ok": False,
        "status": decision.status,
        "error": message,
        "failure_kind": primary.failure_kind,
        "attempts": [a.as_dict() for a in attempts],
    }
    return StageRun(
        stage,
        False,
        decision.status,
        attempts,
        message=message,
        advisory=readiness_advisory(log.all_attempts()),
        recheck_key=decision.recheck_key,
        failure_payload=payload,
    )


def run_stage_rebinding(
    stage: str,
    open_stream: Callable[[], StreamResponse],
    *,
    recheck: Callable[[], KeyRecheck],
    max_rebinds: int = 1,
    **options: Any,
) -> StageRun:
    """`run_stage` with SPEC 5.2.10: a 401 re-checks the stored key read-only; a successful rebind starts a
    new failure-selection epoch and retries the stage (at most `max_rebinds` times). A failed re-check, or
    another 401 once the rebinds are spent, returns the 401 run as it is."""
    log = AttemptLog()
    run = run_stage(stage, open_stream, log=log, **options)
    rebinds = 0
    checked: dict[str, Any] | None = None
    while run.recheck_key:
        outcome = recheck()
        checked = {"ok": outcome.ok, "status": outcome.status, "error": outcome.error}
        run.key_recheck = checked
        if not outcome.ok or rebinds >= max_rebinds:
            break
        rebinds += 1
        log.start_epoch()
        run = run_stage(stage, open_stream, log=log, **options)
    run.key_recheck = checked
    run.rebinds = rebinds
    if run.failure_payload is not None and rebinds:
        run.failure_payload["epoch"] = len(log.epochs)
    return run
