"""SPEC 4.5 "Preflight at the start of every sync job" (steps 1-6) and "Blocking conditions" B1-B6,
run over the real push functions and an in-memory backend."""

import pytest
from fakes import API_KEY, BASE, FakeResponse, FakeTransport, refused
from netbox_hvsync.rules.budgets import BudgetDecision
from netbox_hvsync.rules.fingerprints import credential_fingerprint
from netbox_hvsync.rules.preflight import PreflightBlocked, append_hint, http_steps, run_preflight
from netbox_hvsync.rules.records import HvEndpointRecord, InventoryEndpointRecord
from netbox_hvsync.rules.transport import BackendContext

FP_KEY = b"fingerprint-key"
TOKEN = "planted-inventory-token-0123456789"


def inv(pk: int = 1, *, fingerprint: str | None = None, **kw) -> InventoryEndpointRecord:
    base = dict(
        pk=pk,
        name=f"nb{pk}",
        domain="netbox.example",
        port=443,
        token_version=2,
        token_key="kid",
        token=TOKEN,
        verify_ssl=True,
        enabled=True,
    )
    base.update(kw)
    record = InventoryEndpointRecord(**base)
    if fingerprint is None:
        fingerprint = credential_fingerprint(FP_KEY, record.token_version, record.token_key, record.token)
    return InventoryEndpointRecord(**{**base, "pushed_credential_fingerprint": fingerprint})


OUR_ROW = {
    "id": 1,
    "name": "anything",
    "domain": "netbox.example",
    "ip_address": "127.0.0.1",
    "port": 443,
    "scheme": "https",
    "token_version": 2,
    "verify_ssl": True,
    "enabled": True,
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def backend(**routes) -> FakeTransport:
    """A healthy, initialised backend that knows our key; routes override."""
    t = FakeTransport()
    t.on("GET", "/health", FakeResponse(200, {"status": "ok", "ready": True}))
    t.on("GET", "/auth/bootstrap-status", FakeResponse(200, {"needs_bootstrap": False, "has_db_keys": True}))
    t.on("GET", "/auth/keys", FakeResponse(200, {"keys": []}))
    t.on("GET", "/inventory/endpoint", FakeResponse(200, [OUR_ROW]))
    t.on("PUT", "/inventory/endpoint/1", FakeResponse(200, OUR_ROW))
    t.on("GET", "/hv/endpoints", FakeResponse(200, []))
    t.on("POST", "/hv/endpoints", FakeResponse(201, {"id": 50}))
    for key, value in routes.items():
        method, _, path = key.partition(" ")
        t.on(method, path, value)
    return t


def run(t: FakeTransport, inventories, hvs=(), *, clock=None, selected=None, context=True, unusable=()):
    ctx = BackendContext(BASE, API_KEY, 1)
    clock = clock or Clock()

    def sleep(seconds: float) -> None:
        clock.now += seconds

    steps = http_steps(
        t, lambda _sel: ctx if context else None, FP_KEY, health_budget=1.0, clock=clock, sleep=sleep
    )
    return run_preflight(
        steps,
        inventory_endpoints=list(inventories),
        hv_endpoints=list(hvs),
        selected_backend_id=selected,
        unusable=unusable,
    )


def test_happy_path_order_of_steps() -> None:
    """Steps 1-6 in order: health, key, push every enabled inventory endpoint, one hv listing, hv pushes."""
    t = backend()
    hvs = [
        HvEndpointRecord(pk=7, name="a", domain="a.example"),
        HvEndpointRecord(pk=8, name="b", domain="b.example"),
    ]
    report = run(t, [inv()], hvs)
    assert t.paths() == [
        "GET /health",
        "GET /auth/bootstrap-status",
        "GET /auth/keys",
        "GET /inventory/endpoint",
        "PUT /inventory/endpoint/1",
        "GET /hv/endpoints",
        "POST /hv/endpoints",
        "POST /hv/endpoints",
    ]
    assert report.warnings == [] and report.hint == ""
    assert report.inventory_results[1].ok and set(report.hv_results) == {7, 8}
    assert all(not c.allow_redirects for c in t.calls)


def test_b1_names_the_pinned_endpoint_and_calls_nothing() -> None:
    """B1: "no usable backend; the error names the selected endpoint id when one was pinned"."""
    t = backend()
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv()], context=False, selected=5)
    assert info.value.code == "B1" and "selected backend endpoint id 5" in str(info.value)
    assert t.calls == []
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv()], context=False)
    assert str(info.value) == "B1: no usable backend endpoint"


