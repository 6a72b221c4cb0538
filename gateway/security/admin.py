"""`SecurityAdmin`: the administration of ACLs, users' SCRAM credentials and client quotas, once for every protocol —
Kafka's CreateAcls / DescribeAcls / DeleteAcls, Describe/AlterUserScramCredentials and Describe/AlterClientQuotas,
the native protocol's ACL and user requests (`logway acls`, `logway users`) — with Kafka's checks. Each protocol
maps requests to these calls and a `Refusal` to its own answer (its `kind` names Kafka's error: INVALID_REQUEST,
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM).

Changes are written durably (one fdatasync per request) in a worker thread before they are answered and served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from logway.codecs.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, credential_from_salted

from .acls import Acl, AclFilter, AclInvalid
from .quotas import ENTITY_TYPES, QuotaRefusal, Quotas

__all__ = ["Refusal", "SecurityAdmin", "CredentialChange"]


class Refusal(Exception):
    """A request (or one of its items) refused: `kind` is the Kafka error's name, the message says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """One upsertion (salt and salted password, as Kafka's AlterUserScramCredentials carries them) or deletion."""

    user: str
    mechanism: str
    iterations: int = 0
    salt: bytes = b""
    salted_password: bytes = b""
    delete: bool = False


class SecurityAdmin:
    def __init__(self, security, in_thread: Callable[..., Awaitable]) -> None:
        """`security`: the gateway's `Security`; `in_thread(fn, *args)` runs blocking work off the event loop."""
        self.security = security
        self.in_thread = in_thread

    # -- ACLs ------------------------------------------------------------------------------------------------
    def describe_acls(self, flt: AclFilter) -> list[Acl]:
        try:
            flt.validate()
        except AclInvalid as exc:
            raise Refusal("INVALID_REQUEST", str(exc)) from None
        return self.security.authorizer.acls(flt)

    async def create_acls(self, acls: list[Acl]) -> list[Refusal | None]:
        """Each binding's refusal (None: created, or there already); the valid ones are written at once."""
        results: list[Refusal | None] = []
        valid = []
        for acl in acls:
            try:
                valid.append(acl.validate())
                results.append(None)
            except AclInvalid as exc:
                results.append(Refusal("INVALID_REQUEST", str(exc)))
        existing = set(self.security.authorizer.acls())
        added = list(dict.fromkeys(a for a in valid if a not in existing))
        if added:
            await self.in_thread(self.security.authorizer.change, added, [])
        return results

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[Acl] | Refusal]:
        """Per filter, the bindings it deleted (or its refusal)."""
        authorizer = self.security.authorizer
        results: list[list[Acl] | Refusal] = []
        removed: dict[Acl, None] = {}
        for flt in filters:
            try:
                flt.validate()
            except AclInvalid as exc:
                results.append(Refusal("INVALID_REQUEST", str(exc)))
                continue
            matched = authorizer.acls(flt)
            removed.update(dict.fromkeys(matched))
            results.append(matched)
        if removed:
            await self.in_thread(authorizer.change, [], list(removed))
        return results

    # -- SCRAM credentials -----------------------------------------------------------------------------------
    def describe_users(self, users: list[str] | None) -> list[tuple[str, list[tuple[str, int]] | Refusal]]:
        """(user, [(mechanism, iterations)] or a refusal) for the users named — every user with a stored
        credential when None (the configured `auth.users` have no stored credential: they are not listed)."""
        stored = self.security.users.stored()
        by_user: dict[str, list[tuple[str, int]]] = {}
        for (user, mechanism), credential in sorted(stored.items()):
            by_user.setdefault(user, []).append((mechanism, credential.iterations))
        if users is None:
            return sorted(by_user.items())
        out: list[tuple[str, list[tuple[str, int]] | Refusal]] = []
        seen: set[str] = set()
        duplicates = {u for u in users if users.count(u) > 1}
        for user in users:
            if user in seen:
                continue
            seen.add(user)
            if user in duplicates:
                out.append((user, Refusal("DUPLICATE_RESOURCE", f"user {user!r} is named more than once")))
            elif user not in by_user:
                out.append((user, Refusal("RESOURCE_NOT_FOUND", f"attempt to describe a user credential that "
                                                                f"does not exist: {user}")))
            else:
                out.append((user, by_user[user]))
        return out

    async def alter_credentials(self, changes: list[CredentialChange]) -> list[tuple[str, Refusal | None]]:
        """Per user named (in order), its refusal or None; a user's changes are made together or not at all."""
        stored = self.security.users.stored()
        by_user: dict[str, list[CredentialChange]] = {}
        for change in changes:
            by_user.setdefault(change.user, []).append(change)
        results: list[tuple[str, Refusal | None]] = []
        put, deleted = {}, []
        for user, mine in by_user.items():
            try:
                user_put, user_deleted = self._checked(user, mine, stored)
            except Refusal as refusal:
                results.append((user, refusal))
                continue
            put.update(user_put)
            deleted += user_deleted
            results.append((user, None))
        if put or deleted:
            await self.in_thread(self.security.users.change, put, deleted)
        return results

    @staticmethod
    def _checked(user: str, changes: list[CredentialChange], stored) -> tuple[dict, list]:
        if not user:
            raise Refusal("UNACCEPTABLE_CREDENTIAL", "username must not be empty")
        mechanisms = [c.mechanism for c in changes]
        if len(set(mechanisms)) != len(mechanisms):
            raise Refusal("DUPLICATE_RESOURCE", f"a user credential of {user!r} is altered more than once for one "
                                                "mechanism")
        put, deleted = {}, []
        for change in changes:
            if change.mechanism not in MECHANISMS:
                raise Refusal("UNSUPPORTED_SASL_MECHANISM", f"unknown SCRAM mechanism {change.mechanism!r}")
            key = (user, change.mechanism)
            if change.delete:
                if key not in stored:
                    raise Refusal("RESOURCE_NOT_FOUND", f"attempt to delete a user credential that does not exist: "
                                                        f"{user} {change.mechanism}")
                deleted.append(key)
                continue
            if not MIN_ITERATIONS <= change.iterations <= MAX_ITERATIONS:
                raise Refusal("UNACCEPTABLE_CREDENTIAL", f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                                                         f"got {change.iterations}")
            if not change.salt or not change.salted_password:
                raise Refusal("UNACCEPTABLE_CREDENTIAL", "a credential needs a salt and a salted password")
            put[key] = credential_from_salted(change.mechanism, change.salted_password, change.salt,
                                              change.iterations)
        return put, deleted

    # -- client quotas ---------------------------------------------------------------------------------------
    def describe_quotas(self, components: list[tuple[str, int, str | None]], strict: bool) -> list[tuple]:
        """(entity, {key: value}) of the entities the components match (KIP-546: per component an entity type and
        a match — 0 this name, 1 the default, 2 any —; `strict`: entities with no other type)."""
        for entity_type, match_type, match in components:
            if entity_type not in ENTITY_TYPES:
                raise Refusal("INVALID_REQUEST", f"unknown entity type {entity_type!r} (user, client-id)")
            if match_type not in (0, 1, 2) or (match_type == 0 and match is None):
                raise Refusal("INVALID_REQUEST", f"bad match of {entity_type}: type {match_type}, {match!r}")
        if len({c[0] for c in components}) != len(components):
            raise Refusal("INVALID_REQUEST", "an entity type is named twice")
        wanted = {c[0] for c in components}
        out = []
        for entity, values in sorted(self.security.quotas.entries().items(), key=lambda item: str(item[0])):
            names = dict(entity)
            if strict and set(names) != wanted:
                continue
            if all(entity_type in names and (match_type == 2 or (match_type == 1 and names[entity_type] is None)
                                             or (match_type == 0 and names[entity_type] == match))
                   for entity_type, match_type, match in components):
                out.append((entity, values))
        return out

    async def alter_quotas(self, entries: list[tuple[list, list[tuple[str, float, bool]]]],
                           validate_only: bool) -> list[Refusal | None]:
        """Per entry (entity pairs, [(key, value, remove)]), its refusal or None; the valid ones are made (unless
        `validate_only`) together."""
        results: list[Refusal | None] = []
        changes = []
        for entity, ops in entries:
            try:
                normalized = Quotas.normalized(entity)
                keys = [key for key, _, _ in ops]
                if len(set(keys)) != len(keys):
                    raise QuotaRefusal("a quota key is altered twice for one entity")
                changes.append((normalized, {key: Quotas.checked(key, value, remove) for key, value, remove in ops}))
                results.append(None)
            except QuotaRefusal as exc:
                results.append(Refusal("INVALID_REQUEST", str(exc)))
        if changes and not validate_only:
            await self.in_thread(self.security.quotas.change, changes)
        return results
