"""The Kafka group APIs — FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups — as calls on the group coordinator (`coordinator.GroupCoordinator`); this broker is every group's
coordinator (ListGroups also lists the groups that only committed offsets, through any protocol, as Kafka does)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.error_codes import ErrorCode as E

if TYPE_CHECKING:  # pragma: no cover
    from .broker import KafkaBroker

log = logging.getLogger("logway.gateway.kafka")
#: The most bytes of group ids a ListGroups answer holds: below what clients accept in one answer (librdkafka's
#: receive.message.max.bytes is 100 MB) with room to spare; 16 MiB is half a million ids of 32 bytes.
MAX_LIST_GROUPS_BYTES = 16 * 1024 * 1024


async def find_coordinator(broker: "KafkaBroker", body, version, conn):
    host, port = broker.advertised
    return G.FindCoordinatorResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                     node_id=broker.node_id, host=host, port=port)


async def join_group(broker: "KafkaBroker", body, version, conn):
    if not body.group_id:
        return G.JoinGroupResponse(throttle_time_ms=0, error_code=E.INVALID_GROUP_ID, generation_id=-1,
                                   protocol_name="", leader="", member_id=body.member_id, members=[])
    rebalance_timeout = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
    result = await broker.coordinator.join_group(
        body.group_id, body.member_id, body.group_instance_id if version >= 5 else None, body.protocol_type,
        [(p.name, p.metadata) for p in body.protocols], body.session_timeout_ms, rebalance_timeout,
        conn.client_id or "", conn.peer.rpartition(":")[0], version >= 4)
    return G.JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
        protocol_name=result.protocol_name or "", leader=result.leader or "",
        member_id=result.member_id or "",
        members=[G.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members])


async def sync_group(broker: "KafkaBroker", body, version, conn):
    result = await broker.coordinator.sync_group(
        body.group_id, body.generation_id, body.member_id, body.group_instance_id if version >= 3 else None,
        [(a.member_id, a.assignment) for a in body.assignments])
    return G.SyncGroupResponse(throttle_time_ms=0, error_code=result.error_code,
                               assignment=result.assignment or b"")


async def heartbeat(broker: "KafkaBroker", body, version, conn):
    code = broker.coordinator.heartbeat(body.group_id, body.generation_id, body.member_id,
                                        body.group_instance_id if version >= 3 else None)
    return G.HeartbeatResponse(throttle_time_ms=0, error_code=code)


async def leave_group(broker: "KafkaBroker", body, version, conn):
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]
    code, codes = broker.coordinator.leave_group(body.group_id, members)
    return G.LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[
        G.MemberResponse(member_id=m, group_instance_id=i, error_code=c) for (m, i), c in zip(members, codes)])


async def describe_groups(broker: "KafkaBroker", body, version, conn):
    groups = []
    for d in broker.coordinator.describe_groups(body.groups):
        groups.append(G.DescribedGroup(
            error_code=d.error_code, group_id=d.group_id, group_state=d.state, protocol_type=d.protocol_type,
            protocol_data=d.protocol_name, authorized_operations=-2147483648,
            members=[G.DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                            client_id=m.client_id, client_host=m.client_host,
                                            member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in d.members]))
    return G.DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


async def list_groups(broker: "KafkaBroker", body, version, conn):
    """The groups the coordinator holds and those with committed offsets only (through any protocol: listed as
    Kafka lists a group with offsets and no members, protocol type ""), as many as fit `MAX_LIST_GROUPS_BYTES`."""
    listed = dict(broker.coordinator.list_groups())
    offsets = broker.engine.offsets
    for group_id in offsets.groups() if offsets is not None else ():
        listed.setdefault(group_id, "")
    groups, room = [], MAX_LIST_GROUPS_BYTES
    for group_id in sorted(listed):
        room -= len(group_id.encode()) + len(listed[group_id]) + 4
        if room < 0:  # ListGroups has no pages: the first ones, and a warning (`logway groups list` pages)
            log.warning("kafka ListGroups: %d groups do not fit an answer of %d bytes; answering the first %d",
                        len(listed), MAX_LIST_GROUPS_BYTES, len(groups))
            break
        groups.append(G.ListedGroup(group_id=group_id, protocol_type=listed[group_id]))
    return G.ListGroupsResponse(throttle_time_ms=0, error_code=E.NONE, groups=groups)
