"""Users, groups, API tokens, ACLs, roles and pools, and the evaluation of PVE permission checks."""

from __future__ import annotations

import re
import uuid
from typing import Any

from pve_emulator.errors import ApiError, Forbidden, ParameterError, bad_param, not_found
from pve_emulator.identity import Identity
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import Acl, ApiToken, ClusterState, User
from pve_emulator.schema import Operation

_VM = [
    "VM.Audit",
    "VM.Console",
    "VM.Backup",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
    "VM.PowerMgmt",
    "VM.Config.Disk",
    "VM.Config.CPU",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
    "VM.Config.HWType",
    "VM.Config.CDROM",
    "VM.Config.Cloudinit",
    "VM.Migrate",
    "VM.Allocate",
    "VM.Clone",
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.Unrestricted",
    "VM.Replicate",
]
_SYS = [
    "Sys.Audit",
    "Sys.Console",
    "Sys.Modify",
    "Sys.PowerMgmt",
    "Sys.Syslog",
    "Sys.Incoming",
    "Sys.AccessNetwork",
]
_DS = ["Datastore.Audit", "Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.AllocateTemplate"]
_SDN = ["SDN.Audit", "SDN.Allocate", "SDN.Use"]
_ACCESS = [
    "User.Modify",
    "Group.Allocate",
    "Realm.Allocate",
    "Realm.AllocateUser",
    "Permissions.Modify",
    "Pool.Allocate",
    "Pool.Audit",
    "Mapping.Audit",
    "Mapping.Modify",
    "Mapping.Use",
]
ALL_PRIVS = sorted(set(_VM + _SYS + _DS + _SDN + _ACCESS))

BUILTIN_ROLES: dict[str, list[str]] = {
    "Administrator": ALL_PRIVS,
    "NoAccess": [],
    "PVEAuditor": [
        "Datastore.Audit",
        "Mapping.Audit",
        "Pool.Audit",
        "SDN.Audit",
        "Sys.Audit",
        "VM.Audit",
        "VM.GuestAgent.Audit",
    ],
    "PVEVMAdmin": [p for p in _VM]
    + ["Datastore.AllocateSpace", "Datastore.Audit", "Pool.Audit", "Sys.Audit", "SDN.Use"],
    "PVEVMUser": [
        "VM.Audit",
        "VM.Console",
        "VM.Backup",
        "VM.PowerMgmt",
        "VM.Config.CDROM",
        "VM.Config.Cloudinit",
        "VM.GuestAgent.Audit",
        "Pool.Audit",
        "Datastore.AllocateSpace",
    ],
    "PVEDatastoreAdmin": [*_DS, "Sys.Audit"],
    "PVESDNAdmin": [*_SDN, "Sys.Audit"],
    "PVEUserAdmin": ["User.Modify", "Group.Allocate", "Realm.AllocateUser", "Sys.Audit"],
    "PVEPoolAdmin": ["Pool.Allocate", "Pool.Audit"],
}


def _acl_applies(acl_path: str, target: str, propagate: int) -> int | None:
    """Depth of a matching ACL (longer wins) or None if it does not cover ``target``."""
    if acl_path == target:
        return len(acl_path)
    prefix = acl_path.rstrip("/") + "/"
    if propagate and (acl_path == "/" or target.startswith(prefix)):
        return len(acl_path)
    return None


def privileges(state: ClusterState, identity: Identity, path: str) -> set[str]:
    """Privileges of a user (or token, intersected when privilege-separated) on an ACL path."""
    if identity.userid == "root@pam":
        base = set(ALL_PRIVS)
    else:
        user = state.users.get(identity.userid)
        if user is None or not user.enable:
            return set()
        subjects = [("user", identity.userid)] + [("group", g) for g in user.groups]
        base = _privs_for(state, subjects, path)
    if identity.tokenid is None:
        return base
    user = state.users.get(identity.userid)
    token = user.tokens.get(identity.tokenid.split("!", 1)[1]) if user else None
    if token is None:
        return set()
    if not token.privsep:
        return base
    return base & _privs_for(state, [("token", identity.tokenid)], path)


