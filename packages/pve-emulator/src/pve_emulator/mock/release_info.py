"""What a node of each served API release says about itself: pve-manager version, build id, kernel.

``/version``, ``/nodes/{node}/version`` and ``/nodes/{node}/status`` (``pveversion``, ``kversion``) all
read this table through the state's ``release``, so they agree with ``--release``. The versions and
repoids are real pve-manager point releases (repoid = the first 16 hex digits of the build commit, as
``PVE::pvecfg::version_info`` reports it); the kernels are those releases' default kernels.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReleaseInfo:
    release: str
    version: str
    repoid: str
    kernel: str

    def version_info(self) -> dict[str, str]:
        """The keys of ``PVE::pvecfg::version_info``: what both version routes return."""
        return {"version": self.version, "release": self.release, "repoid": self.repoid}

    @property
    def pveversion(self) -> str:
        """``pve-manager/<version>/<repoid>``, as the node status reports it."""
        return f"pve-manager/{self.version}/{self.repoid}"


RELEASES: dict[str, ReleaseInfo] = {
    "8.4": ReleaseInfo(release="8.4", version="8.4.14", repoid="b502d23c55afcba1", kernel="6.8.12-15-pve"),
    "9.1": ReleaseInfo(release="9.1", version="9.1.2", repoid="9d436f37a0ac4172", kernel="6.17.2-1-pve"),
}


def release_info(release: str) -> ReleaseInfo:
    """The table entry for a served release (a schema added without an entry is a bug: KeyError)."""
    return RELEASES[release]
