"""The native protocol's security administration: ACLs, users' SCRAM credentials and client quotas (our extensions;
`logway acls`, `logway users` and `logway quotas` send them). Events and their JSON, registered with the other
requests by `connection`.

Requests::

    {"DescribeAcls": filter}                       -> {"Acls": {"acls": [acl, ...]}}
    {"CreateAcls": {"acls": [acl, ...]}}           -> {"CreateAcls": {"created": int}}
    {"DeleteAcls": filter}                         -> {"DeleteAcls": {"acls": [acl, ...]}}   (those deleted)
    {"DescribeUsers": {"users"?: [name, ...]}}     -> {"Users": {"users": [{"user", "credentials":
                                                                              [{"mechanism", "iterations"}]}]}}
    {"AlterUser": {"user", "mechanism", "iterations", "salt", "salted_password"}}  (base64: what Kafka's
        AlterUserScramCredentials carries — the client salts the password, which never crosses the connection)
    {"AlterUser": {"user", "mechanism", "delete": true}}      -> {"AlterUser": {"altered": bool}}

    {"DescribeQuotas": {"entity"?: [component, ...], "strict"?: bool}}
                                                   -> {"Quotas": {"quotas": [{"entity": [part, ...],
                                                                              "values": {key: number}}]}}
    {"AlterQuotas": {"entity": [part, ...], "set"?: {key: number}, "delete"?: [key, ...], "validate_only"?: bool}}
                                                   -> {"AlterQuotas": {"altered": bool}}

    acl    := {"resource_type", "name", "pattern", "principal", "host", "operation", "permission"}  (names, as
              Kafka's kafka-acls writes them: Topic, LITERAL, User:alice, *, Read, Allow)
    filter := the same keys, each optional (absent or null: any); "pattern": "MATCH" matches the bindings that
              apply to the resource named
    part   := {"type": "user"|"client-id", "name": str} or {"type", "default": true} (every user, every client id)
    component := a part (that name, or the default), or {"type"} alone: an entity with any name of that type

Quotas are Kafka's client quotas (DescribeClientQuotas / AlterClientQuotas: the same entities, keys and matching).
Bounds: a request names at most `MAX_ACLS` bindings, `MAX_ENTITY_PARTS` parts of an entity and `MAX_QUOTA_KEYS`
quota keys (and a name is a JSON string, bounded by the frame).
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass, field
from typing import Any

from .wire import _bool, _each, _get, _int, _Invalid, _kind, _list, _obj, _opt_bool, _opt_strs, _str

__all__ = ["AclEntry", "AclsResponse", "AlterQuotasRequest", "AlterQuotasResponse", "AlterUserRequest",
           "AlterUserResponse", "CreateAclsRequest", "CreateAclsResponse", "DeleteAclsRequest", "DeleteAclsResponse",
           "DescribeAclsRequest", "DescribeQuotasRequest", "DescribeUsersRequest", "MAX_ACLS", "MAX_ENTITY_PARTS",
           "MAX_QUOTA_KEYS", "QuotaComponent", "QuotaEntry", "QuotasResponse", "UserCredentials", "UsersResponse",
           "REQUEST_DECODERS", "REQUEST_ENCODERS", "RESPONSE_DECODERS", "RESPONSE_ENCODERS"]

#: Bindings one CreateAcls may carry: an operator's batch, never a flood.
MAX_ACLS = 1000
#: Iterations as Kafka's ScramCredentialUpsertion carries them (an int32).
MAX_ITERATIONS = 2**31 - 1
#: Parts of a quota entity: each entity type once, and Kafka has three (user, client-id, ip); more is no entity.
MAX_ENTITY_PARTS = 8
#: Quota keys one request may set or delete: Kafka has about ten; a request with more is not an operator's.
MAX_QUOTA_KEYS = 64
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
class QuotaComponent:
    """What a DescribeQuotas matches of one entity type: `name`, or the default (`default`), or any (neither)."""

    entity_type: str
    name: str | None = None
    default: bool = False


@dataclass(frozen=True, slots=True)
class DescribeQuotasRequest:
    components: list[QuotaComponent] = field(default_factory=list)
    strict: bool = False


@dataclass(frozen=True, slots=True)
class AlterQuotasRequest:
    """`entity`: (type, name or None for the default) pairs; `set` the keys to give values, `delete` those to
    remove."""

    entity: list[tuple[str, str | None]]
    set: dict[str, float] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    validate_only: bool = False


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


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    entity: list[tuple[str, str | None]]  # (type, name or None: the default)
    values: dict[str, float]


@dataclass(frozen=True, slots=True)
class QuotasResponse:
    quotas: list[QuotaEntry]


@dataclass(frozen=True, slots=True)
class AlterQuotasResponse:
    altered: bool  # false with validate_only


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


def _part(value: Any, any_name: bool) -> QuotaComponent:
    """An entity's part (`any_name`: or a component matching any name of its type)."""
    body = _obj(value, "entity")
    entity_type = _str(_get(body, "type"), "type")
    name, default = body.get("name"), body.get("default")
    if default is not None and _bool(default, "default"):
        if name is not None:
            raise _Invalid("an entity part has a `name` or `\"default\": true`, not both")
        return QuotaComponent(entity_type, default=True)
    if name is None and not any_name:
        raise _Invalid("an entity part needs a `name` or `\"default\": true`")
    return QuotaComponent(entity_type, None if name is None else _str(name, "name"))


def _parts(value: Any, any_name: bool) -> list[QuotaComponent]:
    items = _list(value, "entity")
    if len(items) > MAX_ENTITY_PARTS:
        raise _Invalid(f"`entity` has {len(items)} parts; at most {MAX_ENTITY_PARTS}")
    return _each(items, "entity", lambda v: _part(v, any_name))


