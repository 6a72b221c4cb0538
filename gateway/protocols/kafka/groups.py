"""The Kafka group APIs — FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups — as calls on the group coordinator (`coordinator.GroupCoordinator`); this broker is every group's
coordinator.

Group types (KIP-848): groups of the classic protocol (JoinGroup/SyncGroup) are "classic"; ListGroups v5 lists
them with their type and v4 with their state, and filters by both (case-insensitively, as Kafka). DescribeGroups
describes classic groups only: from v6 an unknown group, or a group of another type, is GROUP_ID_NOT_FOUND with
a message saying so (before v6: state "Dead", no error), as Kafka 4 answers. ListGroups also lists the groups that
only committed offsets, through any protocol, as Kafka does: "classic", state "Empty", protocol type "".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.error_codes import ErrorCode as E

from .group_types import CLASSIC, GroupSummary

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

log = logging.getLogger("logway.gateway.kafka")
#: The most bytes of group ids a ListGroups answer holds: below what clients accept in one answer (librdkafka's
#: receive.message.max.bytes is 100 MB) with room to spare; 16 MiB is half a million ids of 32 bytes.
MAX_LIST_GROUPS_BYTES = 16 * 1024 * 1024


def coordinator_answer(version: int, key_type: int, keys: list[str], node: tuple[int, str, int]):
    """The FindCoordinator answer naming `node` (id, host, port) the coordinator of every key: one key in
    v0-v3, each key of the request from v4 (KIP-699)."""
    node_id, host, port = node
    if version < 4:
        return G.FindCoordinatorResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                         node_id=node_id, host=host, port=port)
    code = E.NONE if key_type in (G.COORDINATOR_GROUP, G.COORDINATOR_TRANSACTION, G.COORDINATOR_SHARE) \
        else E.INVALID_REQUEST
    return G.FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
        G.Coordinator(key=key, node_id=node_id if code == E.NONE else -1, host=host if code == E.NONE else "",
                      port=port if code == E.NONE else -1, error_code=code,
                      error_message=None if code == E.NONE else f"unknown coordinator key type {key_type}")
        for key in keys])


async def find_coordinator(broker: "BrokerState", body, version, conn):
    keys = body.coordinator_keys if version >= 4 else [body.key]
    return coordinator_answer(version, body.key_type, keys, (broker.node_id, *broker.advertised))


async def join_group(broker: "BrokerState", body, version, conn):
    if not body.group_id:
        return _join_error(E.INVALID_GROUP_ID, body.member_id, version)
    conflict = broker.groups.conflict(body.group_id, CLASSIC)
    if conflict is not None:  # a live group of another type: no online migration (see docs/kafka.md)
        return _join_error(E.INCONSISTENT_GROUP_PROTOCOL, body.member_id, version)
    rebalance_timeout = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
    result = await broker.coordinator.join_group(
        body.group_id, body.member_id, body.group_instance_id if version >= 5 else None, body.protocol_type,
        [(p.name, p.metadata) for p in body.protocols], body.session_timeout_ms, rebalance_timeout,
        conn.client_id or "", conn.peer.rpartition(":")[0], version >= 4)
    if result.error_code != E.NONE:
        return _join_error(result.error_code, result.member_id, version)
    return G.JoinGroupResponse(
        throttle_time_ms=0, error_code=E.NONE, generation_id=result.generation_id,
        protocol_type=result.protocol_type or None, protocol_name=result.protocol_name or "",
        leader=result.leader or "", skip_assignment=False, member_id=result.member_id or "",
        members=[G.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members])


def _join_error(code: int, member_id: str, version: int):
    # (v7+: no protocol chosen is null, as Kafka writes it)
    return G.JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1,
                               protocol_name=None if version >= 7 else "", leader="", member_id=member_id or "",
                               members=[])


async def sync_group(broker: "BrokerState", body, version, conn):
    checked = version >= 5  # v5 names the protocol type and name, which must be the group's
    result = await broker.coordinator.sync_group(
        body.group_id, body.generation_id, body.member_id, body.group_instance_id if version >= 3 else None,
        [(a.member_id, a.assignment) for a in body.assignments],
        body.protocol_type if checked else None, body.protocol_name if checked else None)
    return G.SyncGroupResponse(throttle_time_ms=0, error_code=result.error_code,
                               protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                               assignment=result.assignment or b"")


async def heartbeat(broker: "BrokerState", body, version, conn):
    code = broker.coordinator.heartbeat(body.group_id, body.generation_id, body.member_id,
                                        body.group_instance_id if version >= 3 else None)
    return G.HeartbeatResponse(throttle_time_ms=0, error_code=code)


async def leave_group(broker: "BrokerState", body, version, conn):
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]
    code, codes = broker.coordinator.leave_group(body.group_id, members)
    return G.LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[
        G.MemberResponse(member_id=m, group_instance_id=i, error_code=c) for (m, i), c in zip(members, codes)])


async def describe_groups(broker: "BrokerState", body, version, conn):
    groups = []
    for d in broker.coordinator.describe_groups(body.groups):
        if d.error_code == E.NONE and d.state == "Dead":  # unknown here: another type's, or none at all
            other = broker.groups.type_of(d.group_id)
            if version >= 6:
                message = (f"Group {d.group_id} is not a classic group." if other is not None
                           else f"Group {d.group_id} not found.")
                groups.append(G.DescribedGroup(error_code=E.GROUP_ID_NOT_FOUND, error_message=message,
                                               group_id=d.group_id))
                continue
        groups.append(G.DescribedGroup(
            error_code=d.error_code, group_id=d.group_id, group_state=d.state, protocol_type=d.protocol_type,
            protocol_data=d.protocol_name, authorized_operations=G.AUTHORIZED_OPERATIONS_OMITTED,
            members=[G.DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                            client_id=m.client_id, client_host=m.client_host,
                                            member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in d.members]))
    return G.DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


async def list_groups(broker: "BrokerState", body, version, conn):
    """Every group held now, of every type, and those with committed offsets only (through any protocol: as Kafka
    lists a group with offsets and no members — classic, Empty, protocol type ""), filtered by state (v4+) and
    type (v5+), as many as fit `MAX_LIST_GROUPS_BYTES`."""
    states = {s.lower() for s in body.states_filter} if version >= 4 else set()
    types = {t.lower() for t in body.types_filter} if version >= 5 else set()
    listed = {g.group_id: g for g in broker.groups.summaries()}
    for group_id in broker.steps.offset_groups():
        if group_id not in listed:
            listed[group_id] = GroupSummary(group_id, "", "Empty", CLASSIC)
    groups, room = [], MAX_LIST_GROUPS_BYTES
    for group_id in sorted(listed):
        g = listed[group_id]
        if (states and g.state.lower() not in states) or (types and g.type.lower() not in types):
            continue
        room -= len(group_id.encode()) + len(g.protocol_type) + len(g.state) + len(g.type) + 8
        if room < 0:  # ListGroups has no pages: the first ones, and a warning (`logway groups list` pages)
            log.warning("kafka ListGroups: %d groups do not fit an answer of %d bytes; answering the first %d",
                        len(listed), MAX_LIST_GROUPS_BYTES, len(groups))
            break
        groups.append(G.ListedGroup(group_id=group_id, protocol_type=g.protocol_type, group_state=g.state,
                                    group_type=g.type))
    return G.ListGroupsResponse(throttle_time_ms=0, error_code=E.NONE, groups=groups)
