"""The native protocol's security administration: ACLs and users' SCRAM credentials (our extensions; `logway acls`
and `logway users` send them). Events and their JSON, registered with the other requests by `connection`.

Requests::

    {"DescribeAcls": filter}                       -> {"Acls": {"acls": [acl, ...]}}
    {"CreateAcls": {"acls": [acl, ...]}}           -> {"CreateAcls": {"created": int}}
    {"DeleteAcls": filter}                         -> {"DeleteAcls": {"acls": [acl, ...]}}   (those deleted)
    {"DescribeUsers": {"users"?: [name, ...]}}     -> {"Users": {"users": [{"user", "credentials":
                                                                              [{"mechanism", "iterations"}]}]}}
    {"AlterUser": {"user", "mechanism", "iterations", "salt", "salted_password"}}  (base64: what Kafka's
        AlterUserScramCredentials carries — the client salts the password, which never crosses the connection)
    {"AlterUser": {"user", "mechanism", "delete": true}}      -> {"AlterUser": {"altered": bool}}

    acl    := {"resource_type", "name", "pattern", "principal", "host", "operation", "permission"}  (names, as
              Kafka's kafka-acls writes them: Topic, LITERAL, User:alice, *, Read, Allow)
    filter := the same keys, each optional (absent or null: any); "pattern": "MATCH" matches the bindings that
              apply to the resource named

Bounds: a request names at most `MAX_ACLS` bindings (and a name is a JSON string, bounded by the frame).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from .wire import _bool, _each, _get, _int, _Invalid, _list, _obj, _opt_strs, _str

__all__ = ["AclEntry", "AclsResponse", "AlterUserRequest", "AlterUserResponse", "CreateAclsRequest",
           "CreateAclsResponse", "DeleteAclsRequest", "DeleteAclsResponse", "DescribeAclsRequest",
           "DescribeUsersRequest", "MAX_ACLS", "UserCredentials", "UsersResponse",
           "REQUEST_DECODERS", "REQUEST_ENCODERS", "RESPONSE_DECODERS", "RESPONSE_ENCODERS"]

#: Bindings one CreateAcls may carry: an operator's batch, never a flood.
MAX_ACLS = 1000
#: Iterations as Kafka's ScramCredentialUpsertion carries them (an int32).
MAX_ITERATIONS = 2**31 - 1
_ACL_KEYS = ("resource_type", "name", "pattern", "principal", "host", "operation", "permission")


@dataclass(frozen=True, slots=True)
class AclEntry:
    """One binding, or (with None for any) a filter over bindings."""

    resource_type: str | None = None
    name: str | None = None
    pattern: str | None = None
    principal: str | None = None
    host: str | None = None
    operation: str | None = None
    permission: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeAclsRequest:
    filter: AclEntry = AclEntry()


@dataclass(frozen=True, slots=True)
class CreateAclsRequest:
    acls: list[AclEntry]


@dataclass(frozen=True, slots=True)
class DeleteAclsRequest:
    filter: AclEntry = AclEntry()


@dataclass(frozen=True, slots=True)
class DescribeUsersRequest:
    users: list[str] | None = None


@dataclass(frozen=True, slots=True)
class AlterUserRequest:
    user: str
    mechanism: str
    iterations: int = 0
    salt: bytes = b""
    salted_password: bytes = b""
    delete: bool = False


@dataclass(frozen=True, slots=True)
class AclsResponse:
    acls: list[AclEntry]


@dataclass(frozen=True, slots=True)
class CreateAclsResponse:
    created: int


@dataclass(frozen=True, slots=True)
class DeleteAclsResponse:
    acls: list[AclEntry]


@dataclass(frozen=True, slots=True)
class UserCredentials:
    user: str
    credentials: list[tuple[str, int]] = field(default_factory=list)  # (mechanism, iterations)


@dataclass(frozen=True, slots=True)
class UsersResponse:
    users: list[UserCredentials]


@dataclass(frozen=True, slots=True)
class AlterUserResponse:
    altered: bool


# ---------------------------------------------------------------------------------------------- JSON

def _entry(value: Any, complete: bool) -> AclEntry:
    """An ACL (`complete`: every key a string) or a filter (keys absent or null: any)."""
    body = _obj(value, "acl")
    values = []
    for key in _ACL_KEYS:
        item = body.get(key)
        if item is None and complete:
            raise _Invalid(f"missing field `{key}`")
        values.append(None if item is None else _str(item, key))
    return AclEntry(*values)


def _enc_entry(entry: AclEntry) -> dict:
    return {key: getattr(entry, key) for key in _ACL_KEYS if getattr(entry, key) is not None}


def _acls(body: dict, complete: bool) -> list[AclEntry]:
    items = _list(_get(body, "acls"), "acls")
    if len(items) > MAX_ACLS:
        raise _Invalid(f"`acls` holds {len(items)} bindings; at most {MAX_ACLS} per request")
    return _each(items, "acls", lambda v: _entry(v, complete))


def _b64(value: Any, name: str) -> bytes:
    try:
        return base64.b64decode(_str(value, name), validate=True)
    except (binascii.Error, ValueError):
        raise _Invalid(f"`{name}` must be base64") from None


def _alter_user(body: dict, _raw) -> AlterUserRequest:
    user, mechanism = _str(_get(body, "user"), "user"), _str(_get(body, "mechanism"), "mechanism")
    if body.get("delete") is not None and _bool(body["delete"], "delete"):
        return AlterUserRequest(user, mechanism, delete=True)
    return AlterUserRequest(user, mechanism, _int(_get(body, "iterations"), "iterations", MAX_ITERATIONS),
                            _b64(_get(body, "salt"), "salt"), _b64(_get(body, "salted_password"), "salted_password"))


def _enc_alter_user(e: AlterUserRequest) -> dict:
    if e.delete:
        return {"AlterUser": {"user": e.user, "mechanism": e.mechanism, "delete": True}}
    return {"AlterUser": {"user": e.user, "mechanism": e.mechanism, "iterations": e.iterations,
                          "salt": base64.b64encode(e.salt).decode(),
                          "salted_password": base64.b64encode(e.salted_password).decode()}}


def _user(value: Any) -> UserCredentials:
    body = _obj(value, "user")
    return UserCredentials(_str(_get(body, "user"), "user"), [
        (_str(_get(c, "mechanism"), "mechanism"), _int(_get(c, "iterations"), "iterations", MAX_ITERATIONS))
        for c in (_obj(item, "credential") for item in _list(_get(body, "credentials"), "credentials"))])


REQUEST_DECODERS = {
    "DescribeAcls": lambda body, _raw: DescribeAclsRequest(_entry(body, False)),
    "CreateAcls": lambda body, _raw: CreateAclsRequest(_acls(body, True)),
    "DeleteAcls": lambda body, _raw: DeleteAclsRequest(_entry(body, False)),
    "DescribeUsers": lambda body, _raw: DescribeUsersRequest(_opt_strs(body.get("users"), "users")),
    "AlterUser": _alter_user,
}
REQUEST_ENCODERS = {
    DescribeAclsRequest: lambda e: {"DescribeAcls": _enc_entry(e.filter)},
    CreateAclsRequest: lambda e: {"CreateAcls": {"acls": [_enc_entry(a) for a in e.acls]}},
    DeleteAclsRequest: lambda e: {"DeleteAcls": _enc_entry(e.filter)},
    DescribeUsersRequest: lambda e: {"DescribeUsers": {} if e.users is None else {"users": list(e.users)}},
    AlterUserRequest: _enc_alter_user,
}
RESPONSE_DECODERS = {
    "Acls": lambda body, _raw: AclsResponse(_each(_list(_get(body, "acls"), "acls"), "acls",
                                                  lambda v: _entry(v, True))),
    "CreateAcls": lambda body, _raw: CreateAclsResponse(_int(_get(body, "created"), "created", MAX_ACLS)),
    "DeleteAcls": lambda body, _raw: DeleteAclsResponse(_each(_list(_get(body, "acls"), "acls"), "acls",
                                                              lambda v: _entry(v, True))),
    "Users": lambda body, _raw: UsersResponse(_each(_list(_get(body, "users"), "users"), "users", _user)),
    "AlterUser": lambda body, _raw: AlterUserResponse(_bool(_get(body, "altered"), "altered")),
}
RESPONSE_ENCODERS = {
    AclsResponse: lambda e: {"Acls": {"acls": [_enc_entry(a) for a in e.acls]}},
    CreateAclsResponse: lambda e: {"CreateAcls": {"created": e.created}},
    DeleteAclsResponse: lambda e: {"DeleteAcls": {"acls": [_enc_entry(a) for a in e.acls]}},
    UsersResponse: lambda e: {"Users": {"users": [
        {"user": u.user, "credentials": [{"mechanism": m, "iterations": i} for m, i in u.credentials]}
        for u in e.users]}},
    AlterUserResponse: lambda e: {"AlterUser": {"altered": e.altered}},
}