def _entity(value: Any) -> list[tuple[str, str | None]]:
    return [(p.entity_type, p.name) for p in _parts(value, False)]


def _enc_part(entity_type: str, name: str | None) -> dict:
    return {"type": entity_type, "default": True} if name is None else {"type": entity_type, "name": name}


def _enc_component(c: QuotaComponent) -> dict:
    return {"type": c.entity_type, "default": True} if c.default else \
        {"type": c.entity_type, **({} if c.name is None else {"name": c.name})}


def _quota_value(value: Any, name: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise _Invalid(f"`{name}` must be a number, got {_kind(value)}")
    return float(value)


def _values(value: Any, name: str) -> dict[str, float]:
    body = _obj(value, name)
    if len(body) > MAX_QUOTA_KEYS:
        raise _Invalid(f"`{name}` has {len(body)} keys; at most {MAX_QUOTA_KEYS}")
    return {key: _quota_value(v, key) for key, v in body.items()}


def _alter_quotas(body: dict, _raw) -> AlterQuotasRequest:
    values = _values(body["set"], "set") if body.get("set") is not None else {}
    deleted = _opt_strs(body.get("delete"), "delete") or []
    if len(deleted) > MAX_QUOTA_KEYS:
        raise _Invalid(f"`delete` names {len(deleted)} keys; at most {MAX_QUOTA_KEYS}")
    if not values and not deleted:
        raise _Invalid("nothing to alter: give `set` or `delete`")
    return AlterQuotasRequest(_entity(_get(body, "entity")), values, deleted, _opt_bool(body.get("validate_only"),
                                                                                          "validate_only"))


def _quota_entry(value: Any) -> QuotaEntry:
    body = _obj(value, "quota")
    return QuotaEntry(_entity(_get(body, "entity")), _values(_get(body, "values"), "values"))


REQUEST_DECODERS = {
    "DescribeAcls": lambda body, _raw: DescribeAclsRequest(_entry(body, False)),
    "CreateAcls": lambda body, _raw: CreateAclsRequest(_acls(body, True)),
    "DeleteAcls": lambda body, _raw: DeleteAclsRequest(_entry(body, False)),
    "DescribeUsers": lambda body, _raw: DescribeUsersRequest(_opt_strs(body.get("users"), "users")),
    "AlterUser": _alter_user,
    "DescribeQuotas": lambda body, _raw: DescribeQuotasRequest(
        _parts(body["entity"], True) if body.get("entity") is not None else [],
        _opt_bool(body.get("strict"), "strict")),
    "AlterQuotas": _alter_quotas,
}
REQUEST_ENCODERS = {
    DescribeAclsRequest: lambda e: {"DescribeAcls": _enc_entry(e.filter)},
    CreateAclsRequest: lambda e: {"CreateAcls": {"acls": [_enc_entry(a) for a in e.acls]}},
    DeleteAclsRequest: lambda e: {"DeleteAcls": _enc_entry(e.filter)},
    DescribeUsersRequest: lambda e: {"DescribeUsers": {} if e.users is None else {"users": list(e.users)}},
    AlterUserRequest: _enc_alter_user,
    DescribeQuotasRequest: lambda e: {"DescribeQuotas": {"entity": [_enc_component(c) for c in e.components],
                                                         "strict": e.strict}},
    AlterQuotasRequest: lambda e: {"AlterQuotas": {
        "entity": [_enc_part(t, n) for t, n in e.entity], **({"set": dict(e.set)} if e.set else {}),
        **({"delete": list(e.delete)} if e.delete else {}), "validate_only": e.validate_only}},
}
RESPONSE_DECODERS = {
    "Acls": lambda body, _raw: AclsResponse(_each(_list(_get(body, "acls"), "acls"), "acls",
                                                  lambda v: _entry(v, True))),
    "CreateAcls": lambda body, _raw: CreateAclsResponse(_int(_get(body, "created"), "created", MAX_ACLS)),
    "DeleteAcls": lambda body, _raw: DeleteAclsResponse(_each(_list(_get(body, "acls"), "acls"), "acls",
                                                              lambda v: _entry(v, True))),
    "Users": lambda body, _raw: UsersResponse(_each(_list(_get(body, "users"), "users"), "users", _user)),
    "AlterUser": lambda body, _raw: AlterUserResponse(_bool(_get(body, "altered"), "altered")),
    "Quotas": lambda body, _raw: QuotasResponse(_each(_list(_get(body, "quotas"), "quotas"), "quotas",
                                                      _quota_entry)),
    "AlterQuotas": lambda body, _raw: AlterQuotasResponse(_bool(_get(body, "altered"), "altered")),
}
RESPONSE_ENCODERS = {
    AclsResponse: lambda e: {"Acls": {"acls": [_enc_entry(a) for a in e.acls]}},
    CreateAclsResponse: lambda e: {"CreateAcls": {"created": e.created}},
    DeleteAclsResponse: lambda e: {"DeleteAcls": {"acls": [_enc_entry(a) for a in e.acls]}},
    UsersResponse: lambda e: {"Users": {"users": [
        {"user": u.user, "credentials": [{"mechanism": m, "iterations": i} for m, i in u.credentials]}
        for u in e.users]}},
    AlterUserResponse: lambda e: {"AlterUser": {"altered": e.altered}},
    QuotasResponse: lambda e: {"Quotas": {"quotas": [
        {"entity": [_enc_part(t, n) for t, n in q.entity], "values": dict(q.values)} for q in e.quotas]}},
    AlterQuotasResponse: lambda e: {"AlterQuotas": {"altered": e.altered}},
}