def test_b1_says_why_rows_were_passed_over() -> None:
    """A row whose key its target did not accept is not used; the B1 message says which and why."""
    t = backend()
    why = "backend endpoint 'b' (id 3): its key was not accepted: GET /auth/keys: HTTP 401"
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv()], context=False, unusable=[why])
    assert str(info.value) == f"B1: no usable backend endpoint; {why}"
    assert t.calls == []


def test_health_and_key_failures_are_warnings() -> None:
    """Step 2 waits within a short bounded time; step 3: "Failure is a warning." """
    t = backend(
        **{"GET /health": refused(), "GET /auth/keys": FakeResponse(401, {"detail": "Invalid API key"})}
    )
    report = run(t, [inv()])
    assert report.warnings[0] == "backend /health did not answer within the wait budget"
    assert "GET /auth/keys: the backend rejected the key (HTTP 401: Invalid API key)" in report.warnings[1]
    assert API_KEY not in report.hint


def test_b2_without_consulting_the_backend_rows() -> None:
    """Step 4: "If no inventory endpoint is enabled, raise B2 without consulting the backend's rows." The
    decision does not depend on them; the only inventory traffic is the credential-free disable of the
    backend's row (issue 39: a disable reaches the backend, and a failed one is retried here)."""
    t = backend()
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv(enabled=False)])
    assert info.value.code == "B2" and "the backend's inventory endpoint is disabled" in info.value.message
    assert [p for p in t.paths() if "inventory" in p or "hv" in p] == [
        "GET /inventory/endpoint",
        "PUT /inventory/endpoint/1",
    ]
    put = next(c for c in t.calls if c.method == "PUT")
    assert put.json == {"enabled": False}  # no token: nothing moves (C2)
    assert TOKEN not in t.everything_sent()


def test_b2_retries_a_failed_disable_and_stays_b2_whatever_the_backend_answers() -> None:
    failing = backend(**{"PUT /inventory/endpoint/1": FakeResponse(500, {"detail": "db down"})})
    with pytest.raises(PreflightBlocked) as info:
        run(failing, [inv(enabled=False)])
    assert info.value.code == "B2" and "retried next time" in info.value.message
    already = backend(**{"GET /inventory/endpoint": FakeResponse(200, [{**OUR_ROW, "enabled": False}])})
    with pytest.raises(PreflightBlocked) as info:
        run(already, [inv(enabled=False)])
    assert info.value.code == "B2" and "PUT /inventory/endpoint/1" not in already.paths()
    with pytest.raises(PreflightBlocked) as info:  # no inventory endpoint at all: nothing to disable
        run(backend(), [])
    assert info.value.code == "B2"


def test_b3_backend_holds_no_inventory_endpoint() -> None:
    """B3: "push failed and the backend list confirms it holds no inventory endpoint"."""
    t = backend(
        **{
            "GET /inventory/endpoint": FakeResponse(200, []),
            "POST /inventory/endpoint": FakeResponse(500, {"detail": "database is locked"}),
        }
    )
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv()])
    assert info.value.code == "B3" and "database is locked" in info.value.message
    assert t.paths()[-1] == "GET /inventory/endpoint", "the listing is consulted after the failed push"


def failing_put(rows):
    return {
        "GET /inventory/endpoint": FakeResponse(200, rows),
        "PUT /inventory/endpoint/1": FakeResponse(503, raw_text="<html>gateway</html>"),
    }


def test_b4_identity_no_row_points_here() -> None:
    """B4: "push failed and no stored row provably points at this inventory system (identity)"; "a current
    row of a different inventory system never rescues a drifted row of ours"."""
    other = {**OUR_ROW, "domain": "other-netbox.example"}
    with pytest.raises(PreflightBlocked) as info:
        run(backend(**failing_put([other])), [inv()])
    assert (
        info.value.code == "B4"
        and "no backend row provably points at this inventory system (netbox.example:443)"
        in info.value.message
    )
    drifted_ours = {**OUR_ROW, "token_version": 1}
    with pytest.raises(PreflightBlocked) as info:
        run(backend(**failing_put([drifted_ours, {**other, "id": 2}])), [inv()])
    assert info.value.code == "B4" and "superseded (drifted: token_version)" in info.value.message