def _privs_for(state: ClusterState, subjects: list[tuple[str, str]], path: str) -> set[str]:
    best_depth = -1
    privs: set[str] = set()
    for acl in state.acls:
        if (acl.type, acl.ugid) not in subjects:
            continue
        depth = _acl_applies(acl.path, path, acl.propagate)
        if depth is None:
            continue
        role = BUILTIN_ROLES.get(acl.roleid) or state.generic.get("/access/roles", {}).get(
            acl.roleid, {}
        ).get("privs", [])
        role_privs = set(role if isinstance(role, list) else str(role).split(","))
        if depth > best_depth:
            best_depth, privs = depth, set(role_privs)
        elif depth == best_depth:
            privs |= role_privs
    return privs


def _fill(template: str, params: dict[str, Any]) -> str:
    out = template
    for key, value in params.items():
        out = out.replace("{" + key + "}", str(value))
    return out


def check_allowed(state: ClusterState, identity: Identity, op: Operation, params: dict[str, Any]) -> bool:
    """Evaluate the operation's permission check (PVE's ``perm``/``and``/``or``/... expressions)."""
    if identity.userid == "root@pam" and (identity.tokenid is None or not _token_separated(state, identity)):
        return True
    perms = op.permissions
    if perms is None:
        return False  # no declared permissions: root@pam only
    if perms.get("user") in ("all", "world") and not perms.get("check"):
        return True
    check = perms.get("check")
    if not check:
        return False
    return _evaluate(state, identity, check, params)


def _token_separated(state: ClusterState, identity: Identity) -> bool:
    user = state.users.get(identity.userid)
    token = user.tokens.get((identity.tokenid or "!").split("!", 1)[1]) if user else None
    return token is None or bool(token.privsep)


def _evaluate(state: ClusterState, identity: Identity, check: list[Any], params: dict[str, Any]) -> bool:
    kind = check[0]
    if kind in ("and", "or"):
        results = (_evaluate(state, identity, sub, params) for sub in check[1:] if isinstance(sub, list))
        return all(results) if kind == "and" else any(results)
    if kind == "perm":
        path = _fill(check[1], params)
        wanted = check[2] if len(check) > 2 else []
        any_of = len(check) > 4 and check[3] == "any" and check[4]
        have = privileges(state, identity, path)
        return any(p in have for p in wanted) if any_of else all(p in have for p in wanted)
    if kind == "userid-param":
        if check[1] == "self":
            return params.get("userid") == identity.subject  # a token is never the user itself
        realm = str(params.get("userid", "")).rsplit("@", 1)[-1]
        return "Realm.AllocateUser" in privileges(state, identity, f"/access/realm/{realm}")
    if kind == "userid-group":
        return _userid_group(state, identity, check, params)
    if kind == "perm-modify":
        return "Permissions.Modify" in privileges(state, identity, _fill(check[1], params))
    return False


def check_any(state: ClusterState, identity: Identity, path: str, wanted: list[str]) -> bool:
    """RPCEnvironment's ``check_any``: at least one of ``wanted`` on ``path``."""
    have = privileges(state, identity, path)
    return any(p in have for p in wanted)


def _allowed_groups(state: ClusterState, identity: Identity, wanted: list[str]) -> set[str]:
    """``filter_groups``: the groups on whose ``/access/groups/<group>`` the caller has one of ``wanted``."""
    return {g for g in state.groups if check_any(state, identity, f"/access/groups/{g}", wanted)}


def _group_members(state: ClusterState, groups: set[str]) -> set[str]:
    """``group_member_join``."""
    return {u.userid for u in state.users.values() if groups & set(u.groups)}


def _userid_group(state: ClusterState, identity: Identity, check: list[Any], params: dict[str, Any]) -> bool:
    """``userid-group``: the privilege on ``/access/groups`` covers every user; else on a group of the
    target user (and, with ``groups_param``, on every group the request names)."""
    wanted = check[1]
    options = dict(zip(check[2::2], check[3::2], strict=False))
    if check_any(state, identity, "/access/groups", wanted):
        return True
    groups = _allowed_groups(state, identity, wanted)
    if options.get("groups_param"):
        named = [g for g in re.split(r"[,;\s]+", str(params.get("groups") or "")) if g]
        if not named or any(g not in groups for g in named):
            return False
    if options.get("groups_param") != "create":
        return params.get("userid") in _group_members(state, groups)
    return True


