"""SPEC 2.6: "a boolean recording the last effective template-build grant confirmed by a successful push. A
failed revocation leaves it true, which blocks local/model/UI/REST deletion and local-only bulk toggles until
a later normal save confirms the backend grant is false." """

from netbox_hvsync.rules.grants import bulk_toggle_refusal, deletion_refusal, next_grant_confirmed
from netbox_hvsync.rules.push import PushResult


def test_failed_revocation_leaves_it_true_until_a_successful_push() -> None:
    flag = True
    flag = next_grant_confirmed(flag, PushResult(False, "PUT /hv/endpoints/3: HTTP 500: x", 500))
    assert flag is True
    assert deletion_refusal(flag, "hv endpoint 7 (pve)") is not None
    flag = next_grant_confirmed(flag, PushResult(True, "", 200, grant_confirmed=False))
    assert flag is False and deletion_refusal(flag, "hv endpoint 7 (pve)") is None
    assert next_grant_confirmed(False, PushResult(True, "", 200, grant_confirmed=True)) is True


def test_local_only_bulk_toggles_are_refused_while_confirmed() -> None:
    message = bulk_toggle_refusal(True, "hv endpoint 7 (pve)", {"enabled", "description"})
    assert message is not None and "bulk change of enabled refused" in message
    assert bulk_toggle_refusal(True, "x", {"description"}) is None
    assert bulk_toggle_refusal(False, "x", {"enabled", "allow_template_builds"}) is None