def test_b4_identity_fails_closed_without_a_host() -> None:
    with pytest.raises(PreflightBlocked) as info:
        run(backend(**failing_put([OUR_ROW])), [inv(domain="", ip_address=None)])
    assert info.value.code == "B4" and "an unresolvable target" in info.value.message


def test_b4_currency_absent_value_is_drift() -> None:
    row = {k: v for k, v in OUR_ROW.items() if k != "verify_ssl"}
    with pytest.raises(PreflightBlocked) as info:
        run(backend(**failing_put([row])), [inv()])
    assert info.value.code == "B4" and "verify_ssl" in info.value.message


def test_stale_duplicate_does_not_decide() -> None:
    """ "Scanning continues across all rows; a stale duplicate does not decide." """
    stale = {**OUR_ROW, "verify_ssl": False}
    report = run(backend(**failing_put([stale, {**OUR_ROW, "id": 2}])), [inv()])
    assert (
        len(report.warnings) == 1
        and "ours, current and holds the last pushed credentials" in report.warnings[0]
    )


def test_b5_listing_failed_and_every_push_failed() -> None:
    """B5: "push failed for every enabled row and the listing itself failed (unknown is not ours)"."""
    t = backend(**{"GET /inventory/endpoint": FakeResponse(500, {"detail": "db down"})})
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv(1), inv(2)])
    assert info.value.code == "B5" and "unknown is not ours" in info.value.message


def test_b5_exception_when_another_row_pushed() -> None:
    """B5: "if some other enabled row pushed successfully, continue with a warning"; "A listing that fails
    after a successful push is non-fatal." """
    t = backend(
        **{
            "GET /inventory/endpoint": [
                FakeResponse(200, [OUR_ROW]),
                FakeResponse(500, {"detail": "x"}),
                FakeResponse(500, {"detail": "db down"}),
            ]
        }
    )
    report = run(t, [inv(1), inv(2)])
    assert report.inventory_results[1].ok and not report.inventory_results[2].ok
    assert (
        len(report.warnings) == 1
        and "another enabled inventory endpoint pushed successfully" in report.warnings[0]
    )
    assert report.phases[0]["phase"] == "inventory_push" and report.phases[0]["status"] == "warning"


@pytest.mark.parametrize("stored", ["", "v1:" + "0" * 64])
def test_b6_fingerprint_empty_or_changed(stored: str) -> None:
    """B6: "push failed, a stored row is ours and current, but the local credential fingerprint differs
    from the last successful push or is empty"."""
    with pytest.raises(PreflightBlocked) as info:
        run(backend(**failing_put([OUR_ROW])), [inv(fingerprint=stored)])
    assert info.value.code == "B6"
    assert ("never pushed" if not stored else "changed since the last successful push") in info.value.message
    assert TOKEN not in str(info.value)


def test_failed_hv_push_is_a_warning_and_listing_is_reused() -> None:
    """Step 6: "List the backend's hv rows once and reuse the list for every push ... A failed hv push is a
    warning." """
    t = backend(
        **{
            "POST /hv/endpoints": [
                FakeResponse(400, {"detail": "username: must be user@realm"}),
                FakeResponse(201, {"id": 51}),
            ]
        }
    )
    hvs = [
        HvEndpointRecord(pk=7, name="a", domain="a.example"),
        HvEndpointRecord(pk=8, name="b", domain="b.example"),
    ]
    report = run(t, [inv()], hvs)
    assert t.paths().count("GET /hv/endpoints") == 1
    assert report.warnings == [
        "hv endpoint 7 (a) push failed: POST /hv/endpoints: HTTP 400: username: must be user@realm"
    ]
    assert report.hv_results[8].ok


def test_hv_duplicates_refuse_the_sync() -> None:
    rows = [{"id": 3, "name": "a (inv:7)"}, {"id": 4, "name": "a2 (inv:7)"}]
    t = backend(
        **{
            "GET /hv/endpoints": FakeResponse(200, rows),
            "PUT /hv/endpoints/3": FakeResponse(200, {}),
            "PUT /hv/endpoints/4": FakeResponse(200, {}),
        }
    )
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv()], [HvEndpointRecord(pk=7, name="a", domain="a.example")])
    assert "2 backend rows claim (inv:7)" in str(info.value)


