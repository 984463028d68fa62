"""NetBox client behaviour that needs exact upstream answers: branch header, pagination, chunking,
per-object isolation of a rejected list request, typed errors without secrets."""

from __future__ import annotations

import json

import httpx
import pytest
from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig
from hvsync_backend.inventory.errors import NetBoxAuthError, NetBoxHTTPError, NetBoxUnreachable

TOKEN = "0123456789abcdef0123456789abcdef01234567"
AUTH = f"Bearer nbt_abcdefabcdef.{TOKEN}"


def client(handler, **overrides) -> NetBoxClient:
    # these tests are about REST list writes; the apply path has its own (test_netbox_apply_path.py)
    config = NetBoxConfig(url="http://netbox.test", auth_header=AUTH, **{"apply_path": False, **overrides})
    return NetBoxClient(config, transport=httpx.MockTransport(handler))


async def test_branch_header_and_auth_on_every_request_when_asked() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"count": 0, "results": []})
        return httpx.Response(201, json=[{"id": 1}])

    async with client(handler, branch_schema_id="br_1234abcd") as nb:
        await nb.list_all("dcim/devices", {"tag": "hvsync"}, fields=("id", "name"))
        await nb.bulk_create("dcim/devices", [{"name": "x"}])
    assert [r.headers["X-NetBox-Branch"] for r in seen] == ["br_1234abcd", "br_1234abcd"]
    assert all(r.headers["Authorization"] == AUTH for r in seen)
    assert seen[0].url.path == "/api/dcim/devices/"
    assert dict(seen[0].url.params) == {"tag": "hvsync", "limit": "1000", "fields": "id,name", "offset": "0"}

    seen.clear()
    async with client(handler) as nb:
        await nb.list_all("dcim/devices")
    assert "X-NetBox-Branch" not in seen[0].headers


async def test_list_all_reads_every_page() -> None:
    offsets: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params["offset"])
        offsets.append(offset)
        rows = [{"id": i} for i in range(offset, min(offset + 1000, 2500))]
        return httpx.Response(200, json={"count": 2500, "results": rows})

    async with client(handler) as nb:
        rows = await nb.list_all("virtualization/virtual-machines")
    assert sorted(offsets) == [0, 1000, 2000]
    assert [r["id"] for r in rows] == list(range(2500))


async def test_rejected_chunk_is_retried_per_object_so_one_bad_object_fails_alone() -> None:
    bodies: list[list[dict]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)
        bodies.append(items)
        bad = [i for i, item in enumerate(items) if item["name"] == "bad"]
        if bad:
            return httpx.Response(
                400,
                json={
                    "detail": f"{len(bad)} of {len(items)} objects could not be created.",
                    "errors": [
                        {"index": i, "errors": {"name": ["Device name must be unique per site."]}}
                        for i in bad
                    ],
                },
            )
        return httpx.Response(201, json=[{"id": 100 + n, **item} for n, item in enumerate(items)])

    async with client(handler, write_chunk=3) as nb:
        results = await nb.bulk_create("dcim/devices", [{"name": n} for n in ("a", "b", "bad", "c", "d")])
        assert nb.stats.created == 4
    assert [type(r).__name__ if isinstance(r, Exception) else r["name"] for r in results] == [
        "a",
        "b",
        "NetBoxHTTPError",
        "c",
        "d",
    ]
    error = results[2]
    assert isinstance(error, NetBoxHTTPError) and error.status == 400
    assert "must be unique per site" in error.detail
    assert sorted(len(b) for b in bodies) == [1, 1, 1, 2, 3]  # two chunks, then the bad chunk one by one


async def test_errors_are_typed_carry_the_status_and_never_the_token() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"detail": f"Invalid v2 token nbt_abcdefabcdef.{TOKEN}"})

    async with client(refuse) as nb:
        with pytest.raises(NetBoxAuthError) as caught:
            await nb.list_all("dcim/devices")
    assert caught.value.status == 403
    assert TOKEN not in caught.value.detail and TOKEN not in json.dumps(caught.value.as_problem())

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    async with client(broken) as nb:
        with pytest.raises(NetBoxHTTPError) as caught5:
            await nb.get("status/")
        assert caught5.value.status == 502
        [failed] = await nb.bulk_update("dcim/devices", [{"id": 1, "name": "x"}])
        assert isinstance(failed, NetBoxHTTPError) and failed.status == 502

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"connection refused while sending {AUTH}")

    async with client(down) as nb:
        with pytest.raises(NetBoxUnreachable) as caught_down:
            await nb.get("status/")
    assert caught_down.value.status is None
    assert TOKEN not in caught_down.value.detail


