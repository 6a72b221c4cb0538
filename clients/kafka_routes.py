"""Where a Kafka request goes: the `Call` a client operation yields, its route, and what a client knows of the
cluster (`Routes`).

A gateway with `workers: N > 1` is N brokers (docs/scaling.md): a partition's Produce, Fetch and ListOffsets go to
its leader, group and transaction requests to their coordinator, DeleteTopics to the controller — the others
answer NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR or NOT_CONTROLLER. `Routes` learns the brokers the way every Kafka
client does, on the client's first connection (the bootstrap broker): Metadata for the brokers, the controller and
each topic's leaders, FindCoordinator for a group's or transactional id's coordinator, each asked once and kept.
With one broker (a single-process gateway) every route is the bootstrap connection: one Metadata request per
client, nothing else changes. An answer naming one of those errors means what was learned is stale: the client
forgets it (`forget`) and runs the operation again (`MISROUTED`).

`Routes.address(route)` is an operation like the clients' (a generator yielding `Call`s to the bootstrap broker):
both flavours drive it, the blocking and the trio client.
"""

from __future__ import annotations

from typing import Any, Generator, NamedTuple

from logway.codecs.kafka.api import groups, metadata
from logway.codecs.kafka.error_codes import ErrorCode

__all__ = ["Call", "Operation", "Leader", "Coordinator", "CONTROLLER", "GROUP", "TRANSACTION", "MISROUTED",
           "Routes", "V_METADATA"]

V_METADATA, V_FIND_COORDINATOR = 7, 1
#: FindCoordinator key types.
GROUP, TRANSACTION = 0, 1
#: Answers meaning "another broker serves this": the routes are looked up again and the operation run again.
MISROUTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_CONTROLLER})


class Leader(NamedTuple):
    """Route of a partition's request: its leader."""

    topic: str
    partition: int


class Coordinator(NamedTuple):
    """Route of a group's (key_type GROUP) or a transactional id's (TRANSACTION) request: its coordinator."""

    key: str
    key_type: int = GROUP


#: Route of a request only the controller serves (DeleteTopics).
CONTROLLER = "controller"


class Call(NamedTuple):
    """One request an operation yields; it is sent back the response body (None when `answered` is False)."""

    api_key: int
    version: int
    body: Any
    extra_wait: float = 0.0  # seconds the gateway may hold the answer (a long-polling fetch)
    answered: bool = True  # False for a Produce with acks=0: no answer ever comes
    route: Any = None  # a Leader, a Coordinator, CONTROLLER, or None: any broker (the bootstrap one)


Operation = Generator[Call, Any, Any]


class Routes:
    """What one client learned of the brokers (see the module docstring). Not thread-safe, as the clients."""

    __slots__ = ("brokers", "controller", "leaders", "topics", "coordinators")

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Drop everything learned: the next routed request asks again."""
        self.brokers: dict[int, tuple[str, int]] | None = None  # node id -> advertised (host, port)
        self.controller = -1
        self.leaders: dict[Leader, int] = {}
        self.topics: set[str] = set()  # whose leaders were learned (an unknown topic is asked again each time)
        self.coordinators: dict[Coordinator, int] = {}

    def address(self, route) -> Operation:
        """The (host, port) of the broker `route` goes to, or None for the bootstrap broker: with one broker,
        when the route is None, or when the cluster does not know the partition or coordinator (the bootstrap
        broker then answers the request with the error)."""
        if route is None:
            return None
        if self.brokers is None:
            self._learn((yield self._metadata([])))
        if len(self.brokers) <= 1:
            return None
        if type(route) is Leader:
            if route.topic not in self.topics:
                self._learn((yield self._metadata([route.topic])))
            node = self.leaders.get(route)
        elif type(route) is Coordinator:
            node = self.coordinators.get(route)
            if node is None:
                resp = yield Call(groups.FIND_COORDINATOR_KEY, V_FIND_COORDINATOR,
                                  groups.FindCoordinatorRequest(key=route.key, key_type=route.key_type))
                if resp.error_code != ErrorCode.NONE:
                    return None
                node = self.coordinators[route] = resp.node_id
                self.brokers.setdefault(node, (resp.host, resp.port))
        else:
            node = self.controller
        return self.brokers.get(node)

    @staticmethod
    def _metadata(topics: list[str]) -> Call:
        return Call(metadata.API_KEY, V_METADATA, metadata.MetadataRequest(
            topics=[metadata.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False))

    def _learn(self, resp) -> None:
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        self.controller = resp.controller_id
        for t in resp.topics:
            if t.error_code == ErrorCode.NONE:
                self.topics.add(t.name)
                for p in t.partitions:
                    if p.error_code == ErrorCode.NONE and p.leader_id >= 0:
                        self.leaders[Leader(t.name, p.partition_index)] = p.leader_id
