"""SPEC 3.1 (key and bootstrap transitions), 4.2 (key management) and 7.1 (register/delete statuses)."""

from __future__ import annotations

import time

from conftest import KEY

H = "X-Service-API-Key"


def test_bootstrap_register_then_409(backend) -> None:
    c = backend.client
    assert c.get("/auth/bootstrap-status").json() == {"needs_bootstrap": True, "has_db_keys": False}
    before = time.time()
    r = c.post("/auth/register-key", json={"api_key": KEY, "label": "plugin"})
    assert r.status_code == 201
    assert isinstance(r.json()["detail"], str) and set(r.json()) == {"detail"}
    assert c.get("/auth/bootstrap-status").json() == {"needs_bootstrap": False, "has_db_keys": True}
    keys = c.get("/auth/keys", headers={H: KEY}).json()["keys"]
    assert len(keys) == 1
    assert keys[0]["label"] == "plugin" and keys[0]["is_active"] is True
    assert before - 1 <= keys[0]["created_at"] <= time.time() + 1
    assert "raw_key" not in keys[0]
    r = c.post("/auth/register-key", json={"api_key": "z" * 64, "label": ""})
    assert r.status_code == 409 and "already" in r.json()["detail"]
    # The second candidate was not stored: it does not authenticate.
    assert c.get("/auth/keys", headers={H: "z" * 64}).status_code == 401