def can_audit_vm(state: ClusterState, identity: Identity, vmid: int) -> bool:
    return "VM.Audit" in privileges(state, identity, f"/vms/{vmid}")


# --- users -------------------------------------------------------------------------------------


def _user_view(user: User, full: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "userid": user.userid,
        "enable": user.enable,
        "expire": user.expire,
        "firstname": user.firstname,
        "lastname": user.lastname,
        "email": user.email,
        "comment": user.comment,
        "groups": ",".join(user.groups),
        "realm-type": user.userid.rsplit("@", 1)[1],
    }
    if full:
        out["tokens"] = [
            {"tokenid": t.tokenid, "privsep": t.privsep, "expire": t.expire, "comment": t.comment}
            for t in user.tokens.values()
        ]
    return {k: v for k, v in out.items() if v != "" or k == "userid"}


def _get_user(call: Call) -> User:
    user = call.state.users.get(call.params["userid"])
    if user is None:
        raise not_found(f"user '{call.params['userid']}'")
    return user


@route("GET", "/access/users")
def list_users(call: Call) -> list[dict[str, Any]]:
    """Only users the caller may see (User.Modify or Sys.Audit on /access/groups, or on a group of the
    user), and always the caller itself; a token is not its user, so a token without ACLs sees nobody."""
    state, identity = call.state, call.identity
    wanted = ["User.Modify", "Sys.Audit"]
    everyone = check_any(state, identity, "/access/groups", wanted)
    visible = _group_members(state, _allowed_groups(state, identity, wanted)) | {identity.subject}
    enabled = call.get("enabled")
    users = [
        u
        for u in call.state.users.values()
        if (everyone or u.userid in visible) and (enabled is None or bool(u.enable) == bool(enabled))
    ]
    return [_user_view(u, bool(call.get("full"))) for u in users]


@route("POST", "/access/users")
def create_user(call: Call) -> None:
    userid = call.params["userid"]
    if userid in call.state.users:
        raise bad_param("userid", f"user '{userid}' already exists")
    call.state.users[userid] = User(
        userid=userid,
        password=call.get("password"),
        enable=call.get("enable", 1),
        expire=call.get("expire", 0),
        firstname=call.get("firstname", ""),
        lastname=call.get("lastname", ""),
        email=call.get("email", ""),
        comment=call.get("comment", ""),
        groups=[g for g in (call.get("groups") or "").split(",") if g],
    )
    call.state.bump()


@route("GET", "/access/users/{userid}")
def read_user(call: Call) -> dict[str, Any]:
    view = _user_view(_get_user(call), full=True)
    # the single-user object is closed in the schema: no userid and no realm-type (the list has both)
    view.pop("userid")
    view.pop("realm-type", None)
    view["groups"] = [g for g in view.get("groups", "").split(",") if g]
    view["tokens"] = {t["tokenid"]: {k: v for k, v in t.items() if k != "tokenid"} for t in view["tokens"]}
    return view


@route("PUT", "/access/users/{userid}")
def update_user(call: Call) -> None:
    user = _get_user(call)
    for key in ("enable", "expire", "firstname", "lastname", "email", "comment"):
        if key in call.params:
            setattr(user, key, call.params[key])
    if "groups" in call.params:
        groups = [g for g in call.params["groups"].split(",") if g]
        user.groups = sorted(set(user.groups) | set(groups)) if call.get("append") else groups
    call.state.bump()


@route("DELETE", "/access/users/{userid}")
def delete_user(call: Call) -> None:
    user = _get_user(call)
    if user.userid == "root@pam":
        raise bad_param("userid", "the superuser root@pam cannot be removed")
    del call.state.users[user.userid]
    call.state.acls = [
        a for a in call.state.acls if a.ugid != user.userid and not a.ugid.startswith(user.userid + "!")
    ]
    call.state.bump()


