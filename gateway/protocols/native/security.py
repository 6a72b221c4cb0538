"""The native protocol's security administration (`DescribeAcls`, `CreateAcls`, `DeleteAcls`, `DescribeUsers`,
`AlterUser`, `DescribeQuotas`, `AlterQuotas`: what `logway acls`, `logway users` and `logway quotas` send) on the
gateway's one `security.SecurityAdmin` — the quotas with the checks of Kafka's DescribeClientQuotas /
AlterClientQuotas. Names are
read as people write them (`Topic`, `topic`, `TransactionalId`; `Read`, `IdempotentWrite`; `Allow`) and answered as
kafka-acls writes them; a refusal is an `Error` with Kafka's reason (a CreateAcls is checked whole before anything
is created)."""

from __future__ import annotations

from functools import partial

from logway.codecs.native import events as nev
from logway.codecs.native import security as sec

from ...security import Acl, AclFilter, Operation, PatternType, Permission, ResourceType
from ...security.acls import parse_name
from ...security.admin import CredentialChange, Refusal

__all__ = ["security_handlers"]

#: How kafka-acls writes each name.
_WRITTEN = {ResourceType.TRANSACTIONAL_ID: "TransactionalId", Operation.IDEMPOTENT_WRITE: "IdempotentWrite",
            Operation.DESCRIBE_CONFIGS: "DescribeConfigs", Operation.ALTER_CONFIGS: "AlterConfigs",
            Operation.CLUSTER_ACTION: "ClusterAction"}


#: KIP-546's match types of a DescribeClientQuotas component: this name, the default, any.
_EXACT, _DEFAULT, _ANY = 0, 1, 2


def _written(member) -> str:
    return _WRITTEN.get(member) or member.name.capitalize()


def entry_of(acl: Acl) -> sec.AclEntry:
    return sec.AclEntry(_written(acl.resource_type), acl.name, acl.pattern.name, acl.principal, acl.host,
                        _written(acl.operation), _written(acl.permission))


def _member(enum, text: str | None, default):
    return default if text is None else parse_name(enum, text)


def acl_of(entry: sec.AclEntry) -> Acl:
    return Acl(parse_name(ResourceType, entry.resource_type), entry.name, parse_name(PatternType, entry.pattern),
               entry.principal, entry.host, parse_name(Operation, entry.operation),
               parse_name(Permission, entry.permission))


def filter_of(entry: sec.AclEntry) -> AclFilter:
    return AclFilter(_member(ResourceType, entry.resource_type, ResourceType.ANY), entry.name,
                     _member(PatternType, entry.pattern, PatternType.ANY), entry.principal, entry.host,
                     _member(Operation, entry.operation, Operation.ANY),
                     _member(Permission, entry.permission, Permission.ANY))


def security_handlers(admin) -> dict:
    """request type -> async handler, for the `NativeHandler`'s table."""

    async def describe_acls(ev: sec.DescribeAclsRequest):
        return sec.AclsResponse([entry_of(a) for a in admin.describe_acls(filter_of(ev.filter))])

    async def create_acls(ev: sec.CreateAclsRequest):
        acls = [acl_of(entry) for entry in ev.acls]
        for acl in acls:  # the whole request is checked before anything is created
            try:
                acl.validate()
            except ValueError as exc:
                return nev.ErrorResponse(f"invalid request: {exc}")
        await admin.create_acls(acls)
        return sec.CreateAclsResponse(len(acls))

    async def delete_acls(ev: sec.DeleteAclsRequest):
        (result,) = await admin.delete_acls([filter_of(ev.filter)])
        if isinstance(result, Refusal):
            return nev.ErrorResponse(f"invalid request: {result.message}")
        return sec.DeleteAclsResponse([entry_of(a) for a in result])

    async def describe_users(ev: sec.DescribeUsersRequest):
        users = []
        for user, found in admin.describe_users(ev.users):
            if isinstance(found, Refusal):
                return nev.ErrorResponse(f"user not found: {user}" if found.kind == "RESOURCE_NOT_FOUND"
                                         else f"invalid request: {found.message}")
            users.append(sec.UserCredentials(user, found))
        return sec.UsersResponse(users)

    async def alter_user(ev: sec.AlterUserRequest):
        ((_, refusal),) = await admin.alter_credentials([CredentialChange(
            ev.user, ev.mechanism, ev.iterations, ev.salt, ev.salted_password, ev.delete)])
        if refusal is not None:
            what = "user not found" if refusal.kind == "RESOURCE_NOT_FOUND" else "invalid request"
            return nev.ErrorResponse(f"{what}: {refusal.message}")
        return sec.AlterUserResponse(True)

    async def describe_quotas(ev: sec.DescribeQuotasRequest):
        components = [(c.entity_type, _ANY if c.name is None and not c.default else _DEFAULT if c.default else _EXACT,
                       c.name) for c in ev.components]
        try:
            found = admin.describe_quotas(components, ev.strict)
        except Refusal as refusal:
            return nev.ErrorResponse(f"invalid request: {refusal.message}")
        return sec.QuotasResponse([sec.QuotaEntry(list(entity), dict(values)) for entity, values in found])

    async def alter_quotas(ev: sec.AlterQuotasRequest):
        ops = [(key, value, False) for key, value in ev.set.items()] + [(key, None, True) for key in ev.delete]
        (refusal,) = await admin.alter_quotas([(ev.entity, ops)], ev.validate_only)
        if refusal is not None:
            return nev.ErrorResponse(f"invalid request: {refusal.message}")
        return sec.AlterQuotasResponse(not ev.validate_only)

    async def refused_names(handler, ev):
        try:
            return await handler(ev)
        except ValueError as exc:  # a name that is no resource type, pattern, operation or permission
            return nev.ErrorResponse(f"invalid request: {exc}")

    table = {sec.DescribeAclsRequest: describe_acls, sec.CreateAclsRequest: create_acls,
             sec.DeleteAclsRequest: delete_acls, sec.DescribeUsersRequest: describe_users,
             sec.AlterUserRequest: alter_user, sec.DescribeQuotasRequest: describe_quotas,
             sec.AlterQuotasRequest: alter_quotas}
    return {kind: partial(refused_names, handler) for kind, handler in table.items()}
