"""`Authorizer`: may this principal, from this address, do this operation on this resource? The one place that
answers, for every protocol (each protocol's thin layer asks it and answers a refusal its own way).

Kafka's rules (`StandardAuthorizer`): a super user may do everything; otherwise the bindings that apply to the
resource are those of its type naming it (LITERAL), naming `*`, or whose PREFIXED pattern starts its name; among
them, one that matches the principal (or `User:*`), the host (or `*`) and the operation denies → denied (deny wins),
else one that allows → allowed; when no binding applies to the resource at all, the answer is
`allow_everyone_if_no_acl_found` — which the gateway turns off whenever a listener requires authentication, so a
resource nobody was given is nobody's.

`open` is true while every answer is yes — no binding at all and `allow_everyone_if_no_acl_found` — and the
protocols' layers then skip asking (a gateway without ACLs pays nothing per request for them).

Everything is in memory: the bindings come from the storage backend (`SecurityState.acls()`) at start and after
every change (`change`, which writes them durably first), indexed by resource type, literal name and prefix length;
answers are also remembered per (principal, host, operation, resource) until the bindings change. A check on the
request path is one dictionary lookup when the same client asked before, a few otherwise — never I/O.

`operations()` is Kafka's "authorized operations" of a resource (what Metadata, DescribeGroups, DescribeCluster and
ConsumerGroupDescribe answer when asked): a bit field with bit `code` set for each operation of the resource's type
(`acls.OPERATIONS`, All aside) the principal may do there, as a Kafka broker computes it.

`check()` is what the protocols call: a refusal is counted (`denied`, the metric
`logway_authorization_denied_total`) and logged with the principal, address, operation and resource (a message whose
lines the gateway's repeat limiter bounds: a client that is refused in a loop cannot fill the log).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Iterable

from .acls import CLUSTER_NAME, IMPLIED_BY, OPERATIONS, WILDCARD, WILDCARD_PRINCIPAL, Acl, AclFilter, Operation
from .acls import PatternType, Permission, ResourceType

log = logging.getLogger("logway.gateway.security")

__all__ = ["Authorizer", "CLUSTER"]

#: (resource type, name) of the cluster resource.
CLUSTER = (ResourceType.CLUSTER, CLUSTER_NAME)
#: The operations of each resource type an authorized-operations bit field covers (Kafka's supportedOperations).
_SUPPORTED = {rtype: tuple(sorted(ops - {Operation.ALL})) for rtype, ops in OPERATIONS.items()}
#: Answers remembered at most; past it the memory starts afresh (a few clients asking about many resources).
MAX_REMEMBERED = 65536


class _Section:
    """The bindings of one resource type: literal ones by name, prefixed ones by prefix (and the prefix lengths
    present, so a lookup tries only those)."""

    __slots__ = ("literal", "prefixed", "lengths")

    def __init__(self) -> None:
        self.literal: dict[str, list[Acl]] = defaultdict(list)
        self.prefixed: dict[str, list[Acl]] = defaultdict(list)
        self.lengths: list[int] = []

    def applying(self, name: str) -> list[Acl]:
        found = list(self.literal.get(name, ()))
        if name != WILDCARD:
            found += self.literal.get(WILDCARD, ())
        for length in self.lengths:
            if length > len(name):
                break
            found += self.prefixed.get(name[:length], ())
        return found


def _decide(acls: list[Acl], principal: str, host: str, operation: Operation) -> bool | None:
    """Deny wins over allow; None when no binding of `acls` matches the principal, host and operation."""
    allowed = False
    for acl in acls:
        if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
            continue
        if acl.host != WILDCARD and acl.host != host:
            continue
        op = acl.operation
        if op is not Operation.ALL and op is not operation:
            if acl.permission is not Permission.ALLOW or op not in IMPLIED_BY.get(operation, ()):
                continue
        if acl.permission is Permission.DENY:
            return False
        allowed = True
    return True if allowed else None


class Authorizer:
    """`state`: the storage backend's `SecurityState` (None: no bindings, e.g. a tool's gateway without storage);
    `super_users`: principals allowed everything; `allow_if_no_acl`: the answer for a resource no binding applies to."""

    def __init__(self, state, super_users: Iterable[str], allow_if_no_acl: bool) -> None:
        self.state = state
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._sections: dict[ResourceType, _Section] = {}
        self._acls: list[Acl] = []
        self._answers: dict[tuple, bool] = {}
        self.version = -1
        #: (protocol, operation name, resource type name) -> refusals, for the metrics
        self.denied: dict[tuple[str, str, str], int] = {}
        self.reload()

    # -- the bindings ----------------------------------------------------------------------------------------
    def reload(self) -> None:
        """Read the bindings again from the backend (at start, and after a change another process made)."""
        state = self.state
        if state is None:
            self._index([])
            return
        version = state.version
        self._index([Acl.of(record) for record in state.acls()])
        self.version = version

    def _index(self, acls: list[Acl]) -> None:
        sections: dict[ResourceType, _Section] = {}
        for acl in acls:
            section = sections.setdefault(acl.resource_type, _Section())
            (section.prefixed if acl.pattern is PatternType.PREFIXED else section.literal)[acl.name].append(acl)
        for section in sections.values():
            section.lengths = sorted({len(prefix) for prefix in section.prefixed})
        self._acls, self._sections, self._answers = acls, sections, {}
        # Nothing to check: every answer is yes (no binding, no resource closed) — the protocols skip asking.
        self.open = self.allow_if_no_acl and not acls

    def acls(self, flt: AclFilter | None = None) -> list[Acl]:
        return [acl for acl in self._acls if flt is None or flt.matches(acl)]

    def change(self, added: Iterable[Acl], removed: Iterable[Acl]) -> None:
        """Write the change durably, then serve it (blocking: callers run it in a worker thread)."""
        added, removed = list(added), list(removed)
        self.state.change_acls([a.record() for a in added], [a.record() for a in removed])
        self.reload()

    # -- the answers -----------------------------------------------------------------------------------------
    def allowed(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                name: str) -> bool:
        """The answer, without counting or logging a refusal (filters: which topics a client may see)."""
        key = (principal, host, operation, resource_type, name)
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        if principal in self.super_users:
            answer = True
        else:
            section = self._sections.get(resource_type)
            acls = section.applying(name) if section is not None else []
            decided = _decide(acls, principal, host, operation) if acls else None
            answer = decided if decided is not None else (self.allow_if_no_acl if not acls else False)
        if len(self._answers) >= MAX_REMEMBERED:
            self._answers = {}
        self._answers[key] = answer
        return answer

    def operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized operations of the resource for the principal: bit `operation` set for each operation
        of its type it may do (no refusal counted: nothing is refused)."""
        bits = 0
        for operation in _SUPPORTED[resource_type]:
            if self.allowed(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def check(self, conn, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """`allowed` for a connection's principal and address; a refusal is counted and logged."""
        if conn.internal:  # another worker relaying a request it authorized for its client
            return True
        if self.allowed(conn.principal, conn.address, operation, resource_type, name):
            return True
        self.refused(conn.protocol, conn.principal, conn.peer, operation, resource_type, name)
        return False

    def refused(self, protocol: str, principal: str, peer: str, operation: Operation, resource_type: ResourceType,
                name: str) -> None:
        """Count and log one refusal."""
        key = (protocol, operation.name, resource_type.name)
        self.denied[key] = self.denied.get(key, 0) + 1
        log.warning("%s: denied %s %s on %s %s (%s)", peer, principal, operation.name, resource_type.name, name,
                    protocol)

    def any_allowed(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` on some resource of the type (Kafka's authorizeByResourceType:
        an idempotent producer's InitProducerId asks it of Write on topics): an Allow binding that applies, not
        covered by a Deny of the same principal and host on the whole type (`*`) or on a prefix of its name."""
        if principal in self.super_users:
            return True
        section = self._sections.get(resource_type)
        if section is None:
            return self.allow_if_no_acl
        bindings = [acl for group in (*section.literal.values(), *section.prefixed.values()) for acl in group]
        for acl in bindings:
            if acl.permission is Permission.ALLOW and _decide([acl], principal, host, operation):
                covering = [d for d in bindings if d.permission is Permission.DENY
                            and (d.pattern is PatternType.PREFIXED and acl.name.startswith(d.name)
                                 or d.name in (WILDCARD, acl.name) and d.pattern is PatternType.LITERAL
                                 and (d.name == WILDCARD or acl.pattern is PatternType.LITERAL))]
                if _decide(covering, principal, host, operation) is not False:
                    return True
        return False
