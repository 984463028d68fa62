"""SPEC 5.2.10 end to end: "After a 401 from the backend during a stage, the stored key is re-checked
read-only; no substitute key and no bootstrap is tried. A successful rebind starts a new failure-selection
epoch."

The proxy between NetBox's worker and the real backend answers one stage request with a 401; the job's
read-only re-check (GET /auth/keys with the stored key) reaches the real backend, which accepts the key, so
the job retries the stage in a new epoch. A persistent 401 (test_faults.py) still stops the job.
"""

from __future__ import annotations

from conftest import BACKEND_KEY, NetBox, Plugin, assert_no_secrets
from fault_proxy import Fault, FaultProxy

DEVICES = "/dcim/devices/create/stream"
DENIED = {"detail": "Invalid API key"}


def after_first_stage_call(faults: FaultProxy) -> list[str]:
    paths = faults.paths()
    return paths[paths.index(DEVICES) :]


def test_a_401_with_an_accepted_recheck_rebinds_and_retries_the_stage(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    faults.set(DEVICES, Fault("status", 401, DENIED, times=1))
    job = netbox.run_sync(sync_types=["devices"])
    assert job["status"]["value"] == "completed", job["error"]
    (stage,) = job["data"]["sync"]["stages"]
    assert stage["ok"] is True and stage["stage"] == "devices"
    assert stage["key_recheck"]["ok"] is True and stage["key_rebinds"] == 1
    after = after_first_stage_call(faults)
    assert after.count(DEVICES) == 2  # the 401, then the retry the real backend answered
    assert after.index("/auth/keys") < after.index(DEVICES, 1)  # re-checked before the retry
    assert "/auth/register-key" not in after  # no bootstrap, no substitute key
    keys_calls = [h for h in faults.hits if h.path.startswith("/auth/keys")]
    assert keys_calls and {h.headers.get("X-Service-API-Key") for h in keys_calls} == {BACKEND_KEY}
    assert_no_secrets(job, plugin.planted)


def test_the_retried_epoch_alone_selects_the_composed_error(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy
) -> None:
    """Before the rebind the 401 was the first application-level failure; the new epoch's own failure is
    the one the job error names."""
    faults.set(DEVICES, Fault("status", 401, DENIED, times=1))
    faults.set("/dcim/devices/create", Fault("status", 400, {"detail": "injected 400 after rebind"}))
    job = netbox.run_sync(sync_types=["devices"])
    assert job["status"]["value"] == "failed"
    (stage,) = job["data"]["sync"]["stages"]
    assert stage["ok"] is False and stage["status"] == 400 and stage["epoch"] == 2
    assert [a["status"] for a in stage["attempts"]] == [400]  # the new epoch's attempts only
    assert stage["key_recheck"]["ok"] is True and stage["key_rebinds"] == 1
    assert "injected 400 after rebind" in job["error"] and "HTTP 401" not in job["error"]
    assert job["error"] == job["data"]["sync"]["errors"][-1]
    assert after_first_stage_call(faults).count(DEVICES) == 2
    assert_no_secrets(job, plugin.planted)
