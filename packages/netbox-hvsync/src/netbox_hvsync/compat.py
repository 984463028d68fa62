"""Where NetBox 4.5, 4.6 and 4.7 differ for this plugin, handled in one place.

The plugin supports NetBox 4.5.8 through 4.7.x (`HvsyncConfig.min_version`/`max_version`). Every
difference between those releases that the plugin meets lives here, each with the releases it concerns
and what differs; the rest of the plugin imports from this module instead of testing versions itself.
The list was found by running, not by reading changelogs: `make test` migrates the plugin, runs its
in-NetBox tests and a full sync of the demo cluster on 4.5.8, 4.6.8, 4.7.0 and 4.7.3.

Differences found, and where they are handled:
- core JobFilterSet `user`: 4.6 and 4.7 filter by username (and `user_id` by id); 4.5 has only the
  Meta-generated `user` filter, by id. `JobUserFilterSet` gives every release the 4.6+ behaviour, so
  `sync-jobs/?user=<username>` means the same everywhere (SPEC 4.4: every filter of the core job list).
- plugin migrations: they depend only on core migrations that 4.5.8 ships (see
  `migrations/0001_initial.py`); nothing to do at run time.
"""

from __future__ import annotations

import django_filters
from users.models import User


class JobUserFilterSet(django_filters.FilterSet):
    """The core job list's user filters as 4.6 and 4.7 define them, for 4.5 too."""

    user_id = django_filters.ModelMultipleChoiceFilter(
        field_name="user", queryset=User.objects.all(), label="User (ID)"
    )
    user = django_filters.ModelMultipleChoiceFilter(
        field_name="user__username",
        queryset=User.objects.all(),
        to_field_name="username",
        label="User (name)",
    )