@route("PUT", "/access/password")
def change_password(call: Call) -> None:
    """AccessControl.pm's change_password after ``reauth_user_for_user_modification``: only root@pam
    changes root@pam's password; anyone else confirms with their own password; nobody but root changes
    another pam user's (system) password."""
    state, authuser, userid = call.state, call.identity.userid, call.params["userid"]
    user = state.users.get(userid)
    if user is None:
        raise ApiError(500, f"no such user ('{userid}')")
    if userid == "root@pam" and authuser != "root@pam":
        raise Forbidden("Permission check failed")
    if authuser != "root@pam":
        confirmation = call.get("confirmation-password")
        if confirmation is None:
            raise bad_param("confirmation-password", "password is required to modify user")
        own = state.users.get(authuser)
        if own is None or own.password is None or own.password != confirmation:
            raise ApiError(500, "invalid credentials")
        if authuser != userid and userid.endswith("@pam"):
            raise Forbidden("Permission check failed")
    user.password = call.params["password"]
    state.bump()


@route("GET", "/access/users/{userid}/token")
def list_tokens(call: Call) -> list[dict[str, Any]]:
    return [
        {"tokenid": t.tokenid, "privsep": t.privsep, "expire": t.expire, "comment": t.comment}
        for t in _get_user(call).tokens.values()
    ]


def _get_token(call: Call) -> ApiToken:
    token = _get_user(call).tokens.get(call.params["tokenid"])
    if token is None:
        raise not_found(f"token '{call.params['tokenid']}'")
    return token


@route("GET", "/access/users/{userid}/token/{tokenid}")
def read_token(call: Call) -> dict[str, Any]:
    t = _get_token(call)
    return {"privsep": t.privsep, "expire": t.expire, "comment": t.comment}


@route("POST", "/access/users/{userid}/token/{tokenid}")
def create_token(call: Call) -> dict[str, Any]:
    user = _get_user(call)
    name = call.params["tokenid"]
    if name in user.tokens:
        raise bad_param("tokenid", "Token already exists.")
    token = ApiToken(
        tokenid=name,
        secret=str(uuid.uuid4()),
        privsep=call.get("privsep", 1),
        expire=call.get("expire", 0),
        comment=call.get("comment", ""),
    )
    user.tokens[name] = token
    call.state.bump()
    full = f"{user.userid}!{name}"
    return {
        "full-tokenid": full,
        "value": token.secret,
        "info": {"privsep": token.privsep, "expire": token.expire, "comment": token.comment},
    }


@route("PUT", "/access/users/{userid}/token/{tokenid}")
def update_token(call: Call) -> dict[str, Any]:
    token = _get_token(call)
    for key in ("privsep", "expire", "comment"):
        if key in call.params:
            setattr(token, key, call.params[key])
    call.state.bump()
    return {"privsep": token.privsep, "expire": token.expire, "comment": token.comment}


@route("DELETE", "/access/users/{userid}/token/{tokenid}")
def delete_token(call: Call) -> None:
    user = _get_user(call)
    token = _get_token(call)
    del user.tokens[token.tokenid]
    full = f"{user.userid}!{token.tokenid}"
    call.state.acls = [a for a in call.state.acls if a.ugid != full]
    call.state.bump()


# --- ACLs, roles, groups ------------------------------------------------------------------------


#: ``check_perm_modify``: besides Permissions.Modify, the allocate privilege of the object kind will do
_MODIFY_BY_PREFIX = (
    ("/storage/", "Datastore.Allocate"),
    ("/vms/", "VM.Allocate"),
    ("/pool/", "Pool.Allocate"),
)


def _can_modify_acl(state: ClusterState, identity: Identity, path: str) -> bool:
    wanted = ["Permissions.Modify"]
    wanted += [
        priv for prefix, priv in _MODIFY_BY_PREFIX if path.startswith(prefix) and len(path) > len(prefix)
    ]
    return check_any(state, identity, path, wanted)


@route("GET", "/access/acl")
def list_acl(call: Call) -> list[dict[str, Any]]:
    """Every entry with Sys.Audit on /access; else only those on paths whose permissions the caller may
    modify."""
    state, identity = call.state, call.identity
    audit = "Sys.Audit" in privileges(state, identity, "/access")
    return [
        {"path": a.path, "ugid": a.ugid, "type": a.type, "roleid": a.roleid, "propagate": a.propagate}
        for a in state.acls
        if audit or _can_modify_acl(state, identity, a.path)
    ]


