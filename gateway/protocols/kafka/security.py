"""The Kafka APIs of the security administration, on the gateway's one `security.SecurityAdmin`: DescribeAcls,
CreateAcls, DeleteAcls (what kafka-acls and the Admin API's describe_acls / create_acls / delete_acls send),
DescribeUserScramCredentials, AlterUserScramCredentials (kafka-configs --alter --add-config 'SCRAM-SHA-256=…') and
DescribeClientQuotas, AlterClientQuotas (kafka-configs --entity-type users --add-config producer_byte_rate=…).
Who may call them is `authz.py`'s business (Describe / Alter on the cluster).

A refusal carries Kafka's error (`admin.Refusal.kind`) and message; CreateAcls answers each creation on its own,
DeleteAcls each filter with the bindings it deleted.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import acls as ACL
from logway.codecs.kafka.api import quotas as Q
from logway.codecs.kafka.api import scram_credentials as S
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...security import Acl, AclFilter, Operation, PatternType, Permission, ResourceType
from ...security.admin import CredentialChange, Refusal

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

__all__ = ["HANDLERS"]

_MECHANISM_CODES = {name: code for code, name in S.MECHANISM_CODES.items()}


def _member(enum: type[IntEnum], code: int) -> IntEnum:
    """The enum member of a code from the wire; UNKNOWN (0) for one Kafka does not define."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


def _code(refusal: Refusal) -> int:
    return E[refusal.kind]


def _filter(f) -> AclFilter:
    return AclFilter(_member(ResourceType, f.resource_type_filter), f.resource_name_filter,
                     _member(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
                     _member(Operation, f.operation), _member(Permission, f.permission_type))


async def describe_acls(broker: "BrokerState", body, version, conn):
    try:
        found = broker.security.admin.describe_acls(_filter(body))
    except Refusal as refusal:
        return ACL.DescribeAclsResponse(error_code=_code(refusal), error_message=refusal.message)
    resources: dict[tuple, list[ACL.AclDescription]] = {}
    for acl in found:
        resources.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(
            ACL.AclDescription(acl.principal, acl.host, acl.operation, acl.permission))
    return ACL.DescribeAclsResponse(resources=[ACL.DescribeAclsResource(rtype, name, pattern, acls)
                                               for (rtype, name, pattern), acls in resources.items()])


async def create_acls(broker: "BrokerState", body, version, conn):
    acls = [Acl(_member(ResourceType, c.resource_type), c.resource_name, _member(PatternType, c.resource_pattern_type),
                c.principal, c.host, _member(Operation, c.operation), _member(Permission, c.permission_type))
            for c in body.creations]
    results = await broker.security.admin.create_acls(acls)
    return ACL.CreateAclsResponse(results=[ACL.AclCreationResult() if r is None
                                           else ACL.AclCreationResult(_code(r), r.message) for r in results])


async def delete_acls(broker: "BrokerState", body, version, conn):
    results = await broker.security.admin.delete_acls([_filter(f) for f in body.filters])
    out = []
    for result in results:
        if isinstance(result, Refusal):
            out.append(ACL.DeleteAclsFilterResult(_code(result), result.message))
            continue
        out.append(ACL.DeleteAclsFilterResult(matching_acls=[ACL.DeleteAclsMatchingAcl(
            resource_type=a.resource_type, resource_name=a.name, pattern_type=a.pattern, principal=a.principal,
            host=a.host, operation=a.operation, permission_type=a.permission) for a in result]))
    return ACL.DeleteAclsResponse(filter_results=out)


async def describe_user_scram_credentials(broker: "BrokerState", body, version, conn):
    names = [u.name for u in body.users] if body.users else None  # (no list, or an empty one: every user, as Kafka)
    results = []
    for user, found in broker.security.admin.describe_users(names):
        if isinstance(found, Refusal):
            results.append(S.DescribeUserScramCredentialsResult(user, _code(found), found.message))
        else:
            results.append(S.DescribeUserScramCredentialsResult(user, credential_infos=[
                S.CredentialInfo(_MECHANISM_CODES[mechanism], iterations) for mechanism, iterations in found]))
    return S.DescribeUserScramCredentialsResponse(results=results)


async def alter_user_scram_credentials(broker: "BrokerState", body, version, conn):
    def mechanism(code: int) -> str:
        return S.MECHANISM_CODES.get(code, f"unknown mechanism {code}")

    changes = [CredentialChange(d.name, mechanism(d.mechanism), delete=True) for d in body.deletions]
    changes += [CredentialChange(u.name, mechanism(u.mechanism), u.iterations, u.salt, u.salted_password)
                for u in body.upsertions]
    results = await broker.security.admin.alter_credentials(changes)
    return S.AlterUserScramCredentialsResponse(results=[
        S.AlterUserScramCredentialsResult(user) if refusal is None
        else S.AlterUserScramCredentialsResult(user, _code(refusal), refusal.message) for user, refusal in results])


async def describe_client_quotas(broker: "BrokerState", body, version, conn):
    components = [(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        found = broker.security.admin.describe_quotas(components, body.strict)
    except Refusal as refusal:
        return Q.DescribeClientQuotasResponse(error_code=_code(refusal), error_message=refusal.message, entries=None)
    return Q.DescribeClientQuotasResponse(entries=[
        Q.EntryData([Q.EntityData(t, n) for t, n in entity], [Q.ValueData(k, v) for k, v in sorted(values.items())])
        for entity, values in found])


async def alter_client_quotas(broker: "BrokerState", body, version, conn):
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity], [(o.key, o.value, o.remove) for o in entry.ops])
               for entry in body.entries]
    results = await broker.security.admin.alter_quotas(entries, body.validate_only)
    return Q.AlterClientQuotasResponse(entries=[
        Q.AlterEntryResult(0 if r is None else _code(r), None if r is None else r.message, entry.entity)
        for entry, r in zip(body.entries, results)])


#: api key -> handler (the broker's table takes them in).
HANDLERS = {
    ACL.DESCRIBE_ACLS_KEY: describe_acls,
    ACL.CREATE_ACLS_KEY: create_acls,
    ACL.DELETE_ACLS_KEY: delete_acls,
    S.DESCRIBE_USER_SCRAM_CREDENTIALS_KEY: describe_user_scram_credentials,
    S.ALTER_USER_SCRAM_CREDENTIALS_KEY: alter_user_scram_credentials,
    Q.DESCRIBE_CLIENT_QUOTAS_KEY: describe_client_quotas,
    Q.ALTER_CLIENT_QUOTAS_KEY: alter_client_quotas,
}