def test_register_key_label_optional_and_short_key_refused(backend) -> None:
    c = backend.client
    r = c.post("/auth/register-key", json={"api_key": "s" * 31, "label": "x"})
    assert r.status_code == 422
    err = r.json()["detail"][0]
    assert err["loc"] == ["body", "api_key"] and "at least 32" in err["msg"]
    assert "s" * 31 not in r.text
    r = c.post("/auth/register-key", json={"api_key": "bad key with spaces and more than 32 characters"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "api_key"]
    assert c.get("/auth/bootstrap-status").json()["needs_bootstrap"] is True
    r = c.post("/auth/register-key", json={"api_key": "a" * 32})
    assert r.status_code == 201
    assert c.get("/auth/keys", headers={H: "a" * 32}).json()["keys"][0]["label"] == ""


def test_long_keys_beyond_bcrypt_72_bytes_are_distinct(backend) -> None:
    c = backend.client
    long_key = "L" * 100 + "A"
    assert c.post("/auth/register-key", json={"api_key": long_key, "label": ""}).status_code == 201
    assert c.get("/auth/keys", headers={H: long_key}).status_code == 200
    assert c.get("/auth/keys", headers={H: "L" * 100 + "B"}).status_code == 401


def test_create_key_raw_key_once_with_and_without_label(backend, auth) -> None:
    c = backend.client
    r = c.post("/auth/keys", headers=auth)
    assert r.status_code == 201
    created = r.json()
    assert set(created) == {"id", "label", "is_active", "created_at", "raw_key"}
    assert created["label"] == "" and created["is_active"] is True and len(created["raw_key"]) >= 64
    r = c.post("/auth/keys", headers=auth, json={"label": "ci runner"})
    assert r.json()["label"] == "ci runner"
    listing = c.get("/auth/keys", headers=auth)
    assert created["raw_key"] not in listing.text
    assert [k["id"] for k in listing.json()["keys"]] == [1, created["id"], r.json()["id"]]
    # The new key works on its own.
    assert c.get("/auth/keys", headers={H: created["raw_key"]}).status_code == 200


def test_deactivate_activate_delete_transitions(backend, auth) -> None:
    c = backend.client
    new = c.post("/auth/keys", headers=auth).json()
    other = {H: new["raw_key"]}
    assert c.get("/auth/keys", headers=other).status_code == 200  # now cached
    r = c.post(f"/auth/keys/{new['id']}/deactivate", headers=auth)
    assert r.status_code == 200
    assert r.json() == {"id": new["id"], "label": "", "is_active": False, "created_at": new["created_at"]}
    r = c.get("/auth/keys", headers=other)
    assert r.status_code == 401 and r.json() == {"detail": "Invalid API key"}
    r = c.post(f"/auth/keys/{new['id']}/activate", headers=auth)
    assert r.status_code == 200 and r.json()["is_active"] is True
    assert c.get("/auth/keys", headers=other).status_code == 200
    r = c.delete(f"/auth/keys/{new['id']}", headers=auth)
    assert r.status_code == 204 and r.content == b""
    assert c.get("/auth/keys", headers=other).status_code == 401
    assert [k["id"] for k in c.get("/auth/keys", headers=auth).json()["keys"]] == [1]
    assert c.delete(f"/auth/keys/{new['id']}", headers=auth).status_code == 404
    assert c.post("/auth/keys/999/activate", headers=auth).status_code == 404


def test_inactive_key_can_be_deleted_and_stays_gone(backend, auth) -> None:
    c = backend.client
    new = c.post("/auth/keys", headers=auth).json()
    c.post(f"/auth/keys/{new['id']}/deactivate", headers=auth)
    assert c.delete(f"/auth/keys/{new['id']}", headers=auth).status_code == 204
    assert c.get("/auth/keys", headers={H: new["raw_key"]}).status_code == 401


def test_last_active_key_cannot_be_deactivated_or_deleted(backend, auth) -> None:
    c = backend.client
    r = c.post("/auth/keys/1/deactivate", headers=auth)
    assert r.status_code == 409 and "last active" in r.json()["detail"]
    r = c.delete("/auth/keys/1", headers=auth)
    assert r.status_code == 409
    assert c.get("/auth/keys", headers=auth).json()["keys"][0]["is_active"] is True
    # With a second active key, the first may go; the caller may even deactivate its own key.
    second = c.post("/auth/keys", headers=auth).json()
    assert c.post("/auth/keys/1/deactivate", headers=auth).json()["is_active"] is False
    assert c.get("/auth/keys", headers=auth).status_code == 401
    assert c.get("/auth/keys", headers={H: second["raw_key"]}).status_code == 200


def test_change_made_by_another_process_seen_within_recheck_interval(backend, auth) -> None:
    """The cache is per process; a change made elsewhere (CLI) is seen once the recheck interval passes."""
    from hvsync_backend.db.models import ApiKey
    from sqlalchemy import update

    backend.context.settings.key_recheck_seconds = 0.3
    c = backend.client
    second = c.post("/auth/keys", headers=auth).json()
    assert c.get("/auth/keys", headers={H: second["raw_key"]}).status_code == 200
    with backend.context.session_factory.begin() as session:  # not through the KeyStore: cache untouched
        session.execute(update(ApiKey).where(ApiKey.id == second["id"]).values(is_active=False))
    time.sleep(0.35)
    assert c.get("/auth/keys", headers={H: second["raw_key"]}).status_code == 401
    backend.context.settings.key_recheck_seconds = 0
    third = c.post("/auth/keys", headers=auth).json()
    assert c.get("/auth/keys", headers={H: third["raw_key"]}).status_code == 200
    with backend.context.session_factory.begin() as session:
        session.execute(update(ApiKey).where(ApiKey.id == third["id"]).values(is_active=False))
    assert c.get("/auth/keys", headers={H: third["raw_key"]}).status_code == 401  # interval 0: at once


def test_bcrypt_work_per_verification(backend, auth, monkeypatch) -> None:
    """Generated keys cost one bcrypt check; a repeated wrong key costs none the second time."""
    from hvsync_backend.auth import keys as keys_mod

    created = [backend.client.post("/auth/keys", headers=auth).json() for _ in range(5)]
    backend.context.keys.cache.clear()
    calls = []
    real = keys_mod.check_key
    monkeypatch.setattr(keys_mod, "check_key", lambda k, h: calls.append(1) or real(k, h))
    assert backend.context.keys.verify(created[3]["raw_key"]) == created[3]["id"]
    assert len(calls) == 1
    calls.clear()
    assert backend.context.keys.verify(KEY) == 1  # the bootstrap key is tried first
    assert len(calls) == 1
    calls.clear()
    assert backend.context.keys.verify("hvsk_3_" + "x" * 60) is None
    assert len(calls) == 2  # key 3 and the bootstrap key, not all six
    calls.clear()
    assert backend.context.keys.verify("no-hint-" + "x" * 60) is None
    assert len(calls) == 1  # only keys not generated here (the bootstrap key)
    calls.clear()
    assert backend.context.keys.verify("hvsk_3_" + "x" * 60) is None
    assert calls == []


def test_keys_stored_only_as_bcrypt_hashes(backend, auth) -> None:
    from hvsync_backend.db.models import ApiKey
    from sqlalchemy import select

    with backend.context.session_factory() as session:
        row = session.scalars(select(ApiKey)).one()
    assert bytes(row.key_hash).startswith(b"$2b$04$")
    assert KEY.encode() not in bytes(row.key_hash)


def test_key_ids_never_reused(backend, auth) -> None:
    c = backend.client
    last = c.post("/auth/keys", headers=auth).json()
    assert c.delete(f"/auth/keys/{last['id']}", headers=auth).status_code == 204
    again = c.post("/auth/keys", headers=auth).json()
    assert again["id"] == last["id"] + 1


def test_wrong_key_miss_does_not_hide_a_key_added_elsewhere(backend, auth) -> None:
    """A remembered miss is tied to the set of active keys; a key added by another process still works."""
    from hvsync_backend.auth.cache import VerificationCache
    from hvsync_backend.auth.keys import KeyStore

    candidate = "added-elsewhere-" + "e" * 40
    assert backend.client.get("/auth/keys", headers={H: candidate}).status_code == 401
    other_process = KeyStore(backend.context.session_factory, 4, VerificationCache())
    other_process.create(label="cli", raw_key=candidate)
    assert backend.client.get("/auth/keys", headers={H: candidate}).status_code == 200


def test_a_key_revoked_elsewhere_stops_at_once_by_default(backend, auth) -> None:
    """The default is to confirm the key's row on every request: a key revoked by another worker or the
    CLI used to keep working for up to a second in this one."""
    from hvsync_backend.config import Settings
    from hvsync_backend.db.models import ApiKey
    from sqlalchemy import update

    assert Settings().key_recheck_seconds == 0
    backend.context.settings.key_recheck_seconds = 0
    c = backend.client
    second = c.post("/auth/keys", headers=auth).json()
    assert c.get("/auth/keys", headers={H: second["raw_key"]}).status_code == 200  # cached now
    with backend.context.session_factory.begin() as session:  # another process: this cache is untouched
        session.execute(update(ApiKey).where(ApiKey.id == second["id"]).values(is_active=False))
    assert c.get("/auth/keys", headers={H: second["raw_key"]}).status_code == 401


def test_a_verification_that_began_before_a_revocation_cannot_cache_its_hit() -> None:
    from hvsync_backend.auth.cache import VerificationCache

    cache = VerificationCache()
    fingerprint = cache.fingerprint("some-key")
    began = cache.generation
    cache.clear()  # a key was revoked while the verification ran
    cache.put(fingerprint, 7, began)
    cache.put_miss(fingerprint, (1,), began)
    assert cache.get(fingerprint) is None and not cache.is_known_miss(fingerprint, (1,))
    cache.put(fingerprint, 7, cache.generation)
    assert cache.get(fingerprint) is not None and cache.get(fingerprint)[0] == 7


def test_concurrent_wrong_keys_cost_bounded_bcrypt_work(backend, auth, monkeypatch) -> None:
    """Eight requests with one wrong key share one bcrypt check; eight different wrong keys never run more
    checks at once than `bcrypt_slots`."""
    import threading

    from hvsync_backend.auth import keys as keys_module

    store = backend.context.keys
    calls: list[str] = []
    running, peak = [0], [0]
    guard = threading.Lock()
    real = keys_module.check_key

    def slow_check(presented: str, key_hash: bytes) -> bool:
        with guard:
            calls.append(presented)
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        try:
            return real(presented, key_hash)
        finally:
            with guard:
                running[0] -= 1

    monkeypatch.setattr(keys_module, "check_key", slow_check)

    def hammer(keys: list[str]) -> list[int | None]:
        out: list[int | None] = [None] * len(keys)

        def one(i: int) -> None:
            out[i] = store.verify(keys[i])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(keys))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    same = "w" * 40
    assert hammer([same] * 8) == [None] * 8
    assert calls.count(same) == 1  # one bcrypt check (one candidate: the bootstrap key), not eight
    calls.clear()
    assert hammer([f"wrong-{i}-" + "x" * 30 for i in range(8)]) == [None] * 8
    assert len(calls) == 8 and peak[0] <= backend.context.settings.bcrypt_slots


def test_a_verification_that_cannot_get_a_bcrypt_slot_is_a_503(backend, auth, monkeypatch) -> None:
    from hvsync_backend.auth import keys as keys_module

    store = backend.context.keys
    monkeypatch.setattr(keys_module, "VERIFY_WAIT", 0.05)
    taken = [store._bcrypt_slots.acquire(timeout=1) for _ in range(backend.context.settings.bcrypt_slots)]
    try:
        r = backend.client.get("/auth/keys", headers={H: "another-wrong-key-" + "z" * 30})
    finally:
        for _ in taken:
            store._bcrypt_slots.release()
    assert r.status_code == 503 and r.headers["Retry-After"] == "1" and "busy" in r.json()["detail"]
    assert backend.client.get("/auth/keys", headers=auth).status_code == 200  # a cached key never waits
