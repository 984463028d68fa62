"""SPEC 4.5 rule 4: "Wire-id resolution (single and batch) requires exactly one suffix match and an equal
target including port; failure returns a message naming the cause (unregistered, no resolvable host,
target mismatch with the actual host, no usable id). In the batch path the endpoint is dropped from scope
and the reason logged." """

from netbox_hvsync.rules.records import HvEndpointRecord
from netbox_hvsync.rules.wire_ids import resolve_wire_id, resolve_wire_ids

HV = HvEndpointRecord(pk=7, name="pve", domain="pve.example", port=8006)


def test_single_resolution_and_each_cause() -> None:
    good = [{"id": 12, "name": "pve (inv:7)", "domain": "pve.example", "port": 8006}]
    assert resolve_wire_id(HV, good).backend_id == 12
    assert "unregistered" in resolve_wire_id(HV, []).error
    dup = resolve_wire_id(HV, [*good, {"id": 13, "name": "x (inv:7)", "domain": "pve.example", "port": 8006}])
    assert not dup.ok and "2 backend rows claim (inv:7)" in dup.error
    hostless = HvEndpointRecord(pk=7, name="pve", domain="", ip_address=None, port=8006)
    assert "no resolvable host" in resolve_wire_id(hostless, good).error
    row_hostless = [{"id": 12, "name": "pve (inv:7)", "domain": "", "ip_address": "", "port": 8006}]
    assert "backend row (inv:7) has no resolvable host" in resolve_wire_id(HV, row_hostless).error
    moved = [{"id": 12, "name": "pve (inv:7)", "domain": "pve2.example", "port": 8006}]
    assert resolve_wire_id(HV, moved).error.endswith(
        "target mismatch, plugin expects pve.example:8006 but the backend row points at pve2.example:8006"
    )
    port = [{"id": 12, "name": "pve (inv:7)", "domain": "pve.example", "port": 8007}]
    assert "points at pve.example:8007" in resolve_wire_id(HV, port).error
    for bad_id in (None, "12", True, 0):
        rows = [{"id": bad_id, "name": "pve (inv:7)", "domain": "pve.example", "port": 8006}]
        assert "no usable id" in resolve_wire_id(HV, rows).error


def test_ipv6_mismatch_message_brackets() -> None:
    rec = HvEndpointRecord(pk=2, name="v6", ip_address="fd00::1/64", port=8006)
    rows = [{"id": 1, "name": "v6 (inv:2)", "ip_address": "fd00::2", "port": 8006}]
    assert "[fd00::1]:8006 but the backend row points at [fd00::2]:8006" in resolve_wire_id(rec, rows).error


def test_batch_drops_failures_from_scope_with_reasons() -> None:
    rows = [
        {"id": 12, "name": "pve (inv:7)", "domain": "pve.example", "port": 8006},
        {"id": 30, "name": "b (inv:8)", "domain": "b.example", "port": 8006},
    ]
    records = [
        HV,
        HvEndpointRecord(pk=8, name="b", domain="b.example", port=8006),
        HvEndpointRecord(pk=9, name="c", domain="c.example", port=8006),
    ]
    batch = resolve_wire_ids(records, rows)
    assert batch.scope_map == {7: 12, 8: 30}
    assert list(batch.dropped) == [9] and "unregistered" in batch.dropped[9]
    assert batch.backend_ids_csv == "12,30"
