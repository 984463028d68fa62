"""The plugin's stage choices, stage routes and selected-object types are the wire data it shares with
the backend (contracts/wire), not copies of it."""

from netbox_hvsync import wire
from netbox_hvsync.choices import SYNC_STAGES, SyncTypeChoices
from netbox_hvsync.sync.runner import STAGE_ROUTES
from netbox_hvsync.sync.selected import SELECTED_TYPES, VM_TYPE


def test_stage_choices_and_routes_are_the_wire_stages() -> None:
    assert SYNC_STAGES == wire.STAGE_SLUGS and len(SYNC_STAGES) == 13
    assert dict(STAGE_ROUTES) == {s.slug: s.route for s in wire.STAGES}
    assert [value for value, _ in SyncTypeChoices.CHOICES] == ["all", *wire.STAGE_SLUGS]


def test_selected_types_use_the_wire_routes() -> None:
    assert VM_TYPE == "virtualization.virtualmachine"
    assert {label: t.path for label, t in SELECTED_TYPES.items()} == {
        "virtualization.virtualmachine": "/sync/individual/vm",
        "netbox_hvsync.hvstorage": "/sync/individual/storage",
        "netbox_hvsync.hvbackup": "/sync/individual/backup",
        "netbox_hvsync.hvsnapshot": "/sync/individual/snapshot",
        "netbox_hvsync.hvtaskhistory": "/sync/individual/task-history",
    }
