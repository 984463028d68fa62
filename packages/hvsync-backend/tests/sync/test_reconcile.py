"""The pure reconcile: create/update/unchanged/delete, managed fields only, NetBox read shapes normalised."""

from __future__ import annotations

from hvsync_backend.sync.plan import Current, Desired, diff_fields, make_plan, normalise


def test_normalise_maps_netbox_read_shapes_to_write_shapes() -> None:
    assert normalise({"value": "active", "label": "Active"}) == "active"
    assert normalise({"id": 7, "url": "x", "display": "pve1"}) == 7
    assert normalise([{"id": 3}, {"id": 1}]) == [1, 3]
    assert normalise(2.0) == 2
    assert normalise(2.5) == 2.5


def test_tags_compare_by_slug_whatever_the_shape() -> None:
    have = {
        "tags": [{"id": 9, "name": "prod", "slug": "prod"}, {"id": 1, "name": "hvsync", "slug": "hvsync"}]
    }
    assert diff_fields({"tags": [{"slug": "hvsync"}, {"slug": "prod"}]}, have) == {}
    assert diff_fields({"tags": [{"slug": "hvsync"}]}, have) == {"tags": [{"slug": "hvsync"}]}


def test_custom_fields_compare_only_managed_keys() -> None:
    have = {"custom_fields": {"hvsync_key": "ep1|vm|100", "owner": "alice"}}
    assert diff_fields({"custom_fields": {"hvsync_key": "ep1|vm|100"}}, have) == {}
    assert diff_fields({"custom_fields": {"hvsync_key": "ep1|vm|101"}}, have) == {
        "custom_fields": {"hvsync_key": "ep1|vm|101"}
    }


def test_plan_splits_create_update_unchanged_and_keeps_leftovers_without_opt_in() -> None:
    desired = {
        "a": Desired("a", "A", {"name": "a", "status": "active", "memory": 2048}),
        "b": Desired("b", "B", {"name": "b", "status": "offline", "memory": 1024}),
        "c": Desired("c", "C", {"name": "c", "status": "active", "memory": 512}),
    }
    current = {
        "a": Current(
            "a", 1, "A", {"name": "a", "status": {"value": "active", "label": "Active"}, "memory": 2048}
        ),
        "b": Current(
            "b", 2, "B", {"name": "b", "status": {"value": "active", "label": "Active"}, "memory": 1024}
        ),
        "z": Current("z", 26, "Z", {"name": "z"}),
    }
    plan = make_plan(desired, current)
    assert [d.key for d in plan.create] == ["c"]
    assert [(u.id, u.changes, u.before) for u in plan.update] == [
        (2, {"status": "offline"}, {"status": "active"})
    ]
    assert [c.key for c in plan.unchanged] == ["a"]
    assert plan.delete == []
    assert [c.key for c in plan.orphaned] == ["z"]
    rows = plan.describe()
    assert {r["action"] for r in rows} == {"create", "update"}


def test_plan_deletes_leftovers_only_when_asked() -> None:
    current = {"z": Current("z", 26, "Z", {"name": "z"})}
    plan = make_plan({}, current, delete_missing=True)
    assert [c.id for c in plan.delete] == [26]
    assert plan.describe() == [{"action": "delete", "key": "z", "object": "Z", "id": 26}]


def test_update_carries_only_changed_fields() -> None:
    desired = {"a": Desired("a", "A", {"name": "renamed", "vcpus": 2.0, "cluster": 4})}
    current = {"a": Current("a", 1, "A", {"name": "old", "vcpus": 2, "cluster": {"id": 4, "name": "c"}})}
    [update] = make_plan(desired, current).update
    assert update.changes == {"name": "renamed"}
