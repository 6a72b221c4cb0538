"""The KIP-848 consumer group APIs — ConsumerGroupHeartbeat and ConsumerGroupDescribe — as calls on the consumer
group coordinator (`consumer_coordinator.ConsumerCoordinator`); this broker coordinates every group.

A group id belongs to one group type at a time (`group_types`): a heartbeat for a classic group in use is
GROUP_ID_NOT_FOUND ("Group g is not a consumer group.", as Kafka answers when it cannot convert the group); an
empty classic group gives its id over (its committed offsets stay). ConsumerGroupHeartbeat v0 lets the broker make
up the member id of a joining member (v1: the client's own, KIP-1082).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import consumer_groups as CG
from logway.codecs.kafka.error_codes import ErrorCode as E

from .consumer_coordinator import GroupError, Partitions
from .group_types import CONSUMER

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

__all__ = ["consumer_group_heartbeat", "consumer_group_describe", "MEMBER_TYPE_CONSUMER", "heartbeat_assignment",
           "described_assignment"]

#: ConsumerGroupDescribe v1's member type of a member of the consumer protocol (0 would be a classic member).
MEMBER_TYPE_CONSUMER = 1


async def consumer_group_heartbeat(broker: "BrokerState", body, version, conn):
    member_id = body.member_id
    if version == 0 and not member_id and body.member_epoch == 0:
        member_id = str(uuid.uuid4())
    conflict = broker.groups.claim(body.group_id, CONSUMER) if body.group_id else None
    if conflict is not None:
        return CG.ConsumerGroupHeartbeatResponse(error_code=E.GROUP_ID_NOT_FOUND,
                                                 error_message=f"Group {body.group_id} is not a consumer group.")
    owned = None
    if body.topic_partitions is not None:
        owned = {uuid.UUID(bytes=tp.topic_id): set(tp.partitions) for tp in body.topic_partitions}
    try:
        result = broker.consumer_groups.heartbeat(
            body.group_id, member_id, body.member_epoch, instance_id=body.instance_id, rack_id=body.rack_id,
            rebalance_timeout_ms=body.rebalance_timeout_ms, subscribed_names=body.subscribed_topic_names,
            subscribed_regex=body.subscribed_topic_regex if version >= 1 else None,
            server_assignor=body.server_assignor, owned=owned, client_id=conn.client_id or "",
            client_host=conn.peer.rpartition(":")[0])
    except GroupError as exc:
        return CG.ConsumerGroupHeartbeatResponse(error_code=exc.code, error_message=str(exc))
    return CG.ConsumerGroupHeartbeatResponse(
        error_code=E.NONE, member_id=result.member_id, member_epoch=result.epoch,
        heartbeat_interval_ms=broker.consumer_groups.heartbeat_interval_ms,
        assignment=heartbeat_assignment(result.assignment))


async def consumer_group_describe(broker: "BrokerState", body, version, conn):
    coordinator = broker.consumer_groups
    out = []
    for group_id in body.group_ids:
        group = coordinator.groups.get(group_id)
        if group is None:
            other = broker.groups.type_of(group_id)
            message = f"Group {group_id} is not a consumer group." if other is not None \
                else f"Group {group_id} not found."
            out.append(CG.DescribedConsumerGroup(error_code=E.GROUP_ID_NOT_FOUND, error_message=message,
                                                 group_id=group_id))
            continue
        out.append(CG.DescribedConsumerGroup(
            error_code=E.NONE, group_id=group_id, group_state=group.state, group_epoch=group.epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=group.assignor or coordinator.assignors[0],
            members=[CG.DescribedConsumerGroupMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.epoch,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_names),
                subscribed_topic_regex=m.subscribed_regex, assignment=described_assignment(broker, m.assigned),
                target_assignment=described_assignment(broker, group.target.get(m.member_id, {})),
                member_type=MEMBER_TYPE_CONSUMER)
                for m in group.members.values()]))
    return CG.ConsumerGroupDescribeResponse(groups=out)


def heartbeat_assignment(parts: Partitions | None) -> CG.HeartbeatAssignment | None:
    """A heartbeat answer's assignment (ConsumerGroupHeartbeat's, ShareGroupHeartbeat's); None: unchanged."""
    if parts is None:
        return None
    return CG.HeartbeatAssignment(topic_partitions=[
        CG.HeartbeatTopicPartitions(topic_id=topic_id.bytes, partitions=sorted(ps))
        for topic_id, ps in sorted(parts.items(), key=lambda kv: kv[0].bytes)])


def described_assignment(broker: "BrokerState", parts: Partitions) -> CG.DescribedAssignment:
    """An assignment with each topic's name (a topic deleted since has ""): ConsumerGroupDescribe's,
    ShareGroupDescribe's."""
    entries = []
    for topic_id, partitions in sorted(parts.items(), key=lambda kv: kv[0].bytes):
        topic = broker.steps.topics.topic_by_id(topic_id)
        entries.append(CG.DescribedTopicPartitions(topic_id=topic_id.bytes, topic_name=topic.name if topic else "",
                                                   partitions=sorted(partitions)))
    return CG.DescribedAssignment(topic_partitions=entries)
