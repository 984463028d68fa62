"""Guests in scope: QEMU VMs and LXC containers read once per run, filtered at source by the modes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from hvsync_backend.sync.proxmox import Guest, HvSource, ProxmoxReader, ProxmoxReadError
from hvsync_backend.sync.run import SyncContext
from hvsync_backend.wire.keys import format_key


def vm_key(source: HvSource, vmid: int) -> str:
    return format_key("vm", endpoint=source.identity, vmid=vmid)


def wanted(guest: Guest, ctx: SyncContext) -> bool:
    """sync_mode_vm covers regular guests, sync_mode_vm_template templates; disabled kinds are skipped."""
    if ctx.options.only_vmids is not None and guest.vmid not in ctx.options.only_vmids:
        return False
    return ctx.options.sync_mode_vm_template if guest.template else ctx.options.sync_mode_vm


def keeper(ctx: SyncContext, source: HvSource) -> Callable[[Guest], bool]:
    """`wanted`, recording the guests it leaves out in `ctx.reads.skipped_guests` (`ctx.skips_guest`)."""
    skipped = ctx.reads.skipped_guests.setdefault(source.identity, set())

    def keep(guest: Guest) -> bool:
        if wanted(guest, ctx):
            return True
        skipped.add(guest.vmid)
        return False

    return keep


def scope_is_narrowed(ctx: SyncContext) -> bool:
    """Whether this run may leave any guest out (a disabled sync mode or a VM selection)."""
    options = ctx.options
    return options.only_vmids is not None or not (options.sync_mode_vm and options.sync_mode_vm_template)


async def skipped_guests(ctx: SyncContext) -> None:
    """Make sure `ctx.skips_guest` knows every left-out guest (one cluster/resources read per endpoint,
    no per-guest config reads) before a stage writes or deletes objects that belong to guests."""
    if ctx.reads.guests is not None or not scope_is_narrowed(ctx):
        return

    async def read(source: HvSource, reader: ProxmoxReader) -> list[Guest]:
        return await reader.guests(keeper(ctx, source), with_config=False)

    await ctx.per_endpoint(read)


async def leave_unreadable_out(ctx: SyncContext, source: HvSource, reader: ProxmoxReader) -> None:
    """Guests whose config could not be read this run are left alone (nothing written or deleted for
    them) and reported once each; the endpoint's other guests go on."""
    skipped = ctx.reads.skipped_guests.setdefault(source.identity, set())
    for vmid, error in sorted(reader.unreadable.items()):
        if vmid in skipped:
            continue
        skipped.add(vmid)
        await ctx.problem(
            {**error.as_problem(), "object": f"vm {vmid}"},
            f"guest {vmid} of Proxmox endpoint {source.backend_id} left out of this run: {error.detail}",
        )


def when_listed(ctx: SyncContext, work: Callable[[list[Guest]], None]) -> None:
    """Call `work` with each endpoint's guests in scope as soon as Proxmox has listed them (background),
    so that NetBox reads that depend on the guests start before their stage does. An endpoint that
    cannot be read calls nothing: the stage that needs its guests reports it."""

    async def wait(source: HvSource) -> None:
        if source.identity in ctx.failed_endpoints:
            return
        try:
            found = await ctx.reader(source).guests(keeper(ctx, source))
        except ProxmoxReadError:
            return
        work(found)

    for source in ctx.sources:
        ctx.background(wait(source))


async def guests(ctx: SyncContext) -> dict[int, list[Guest]]:
    """Backend endpoint id -> guests in scope (with their configs), cached for the run."""
    if ctx.reads.guests is None:

        async def read(source: HvSource, reader: ProxmoxReader) -> list[Guest]:
            found = await reader.guests(keeper(ctx, source))
            await leave_unreadable_out(ctx, source, reader)
            return found

        ctx.reads.guests = await ctx.per_endpoint(read)
    return ctx.reads.guests


def warm_guests(ctx: SyncContext, *, addresses: bool = False) -> None:
    """Start the run's guest reads (configs; with `addresses` also the guest-reported addresses) in the
    background at the start of the run, so they overlap NetBox's reads. The reader caches every answer
    and every failure; the stage that needs the data reads it again and reports failures itself."""
    flag = "addresses" if addresses else "guests"
    if flag in ctx.reads.warmed:
        return
    ctx.reads.warmed.add(flag)

    async def warm(source: HvSource) -> None:
        if source.identity in ctx.failed_endpoints:
            return
        reader = ctx.reader(source)
        try:
            found = await reader.guests(keeper(ctx, source))
            if addresses:
                await asyncio.gather(*(reader.guest_addresses(g) for g in found))
        except ProxmoxReadError:
            return  # reported by the stage that needs these guests

    for source in ctx.sources:
        ctx.background(warm(source))