def test_push_budget_soft_and_hard_skips_are_reported() -> None:
    """SPEC 4.5: "Each skipped endpoint gets a warning runtime phase, is named in a job-log warning and in
    the preflight hint, with wording that distinguishes soft from hard skips." """
    clock = Clock()

    def slow_put(call):
        clock.now += 700
        return FakeResponse(200, {})

    def current(pk: int, name: str) -> dict:
        return {
            "id": 100 + pk,
            "name": f"{name} (inv:{pk})",
            "domain": f"{name}.example",
            "ip_address": "",
            "port": 8006,
            "username": "",
            "access_methods": ["token"],
            "verify_ssl": True,
            "enabled": True,
            "allow_template_builds": False,
            "timeout": 15,
            "max_retries": 2,
            "retry_backoff": 0.5,
        }

    rows = [current(1, "a"), current(2, "b"), current(4, "d")]
    t = backend(
        **{
            "GET /hv/endpoints": FakeResponse(200, rows),
            "PUT /hv/endpoints/101": slow_put,
            "POST /hv/endpoints": slow_put,
            "PUT /hv/endpoints/104": slow_put,
        }
    )
    hvs = [
        HvEndpointRecord(pk=1, name="a", domain="a.example"),  # pushed at t=0, takes 700 s
        HvEndpointRecord(pk=2, name="b", domain="b.example"),  # current, past soft: skipped (soft)
        HvEndpointRecord(pk=3, name="c", domain="c.example"),  # unknown: pushed past soft, takes 700 s
        HvEndpointRecord(pk=5, name="e", domain="e.example"),  # unknown: pushed at 1400 s, takes 700 s
        HvEndpointRecord(pk=4, name="d", domain="d.example"),
    ]  # past hard: skipped (hard)
    report = run(t, [inv()], hvs, clock=clock)
    assert report.skipped_hv == {2: BudgetDecision.SKIP_SOFT, 4: BudgetDecision.SKIP_HARD}
    assert set(report.hv_results) == {1, 3, 5}
    phases = {p["endpoint"]: p["phase"] for p in report.phases}
    assert phases == {2: "hv_push_skip_soft", 4: "hv_push_skip_hard"}
    assert "hv endpoint 2 (b): push skipped, soft push budget" in report.hint
    assert "hv endpoint 4 (d): push skipped, hard push ceiling" in report.hint


def test_hint_is_appended_to_later_stage_errors() -> None:
    """SPEC 4.5: "Non-fatal preflight warnings are carried as a hint and appended to any later stage error." """
    assert (
        append_hint("stage devices failed", "w1; w2") == "stage devices failed [preflight warnings: w1; w2]"
    )
    assert append_hint("stage devices failed", "") == "stage devices failed"


def test_planted_secrets_never_reach_warnings_or_errors() -> None:
    """DESIGN 7: "No secret (API key, token, password) appears in a log line, an error body, job data"; a
    backend that echoes every request body and header back in its errors must not leak them."""
    hv_secret = "planted-hv-token-value-abcdef123456"
    hv_password = "planted-hv-password-xyz987654"

    def echo(status: int):
        def handler(call):
            return FakeResponse(
                status, {"detail": f"rejected {call.json} with {call.headers}", "echo": call.json}
            )

        return handler

    t = backend(
        **{
            "GET /auth/keys": echo(401),
            "PUT /inventory/endpoint/1": echo(500),
            "GET /hv/endpoints": FakeResponse(200, []),
            "POST /hv/endpoints": echo(422),
        }
    )
    hvs = [
        HvEndpointRecord(
            pk=7,
            name="a",
            domain="a.example",
            access_methods=("token", "password"),
            token_value=hv_secret,
            password=hv_password,
        )
    ]
    report = run(t, [inv()], hvs)
    everything = repr(
        (report.warnings, report.phases, report.hint, report.hv_results, report.inventory_results)
    )
    for secret in (API_KEY, TOKEN, hv_secret, hv_password):
        assert secret not in everything
    assert "push failed" in report.hint
    t = backend(
        **{
            "PUT /inventory/endpoint/1": echo(500),
            "GET /inventory/endpoint": [FakeResponse(200, [OUR_ROW]), echo(500)],
        }
    )
    with pytest.raises(PreflightBlocked) as info:
        run(t, [inv()])
    assert info.value.code == "B5"
    assert TOKEN not in str(info.value) and API_KEY not in str(info.value)