def test_auth_header_for_token_versions() -> None:
    assert NetBoxConfig.auth_header_for(1, "abc") == "Token abc"
    assert NetBoxConfig.auth_header_for(2, "abc", "key1") == "Bearer nbt_key1.abc"
    with pytest.raises(ValueError):
        NetBoxConfig.auth_header_for(2, "abc")


async def test_run_cache_answers_repeated_and_prefetched_reads_until_the_client_writes() -> None:
    """A list read twice in a run costs one request; after any write the next read goes to NetBox."""
    names = {"n": "vm-a"}
    gets: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            gets.append(str(request.url.params))
            return httpx.Response(200, json={"count": 1, "results": [{"id": 7, "name": names["n"]}]})
        if request.method == "DELETE":
            return httpx.Response(204)
        if request.url.path == "/api/virtualization/virtual-machines/":
            names["n"] = json.loads(request.content)[0]["name"]
        return httpx.Response(200, json=[{"id": 7, "name": names["n"]}])

    path, params, fields = "virtualization/virtual-machines", {"tag": "hvsync"}, ("id", "name")
    async with client(handler) as nb:
        nb.prefetch(path, params, fields=fields)  # cache off: nothing is read ahead
        assert gets == []
        nb.cache_reads = True
        nb.prefetch(path, params, fields=fields)
        first = await nb.list_all(path, params, fields=fields)
        first[0]["name"] = "changed by the caller"  # callers get copies
        second = await nb.list_all(path, params, fields=fields)
        assert second == [{"id": 7, "name": "vm-a"}]
        assert len(gets) == 1 and nb.stats.cached_reads == 2
        # another query is another read
        await nb.list_all(path, {"tag": "hvsync", "name": "vm-a"}, fields=fields)
        assert len(gets) == 2
        # a write makes every earlier read stale
        nb.prefetch(path, params, fields=fields)
        await nb.bulk_update(path, [{"id": 7, "name": "vm-b"}])
        third = await nb.list_all(path, params, fields=fields)
        assert third == [{"id": 7, "name": "vm-b"}]
        assert len(gets) == 3
        # a create or update of another self-contained list leaves this one cached...
        await nb.bulk_update("virtualization/virtual-disks", [{"id": 1, "name": "vm-b"}])
        await nb.list_all(path, params, fields=fields)
        assert len(gets) == 3
        # ...a delete (cascades) or a write to a list others depend on (tags, MACs, plugins) does not
        for method, other in (("delete", "virtualization/virtual-disks"), ("update", "dcim/mac-addresses")):
            if method == "delete":
                await nb.bulk_delete(other, [1])
            else:
                await nb.bulk_update(other, [{"id": 1, "name": "vm-b"}])
            await nb.list_all(path, params, fields=fields)
        assert len(gets) == 5
        assert nb.stats.reads_by_path["virtualization/virtual-machines/"]["requests"] == 5
        assert nb.stats.reads_by_path["virtualization/virtual-machines/"]["bytes"] > 0


async def test_failed_cached_read_is_not_kept() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(503, json={"detail": "busy"})
        return httpx.Response(200, json={"count": 1, "results": [{"id": 1}]})

    async with client(handler) as nb:
        nb.cache_reads = True
        with pytest.raises(NetBoxHTTPError):
            await nb.list_all("dcim/devices")
        assert await nb.list_all("dcim/devices") == [{"id": 1}]
    assert calls["n"] == 2


async def test_get_is_sent_again_once_when_a_kept_alive_connection_was_closed() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) == 1 or request.method == "POST":
            raise httpx.ReadError("connection closed", request=request)
        return httpx.Response(200, json={"count": 1, "results": [{"id": 3}]})

    async with client(handler) as nb:
        assert await nb.list_all("dcim/devices") == [{"id": 3}]
        assert calls == ["GET", "GET"]
        # a write is never sent twice: the object may exist already
        [result] = await nb.bulk_create("dcim/devices", [{"name": "x"}])
    assert isinstance(result, NetBoxUnreachable)
    assert calls == ["GET", "GET", "POST"]