@route("PUT", "/access/acl")
def update_acl(call: Call) -> None:
    path, roles = call.params["path"], [r for r in call.params["roles"].split(",") if r]
    for role in roles:
        if role not in BUILTIN_ROLES and role not in call.state.generic.get("/access/roles", {}):
            raise bad_param("roles", f"role '{role}' does not exist")
    subjects: list[tuple[str, str]] = []
    for kind, key in (("user", "users"), ("group", "groups"), ("token", "tokens")):
        subjects += [(kind, s) for s in (call.get(key) or "").split(",") if s]
    if not subjects:
        raise bad_param("users", "at least one of users, groups or tokens is required")
    for kind, ugid in subjects:
        if kind == "user" and ugid not in call.state.users:
            raise bad_param("users", f"user '{ugid}' does not exist")
    for kind, ugid in subjects:
        for role in roles:
            call.state.acls = [
                a
                for a in call.state.acls
                if not (a.path == path and a.ugid == ugid and a.type == kind and a.roleid == role)
            ]
            if not call.get("delete"):
                call.state.acls.append(Acl(path, ugid, kind, role, call.get("propagate", 1)))  # type: ignore[arg-type]
    call.state.bump()


@route("GET", "/access/roles")
def list_roles(call: Call) -> list[dict[str, Any]]:
    out = [{"roleid": r, "privs": ",".join(p), "special": 1} for r, p in BUILTIN_ROLES.items()]
    out += [
        {"roleid": r, "privs": d.get("privs", ""), "special": 0}
        for r, d in call.state.generic.get("/access/roles", {}).items()
    ]
    return out


@route("GET", "/access/permissions")
def list_permissions(call: Call) -> dict[str, dict[str, int]]:
    identity = call.identity
    target = call.get("userid")
    if target and target != identity.subject:
        identity = Identity(userid=target.split("!", 1)[0], tokenid=target if "!" in target else None)
    paths = [call.get("path")] if call.get("path") else sorted({"/", *(a.path for a in call.state.acls)})
    return {p: dict.fromkeys(sorted(privileges(call.state, identity, p)), 1) for p in paths}


# --- pools ---------------------------------------------------------------------------------------


def pool_members(state: ClusterState, poolid: str) -> list[dict[str, Any]]:
    members: list[dict[str, Any]] = []
    for guest in state.guests.values():
        if guest.pool == poolid:
            members.append(
                {
                    "id": f"{guest.kind}/{guest.vmid}",
                    "type": guest.kind,
                    "vmid": guest.vmid,
                    "node": guest.node,
                    "name": guest.name,
                    "status": guest.status,
                }
            )
    for storage in state.pools.get(poolid, {}).get("storage", []):
        for node in state.nodes:
            members.append(
                {"id": f"storage/{node}/{storage}", "type": "storage", "node": node, "storage": storage}
            )
    return members


@route("GET", "/pools")
def list_pools(call: Call) -> list[dict[str, Any]]:
    """pve-manager's pool index: without ``poolid`` the pools with Pool.Audit, without members; with it,
    that pool and its members. Proxmox discards the Pool.Audit check of the second form (``check`` with
    ``$noerr`` and no test of the result), so this does not refuse it either."""
    state = call.state
    wanted = call.get("poolid")
    if wanted is None:
        return [
            {"poolid": p, **({"comment": d["comment"]} if d.get("comment") is not None else {})}
            for p, d in sorted(state.pools.items())
            if "Pool.Audit" in privileges(state, call.identity, f"/pool/{p}")
        ]
    pool = state.pools.get(wanted)
    if pool is None:
        raise ApiError(500, f"pool '{wanted}' does not exist")
    kind = call.get("type")
    members = [m for m in pool_members(state, wanted) if kind is None or m["type"] == kind]
    entry = {"poolid": wanted, "members": members}
    return [{**entry, "comment": pool["comment"]} if pool.get("comment") is not None else entry]


