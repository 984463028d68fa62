"""What differs between the NetBox releases hvsync writes to (4.5.8 through 4.7.x), in one place.

The client asks NetBox its release once (`GET /api/status/`) and consults `NetBoxRelease` wherever the
REST API differs. The differences were found by running a full sync and a no-change resync of the demo
cluster on 4.5.8, 4.6.8, 4.7.0 and 4.7.3 (`make test` runs that matrix), not from changelogs:

- Interface MAC addresses. 4.7's interface serializers (dcim and virtualization) accept `mac_address` and
  find-or-create that MAC object on the interface and make it primary. On 4.5 and 4.6 the field is
  read-only and silently ignored: the MAC never landed, and every resync "updated" every interface again.
  There `write_primary_macs` does what 4.7 does, over REST: the MAC object (`dcim/mac-addresses`,
  assigned to the interface; an existing one with the same value is reused) and `primary_mac_address`.
  Cost: two more list requests per batch of interfaces whose MAC changed; none when nothing changed.

Everything else the sync reads and writes (token v1 `Token <t>` and v2 `Bearer nbt_<key>.<t>`, brief and
`fields=` reads, bulk list writes, custom fields, tags, VLAN groups' scopes, MAC objects) behaves the same
on every supported release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: interface list -> (the content type a MAC object is assigned to, the MAC list's filter for it)
INTERFACE_LISTS = {
    "virtualization/interfaces": ("virtualization.vminterface", "vminterface_id"),
    "dcim/interfaces": ("dcim.interface", "interface_id"),
}
MAC_LIST = "dcim/mac-addresses"
#: interface ids per MAC read (query strings stay well under NetBox's URL limits)
MAC_READ_BATCH = 200


@dataclass(frozen=True)
class NetBoxRelease:
    """A NetBox release and the API differences hvsync depends on."""

    version: tuple[int, int, int]

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> NetBoxRelease:
        """From `GET /api/status/` (`netbox-version` is e.g. "4.7.3" or "4.6.8-Docker-3.4.1")."""
        return cls(parse_version(str(status.get("netbox-version") or "")))

    @property
    def interface_mac_shortcut(self) -> bool:
        """Interfaces take `mac_address` on write (4.7 and later)."""
        return self.version >= (4, 7, 0)

    def __str__(self) -> str:
        return ".".join(str(p) for p in self.version)


def parse_version(text: str) -> tuple[int, int, int]:
    numbers: list[int] = []
    for part in text.split("-")[0].split(".")[:3]:
        digits = "".join(ch for ch in part if "0" <= ch <= "9")  # ASCII only: int("²") raises
        numbers.append(int(digits) if digits else 0)
    while len(numbers) < 3:
        numbers.append(0)
    return numbers[0], numbers[1], numbers[2]


class Writer(Protocol):
    """The part of the NetBox client this module writes through."""

    async def list_all(
        self, path: str, params: dict[str, Any] | None = None, *, fields: Sequence[str] | None = None
    ) -> list[dict[str, Any]]: ...

    async def bulk_create(self, path: str, items: Sequence[dict[str, Any]]) -> list[Any]: ...

    async def bulk_update(self, path: str, items: Sequence[dict[str, Any]]) -> list[Any]: ...


def same_mac(a: str | None, b: str | None) -> bool:
    def norm(value: str | None) -> str:
        return "".join(ch for ch in (value or "").lower() if ch in "0123456789abcdef")

    return norm(a) == norm(b)


async def write_primary_macs(
    client: Writer, interface_list: str, wanted: Mapping[int, str | None], is_error: type
) -> dict[int, Any]:
    """Make `wanted[interface id]` the primary MAC of each interface (None clears it), as 4.7's
    `mac_address` shortcut does. Returns the error of every interface that could not be set."""
    assigned_type, mac_filter = INTERFACE_LISTS[interface_list]
    ids = sorted(wanted)
    existing: dict[int, list[dict[str, Any]]] = {}
    for start in range(0, len(ids), MAC_READ_BATCH):
        batch = ids[start : start + MAC_READ_BATCH]
        for mac in await client.list_all(
            MAC_LIST, {mac_filter: batch}, fields=("id", "mac_address", "assigned_object_id")
        ):
            existing.setdefault(int(mac["assigned_object_id"]), []).append(mac)
    primary: dict[int, int | None] = {}
    to_create: list[tuple[int, str]] = []
    for iface, value in wanted.items():
        if value is None:
            primary[iface] = None
            continue
        found = next((m for m in existing.get(iface, []) if same_mac(m["mac_address"], value)), None)
        if found is not None:
            primary[iface] = int(found["id"])
        else:
            to_create.append((iface, value))
    errors: dict[int, Any] = {}
    created = await client.bulk_create(
        MAC_LIST,
        [
            {"mac_address": value, "assigned_object_type": assigned_type, "assigned_object_id": iface}
            for iface, value in to_create
        ],
    )
    for (iface, _), result in zip(to_create, created, strict=True):
        if isinstance(result, is_error):
            errors[iface] = result
        else:
            primary[iface] = int(result["id"])
    order = [iface for iface in wanted if iface in primary]
    updates = [{"id": iface, "primary_mac_address": primary[iface]} for iface in order]
    for iface, result in zip(order, await client.bulk_update(interface_list, updates), strict=True):
        if isinstance(result, is_error):
            errors[iface] = result
    return errors
