"""Kafka's ACL model, once for every protocol: resource types, pattern types, operations and permissions (with
Kafka's codes, which its Admin API carries), a binding (`Acl`), a filter over bindings (`AclFilter`, what
DescribeAcls and DeleteAcls take) and the checks a new binding must pass.

- A binding allows or denies a principal (`User:alice`, or `User:*`: everyone) from a host (an IP address, or `*`)
  an operation on resources of one type: the resource named (LITERAL; `*` names every resource of the type) or every
  resource whose name starts with the pattern (PREFIXED). The cluster is one resource, `kafka-cluster`.
- Allowing Read, Write, Delete or Alter also allows Describe; allowing AlterConfigs also allows DescribeConfigs;
  All is every operation. A Deny is for the operation it names (or All) only.
- A filter matches bindings: ANY (or a null name, principal, host) matches every value; the pattern type MATCH
  matches the bindings that apply to the named resource (literal ones of that name or `*`, prefixed ones whose
  prefix starts the name).

The names stored (`logway.storage.security.AclRecord`) are the enum members' names: "TOPIC", "PREFIXED", "READ".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from logway.storage.security import AclRecord

from .principals import parse_principal

__all__ = ["CLUSTER_NAME", "Acl", "AclFilter", "AclInvalid", "Operation", "PatternType", "Permission",
           "ResourceType", "WILDCARD", "WILDCARD_PRINCIPAL", "IMPLIED_BY", "parse_name"]

#: The name of the cluster resource (the one resource of type Cluster).
CLUSTER_NAME = "kafka-cluster"
#: A literal resource name, or an ACL's host, that matches every one.
WILDCARD = "*"
#: The principal of an ACL that applies to every principal.
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: operation -> the operations whose Allow also allows it (besides itself and All).
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
#: The resource types a binding may name, and the operations that mean something for each (Kafka's table).
OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.ALL, Operation.READ, Operation.WRITE, Operation.CREATE,
                                   Operation.DELETE, Operation.ALTER, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.ALL, Operation.READ, Operation.DELETE, Operation.DESCRIBE}),
    ResourceType.CLUSTER: frozenset({Operation.ALL, Operation.CREATE, Operation.ALTER, Operation.DESCRIBE,
                                     Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                                     Operation.IDEMPOTENT_WRITE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.ALL, Operation.WRITE, Operation.DESCRIBE}),
}


class AclInvalid(ValueError):
    """A binding that cannot be created (Kafka answers INVALID_REQUEST with the message)."""


def parse_name(enum: type[IntEnum], text: str) -> IntEnum:
    """An enum member from its name as people write it: `Topic`, `TOPIC`, `transactional-id`, `TransactionalId`,
    `IdempotentWrite`; ValueError naming the choices."""
    key = "".join(ch for ch in text if ch.isalnum()).upper()
    for member in enum:
        if member.name.replace("_", "") == key:
            return member
    choices = ", ".join(m.name for m in enum if m.value > 1)
    raise ValueError(f"unknown {enum.__name__} {text!r} (one of {choices})")


@dataclass(frozen=True, slots=True)
class Acl:
    """One binding (see the module docstring)."""

    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def record(self) -> AclRecord:
        return AclRecord(self.resource_type.name, self.name, self.pattern.name, self.principal, self.host,
                         self.operation.name, self.permission.name)

    @classmethod
    def of(cls, record: AclRecord) -> "Acl":
        return cls(ResourceType[record.resource_type], record.name, PatternType[record.pattern], record.principal,
                   record.host, Operation[record.operation], Permission[record.permission])

    def validate(self) -> "Acl":
        """Self, when it may be created; AclInvalid (saying why) otherwise."""
        if self.resource_type not in OPERATIONS:
            raise AclInvalid(f"an ACL names a resource type (Topic, Group, Cluster, TransactionalId), not "
                             f"{self.resource_type.name}")
        if self.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclInvalid(f"an ACL's pattern type is LITERAL or PREFIXED, not {self.pattern.name}")
        if self.operation not in OPERATIONS[self.resource_type]:
            raise AclInvalid(f"operation {self.operation.name} does not apply to {self.resource_type.name} resources")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclInvalid(f"an ACL's permission is ALLOW or DENY, not {self.permission.name}")
        if not self.name:
            raise AclInvalid("an ACL's resource name is empty")
        if self.resource_type is ResourceType.CLUSTER and (self.name != CLUSTER_NAME
                                                           or self.pattern is not PatternType.LITERAL):
            raise AclInvalid(f"the cluster resource is the literal {CLUSTER_NAME!r}")
        if self.pattern is PatternType.PREFIXED and self.name == WILDCARD:
            raise AclInvalid("a PREFIXED pattern of '*' is not allowed: use the LITERAL '*' (every resource)")
        try:
            parse_principal(self.principal)
        except ValueError as exc:
            raise AclInvalid(str(exc)) from None
        if not self.host:
            raise AclInvalid("an ACL's host is an IP address or '*'")
        return self

    def applies_to(self, name: str) -> bool:
        """Whether the binding's resource pattern covers the resource `name` (of its type)."""
        if self.pattern is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A filter over bindings (Kafka's AclBindingFilter): None matches any name, principal or host."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def validate(self) -> "AclFilter":
        """Self, when it can be used; AclInvalid (Kafka's INVALID_REQUEST) naming an UNKNOWN part otherwise."""
        for value, name in ((self.resource_type, "resource type"), (self.pattern, "pattern type"),
                            (self.operation, "operation"), (self.permission, "permission")):
            if value.value == 0:
                raise AclInvalid(f"a filter's {name} is UNKNOWN")
        return self

    def matches(self, acl: Acl) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type is not self.resource_type:
            return False
        if self.pattern is PatternType.MATCH:
            if self.name is not None and not (acl.applies_to(self.name) if acl.pattern is PatternType.PREFIXED
                                              else acl.name in (self.name, WILDCARD)):
                return False
        else:
            if self.pattern is not PatternType.ANY and acl.pattern is not self.pattern:
                return False
            if self.name is not None and acl.name != self.name:
                return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not Operation.ANY and acl.operation is not self.operation:
            return False
        return self.permission is Permission.ANY or acl.permission is self.permission