@route("POST", "/pools")
def create_pool(call: Call) -> None:
    poolid = call.params["poolid"]
    if poolid in call.state.pools:
        raise bad_param("poolid", f"pool '{poolid}' already exists")
    call.state.pools[poolid] = {"comment": call.get("comment", ""), "storage": []}
    call.state.bump()


def _pool(call: Call) -> dict[str, Any]:
    pool = call.state.pools.get(call.params["poolid"])
    if pool is None:
        raise not_found(f"pool '{call.params['poolid']}'")
    return pool


@route("GET", "/pools/{poolid}")
def read_pool(call: Call) -> dict[str, Any]:
    pool = _pool(call)
    return {"comment": pool.get("comment", ""), "members": pool_members(call.state, call.params["poolid"])}


@route("PUT", "/pools")
def update_pool_by_param(call: Call) -> None:
    _update_pool(call)


@route("PUT", "/pools/{poolid}")
def update_pool(call: Call) -> None:
    _update_pool(call)


def _update_pool(call: Call) -> None:
    pool = _pool(call)
    poolid = call.params["poolid"]
    if "comment" in call.params:
        pool["comment"] = call.params["comment"]
    remove = bool(call.get("delete"))
    for vmid_text in (call.get("vms") or "").replace(";", ",").split(","):
        if not vmid_text:
            continue
        guest = call.state.guests.get(int(vmid_text))
        if guest is None:
            raise bad_param("vms", f"VM {vmid_text} does not exist")
        guest.pool = None if remove else poolid
    for storage in (call.get("storage") or "").replace(";", ",").split(","):
        if storage:
            if remove:
                pool["storage"] = [s for s in pool["storage"] if s != storage]
            elif storage not in pool["storage"]:
                pool["storage"].append(storage)
    call.state.bump()


@route("DELETE", "/pools")
def delete_pool_by_param(call: Call) -> None:
    _delete_pool(call)


@route("DELETE", "/pools/{poolid}")
def delete_pool(call: Call) -> None:
    _delete_pool(call)


def _delete_pool(call: Call) -> None:
    _pool(call)
    poolid = call.params["poolid"]
    if any(g.pool == poolid for g in call.state.guests.values()):
        raise ParameterError([], f"pool '{poolid}' is not empty")
    del call.state.pools[poolid]
    call.state.bump()


# --- groups --------------------------------------------------------------------------------------


def _members(state: ClusterState, groupid: str) -> list[str]:
    return sorted(u.userid for u in state.users.values() if groupid in u.groups)


@route("GET", "/access/groups")
def list_groups(call: Call) -> list[dict[str, Any]]:
    out = []
    for groupid, group in sorted(call.state.groups.items()):
        entry = {"groupid": groupid, "comment": group.get("comment", "")}
        members = _members(call.state, groupid)
        if members:
            entry["users"] = ",".join(members)
        out.append(entry)
    return out


@route("POST", "/access/groups")
def create_group(call: Call) -> None:
    groupid = call.params["groupid"]
    if groupid in call.state.groups:
        raise bad_param("groupid", f"group '{groupid}' already exists")
    call.state.groups[groupid] = {"comment": call.get("comment", "")}
    call.state.bump()


def _group(call: Call) -> dict[str, Any]:
    group = call.state.groups.get(call.params["groupid"])
    if group is None:
        raise not_found(f"group '{call.params['groupid']}'")
    return group


@route("GET", "/access/groups/{groupid}")
def read_group(call: Call) -> dict[str, Any]:
    group = _group(call)
    return {"comment": group.get("comment", ""), "members": _members(call.state, call.params["groupid"])}


@route("PUT", "/access/groups/{groupid}")
def update_group(call: Call) -> None:
    group = _group(call)
    if "comment" in call.params:
        group["comment"] = call.params["comment"]
    call.state.bump()


@route("DELETE", "/access/groups/{groupid}")
def delete_group(call: Call) -> None:
    _group(call)
    groupid = call.params["groupid"]
    del call.state.groups[groupid]
    for user in call.state.users.values():
        user.groups = [g for g in user.groups if g != groupid]
    call.state.acls = [a for a in call.state.acls if not (a.type == "group" and a.ugid == groupid)]
    call.state.bump()
