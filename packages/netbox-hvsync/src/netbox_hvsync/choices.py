"""Choice sets of the plugin's records, in NetBox's ChoiceSet style (value, label, colour)."""

from utilities.choices import ChoiceSet

from netbox_hvsync.wire import STAGE_SLUGS


class KeyStateChoices(ChoiceSet):
    PENDING = "pending"
    ADOPTED = "adopted"
    FAILED = "failed"
    CHOICES = [
        (PENDING, "Pending", "yellow"),
        (ADOPTED, "Adopted", "green"),
        (FAILED, "Failed", "red"),
    ]


class TokenVersionChoices(ChoiceSet):
    V1 = 1
    V2 = 2
    CHOICES = [(V1, "v1"), (V2, "v2")]


class SchemeChoices(ChoiceSet):
    """How the backend dials NetBox: https by default; http sends the NetBox token in clear."""

    HTTPS = "https"
    HTTP = "http"
    CHOICES = [(HTTPS, "HTTPS", "green"), (HTTP, "HTTP (token in clear)", "red")]


class AccessMethodChoices(ChoiceSet):
    TOKEN = "token"
    PASSWORD = "password"
    CHOICES = [(TOKEN, "API token"), (PASSWORD, "Password")]


class SyncedStatusChoices(ChoiceSet):
    """Status of a record mirrored from Proxmox: still present there, or gone (stale)."""

    ACTIVE = "active"
    STALE = "stale"
    CHOICES = [(ACTIVE, "Active", "green"), (STALE, "Stale", "orange")]


class ReplicationJobTypeChoices(ChoiceSet):
    LOCAL = "local"
    CHOICES = [(LOCAL, "Local")]


class RemoveJobChoices(ChoiceSet):
    LOCAL = "local"
    FULL = "full"
    CHOICES = [(LOCAL, "Local"), (FULL, "Full")]


class PbsChangeDetectionModeChoices(ChoiceSet):
    DEFAULT = "default"
    LEGACY = "legacy"
    DATA = "data"
    CHOICES = [(DEFAULT, "Default"), (LEGACY, "Legacy"), (DATA, "Data")]


class VmTypeChoices(ChoiceSet):
    QEMU = "qemu"
    LXC = "lxc"
    CHOICES = [(QEMU, "QEMU VM"), (LXC, "LXC container")]


class BackupVerificationChoices(ChoiceSet):
    NONE = "none"
    OK = "ok"
    FAILED = "failed"
    CHOICES = [(NONE, "Not verified", "gray"), (OK, "Verified", "green"), (FAILED, "Failed", "red")]


class DeletionRequestStatusChoices(ChoiceSet):
    """Lifecycle of a deletion request (issue 40; transitions in rules.deletions)."""

    PENDING = "pending"
    APPROVED = "approved"
    APPLIED = "applied"
    FAILED = "failed"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"
    EXPIRED = "expired"
    CHOICES = [
        (PENDING, "Pending", "yellow"),
        (APPROVED, "Approved", "blue"),
        (APPLIED, "Applied", "green"),
        (FAILED, "Failed", "red"),
        (REJECTED, "Rejected", "orange"),
        (WITHDRAWN, "Withdrawn", "gray"),
        (EXPIRED, "Expired", "gray"),
    ]


class ApplyJobStatusChoices(ChoiceSet):
    PLANNED = "planned"
    APPLYING = "applying"
    COMPLETED = "completed"
    FAILED = "failed"
    CHOICES = [
        (PLANNED, "Planned", "cyan"),
        (APPLYING, "Applying", "blue"),
        (COMPLETED, "Completed", "green"),
        (FAILED, "Failed", "red"),
    ]


# The 13 stages of the staged pipeline, in order (DESIGN 3; wire data shared with the backend);
# "all" selects every stage.
SYNC_STAGES: tuple[str, ...] = STAGE_SLUGS
SYNC_TYPE_ALL = "all"


class SyncTypeChoices(ChoiceSet):
    CHOICES = [(SYNC_TYPE_ALL, "All stages")] + [(slug, slug) for slug in SYNC_STAGES]


class SyncModeChoices(ChoiceSet):
    STAGED = "staged"
    SELECTED = "selected"
    CHOICES = [(STAGED, "Staged (full)"), (SELECTED, "Selected objects")]


class GonePolicyChoices(ChoiceSet):
    """What an object gone from Proxmox does to NetBox's own fields (the endpoint's `gone_policy`)."""

    KEEP = "keep"
    STATUS = "status"
    REQUEST_DELETION = "request-deletion"

    CHOICES = (
        (KEEP, "Keep (mark only)", "gray"),
        (STATUS, "Set a status", "orange"),
        (REQUEST_DELETION, "Request deletion", "red"),
    )
