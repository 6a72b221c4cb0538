"""`BrokerState`: what a Kafka broker holds — its steps, configuration, the group coordinators (classic,
KIP-848, KIP-932), the idempotent producers' state, the transaction coordinator, security and authorization, and
its place in a cluster — which the API modules (`records`, `offsets`, `groups`, `admin`, …) are given to serve a
request. `broker.KafkaBroker` is this state plus the dispatch to those modules, so that they never import it back.
"""

from __future__ import annotations

from ...security import Security
from ...steps import Steps
from ...transactions import TransactionCoordinator
from .authz import KafkaAuthz
from .consumer_coordinator import ConsumerCoordinator
from .coordinator import GroupCoordinator
from .group_types import CLASSIC, CONSUMER, SHARE, GroupDirectory
from .producers import ProducerStates
from .share_coordinator import ShareCoordinator

__all__ = ["BrokerState"]


class BrokerState:
    #: This broker's node id: the controller, every partition's leader, every group's coordinator (one worker).
    node_id = 0
    #: One member of several: this broker's routing as node `cluster.node_id` (set by the Kafka protocol).
    cluster = None

    def __init__(self, steps: Steps, config, coordinator: GroupCoordinator, advertised: tuple[str, int],
                 transactions: TransactionCoordinator, security: Security) -> None:
        self.steps = steps
        self.config = config
        self.coordinator = coordinator
        self.advertised = advertised
        self.producers = ProducerStates(config.kafka.producer_id_expiration_ms)
        self.transactions = transactions
        kc = config.kafka
        #: KIP-848 consumer groups (the classic ones are `coordinator`'s).
        self.consumer_groups = ConsumerCoordinator(
            self._topic_ids, session_timeout_ms=kc.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=kc.group_consumer_heartbeat_interval_ms,
            assignors=tuple(a.strip() for a in kc.group_consumer_assignors.split(",")))
        #: KIP-932 share groups, their state in the engine's share-state store.
        self.share_groups = ShareCoordinator(
            self._topic_ids, steps.engine.share_state, steps.in_thread,
            session_timeout_ms=kc.group_share_session_timeout_ms,
            heartbeat_interval_ms=kc.group_share_heartbeat_interval_ms,
            lock_duration_ms=kc.group_share_record_lock_duration_ms,
            delivery_count_limit=kc.group_share_delivery_count_limit,
            max_record_locks=kc.group_share_partition_max_record_locks, auto_offset_reset=kc.share_auto_offset_reset)
        self.security = security
        self.authz = KafkaAuthz(security.authorizer, steps.topics)
        #: Every group of every type (one namespace of group ids).
        self.groups = GroupDirectory(**{CLASSIC: coordinator, CONSUMER: self.consumer_groups,
                                        SHARE: self.share_groups})

    def _topic_ids(self) -> dict:
        """Every topic now: name -> (topic id, partition count) (what consumer group assignments are made of)."""
        return {t.name: (t.topic_id, len(t.partitions)) for t in self.steps.topics.names.values()}

