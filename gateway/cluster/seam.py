"""`Cluster`: this gateway as one member of several — the one object the protocols, the transaction coordinator and the
server ask about the others. It joins a membership source (`membership.py`) and the ownership it implies
(`ownership.py`) with the ways a request reaches another member (`forwarding.py`: relayed requests; `handover.py`:
connections given over; `txn_peers.py`: the transaction coordinator's requests).

It exists only when the gateway is one member of several (`workers: N` today; a worker started alone by a test is a
cluster of one): with one process `Context.cluster` is None, and no code of this package runs on the request path.
Protocol handlers see routing only through what this object gives them (a forwarder, hand-overs, look-ups of topics
the others changed) and the answers their protocol gives for "not here" (`protocols/kafka/routing.py`: Kafka's
NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, Metadata's brokers and leaders).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .forwarding import NativeForwarder, TankForwarder, tcp_dial, unix_dial
from .handover import HandOvers
from .membership import REFRESH_MIN, Membership
from .ownership import Ownership

__all__ = ["Cluster"]


class Cluster:
    """Member `membership.me` of `membership.count`, over `engine`, configured by `config`."""

    def __init__(self, membership: Membership, engine, config) -> None:
        self.membership = membership
        self.engine = engine
        self.config = config
        self.me = membership.me

    @property
    def ownership(self) -> Ownership:
        """Who owns what now (a source whose members come and go gives a new one when they do)."""
        return self.membership.ownership

    @property
    def several(self) -> bool:
        """More than one member: requests may have to go elsewhere (a cluster of one only catches up with topics)."""
        return self.membership.count > 1

    # -- ownership -------------------------------------------------------------------------------------------
    def leader(self, topic: str, partition: int) -> int:
        return self.ownership.leader(topic, partition)

    def coordinator(self, key: str | None = None) -> int:
        return self.ownership.coordinator(key)

    @property
    def controller(self) -> int:
        return self.ownership.controller

    @property
    def is_coordinator(self) -> bool:
        return self.ownership.is_coordinator

    # -- membership ------------------------------------------------------------------------------------------
    def brokers(self, advertised: tuple[str, int]) -> list[tuple[int, str, int]]:
        """(member id, host, port) of every member's Kafka listener — only this one (at `advertised`) until the
        others are known."""
        members = [m for m in self.membership.members() if m.kafka is not None]
        if not members:
            return [(self.me, *advertised)]
        return [(m.id, *m.kafka) for m in members]

    @property
    def on_topic_gone(self) -> list[Callable[[str], None]]:
        return self.membership.on_topic_gone

    async def look_up(self, names: Iterable[str]) -> None:
        await self.membership.look_up(self.engine, names)

    async def look_up_unknown(self, names) -> None:
        """Catch up with the topics (and partitions) a request names that this member does not know yet:
        `names` holds (topic, partition) pairs, partition None for a topic alone."""
        await self.membership.look_up_unknown(self.engine, names)

    async def refresh(self, max_age: float = REFRESH_MIN) -> None:
        await self.membership.refresh(self.engine, max_age)

    # -- the ways to the others ------------------------------------------------------------------------------
    def native_forwarder(self) -> NativeForwarder | None:
        """Relays of native requests to the member owning their partitions (None: there is no other)."""
        if not self._relaying:
            return None
        limits, auth = self.config.limits, self.config.auth
        return NativeForwarder(lambda: self.membership.addresses("native_relay"), limits.max_frame_bytes,
                               auth.native_token, self._dial("native"))

    def tank_forwarder(self) -> TankForwarder | None:
        if not self._relaying:
            return None
        return TankForwarder(lambda: self.membership.addresses("tank_relay"), self._dial("tank"))

    @property
    def _relaying(self) -> bool:
        """Whether requests may have to be relayed to another member (now, or once others join)."""
        return self.several or self.membership.dynamic

    def _dial(self, protocol: str):
        secret = self.membership.relay_secret
        return unix_dial if secret is None else tcp_dial(protocol, secret)

    def hand_overs(self, protocol: str, encode: Callable[[Any], bytes], max_request: int) -> HandOvers | None:
        """Hand-overs of `protocol`'s connections whose requests are wholly another member's (None: not enabled)."""
        if not (self.several and self.membership.hands_over and self.config.worker_handover):
            return None
        return HandOvers(protocol, lambda: self.membership.addresses("handover"), encode, max_request)
