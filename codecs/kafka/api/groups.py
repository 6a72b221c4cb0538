"""Classic group APIs: FindCoordinator (10, v0-6, flexible from 3), JoinGroup (11, v0-9, from 6), Heartbeat
(12, v0-4, from 4), LeaveGroup (13, v0-5, from 4), SyncGroup (14, v0-5, from 4), DescribeGroups (15, v0-6, from
5), ListGroups (16, v0-5, from 3), DeleteGroups (42, v0-2, from 2).

The member metadata (JoinGroup) and assignments (SyncGroup) are opaque bytes to the broker: the client-side
assignor (range, roundrobin, sticky, cooperative) encodes them. Layout notes per API sit beside the declarations;
most APIs add throttle_time_ms as their *first* response field in the version after v0 (JoinGroup in v2).
FindCoordinator v4+ asks for several keys at once (KIP-699); v6 adds the share-group coordinator key type.
ListGroups v4 filters by state (KIP-518) and v5 by group type (KIP-848: "classic", "consumer", "share"). The
KIP-848 and KIP-932 group APIs are in `consumer_groups` and `share_groups`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, only, since, struct, switch, until
from ..primitives import Array, Boolean, Bytes, Int8, Int16, Int32, NullableString, String

__all__ = [
    "FIND_COORDINATOR_KEY",
    "JOIN_GROUP_KEY",
    "HEARTBEAT_KEY",
    "LEAVE_GROUP_KEY",
    "SYNC_GROUP_KEY",
    "DESCRIBE_GROUPS_KEY",
    "LIST_GROUPS_KEY",
    "DELETE_GROUPS_KEY",
    "COORDINATOR_GROUP",
    "COORDINATOR_TRANSACTION",
    "COORDINATOR_SHARE",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "Coordinator",
    "JoinGroupRequest",
    "JoinGroupRequestProtocol",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "LeaveGroupRequest",
    "MemberIdentity",
    "LeaveGroupResponse",
    "MemberResponse",
    "SyncGroupRequest",
    "SyncGroupRequestAssignment",
    "SyncGroupResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DeletableGroupResult",
    "SCHEMAS",
]

FIND_COORDINATOR_KEY = 10
JOIN_GROUP_KEY = 11
HEARTBEAT_KEY = 12
LEAVE_GROUP_KEY = 13
SYNC_GROUP_KEY = 14
DESCRIBE_GROUPS_KEY = 15
LIST_GROUPS_KEY = 16
DELETE_GROUPS_KEY = 42

#: Kafka's "no authorized operations were requested" marker (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
#: FindCoordinator key types: a group, a transactional id, a share-group partition ("group:topic-id:partition").
COORDINATOR_GROUP, COORDINATOR_TRANSACTION, COORDINATOR_SHARE = 0, 1, 2


# ========================================================================================== FindCoordinator

@dataclass(slots=True)
class FindCoordinatorRequest:
    key: str = ""  # v0-v3: the group id (key_type 0) or transactional id (key_type 1)
    key_type: int = COORDINATOR_GROUP  # v1+
    coordinator_keys: list[str] = field(default_factory=list)  # v4+: several keys of that type


@dataclass(slots=True)
class Coordinator:
    """One key's coordinator in FindCoordinator v4+."""

    key: str = ""
    node_id: int = 0
    host: str = ""
    port: int = 0
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class FindCoordinatorResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0  # v0-v3
    error_message: str | None = None  # v1-v3
    node_id: int = 0  # v0-v3
    host: str = ""  # v0-v3
    port: int = 0  # v0-v3
    coordinators: list[Coordinator] = field(default_factory=list)  # v4+


FIND_COORDINATOR_REQUEST_SCHEMAS = message(
    FindCoordinatorRequest, 6, flexible_since=3,
    key=until(3, String), key_type=since(1, Int8), coordinator_keys=since(4, Array(String)))
# v1 adds throttle_time_ms (first) and error_message (after error_code); v4 answers per key.
FIND_COORDINATOR_RESPONSE_SCHEMAS = message(
    FindCoordinatorResponse, 6, flexible_since=3,
    throttle_time_ms=since(1, Int32), error_code=until(3, Int16), error_message=only(1, 3, NullableString),
    node_id=until(3, Int32), host=until(3, String), port=until(3, Int32),
    coordinators=since(4, Array(struct(Coordinator, key=String, node_id=Int32, host=String, port=Int32,
                                       error_code=Int16, error_message=NullableString))))


# ================================================================================================ JoinGroup

@dataclass(slots=True)
class JoinGroupRequestProtocol:
    name: str = ""
    metadata: bytes = b""


@dataclass(slots=True)
class JoinGroupRequest:
    group_id: str = ""
    session_timeout_ms: int = 0
    rebalance_timeout_ms: int = -1  # v1+; absent (v0) = use session_timeout_ms
    member_id: str = ""  # "" on the first join
    group_instance_id: str | None = None  # v5+ (static membership)
    protocol_type: str = ""
    protocols: list[JoinGroupRequestProtocol] = field(default_factory=list)
    reason: str | None = None  # v8+


@dataclass(slots=True)
class JoinGroupResponseMember:
    member_id: str = ""
    group_instance_id: str | None = None  # v5+
    metadata: bytes = b""


@dataclass(slots=True)
class JoinGroupResponse:
    throttle_time_ms: int = 0  # v2+
    error_code: int = 0
    generation_id: int = -1
    protocol_name: str | None = ""  # nullable from v7
    leader: str = ""
    member_id: str = ""
    members: list[JoinGroupResponseMember] = field(default_factory=list)  # filled for the leader only
    protocol_type: str | None = None  # v7+ (on the wire before protocol_name)
    skip_assignment: bool = False  # v9+ (on the wire after the leader)


JOIN_GROUP_REQUEST_SCHEMAS = message(
    JoinGroupRequest, 9, flexible_since=6,
    group_id=String, session_timeout_ms=Int32,
    rebalance_timeout_ms=since(1, Int32),  # v2, v3 = v1; v4: the MEMBER_ID_REQUIRED two-step join
    member_id=String, group_instance_id=since(5, NullableString), protocol_type=String,
    protocols=Array(struct(JoinGroupRequestProtocol, name=String, metadata=Bytes)),
    reason=since(8, NullableString))  # KIP-800
JOIN_GROUP_RESPONSE_SCHEMAS = message(
    JoinGroupResponse, 9, flexible_since=6,
    throttle_time_ms=since(2, Int32), error_code=Int16, generation_id=Int32,
    protocol_type=since(7, NullableString),
    protocol_name=switch({0: String, 7: NullableString}),  # null (v7+) while no protocol was chosen
    leader=String,
    skip_assignment=since(9, Boolean),  # KIP-814: the leader need not compute an assignment (never set here)
    member_id=String,
    members=Array(struct(JoinGroupResponseMember, member_id=String, group_instance_id=since(5, NullableString),
                         metadata=Bytes)))


# ================================================================================================ Heartbeat

@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str = ""
    generation_id: int = 0
    member_id: str = ""
    group_instance_id: str | None = None  # v3+


@dataclass(slots=True)
class HeartbeatResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0


HEARTBEAT_REQUEST_SCHEMAS = message(
    HeartbeatRequest, 4, flexible_since=4,
    group_id=String, generation_id=Int32, member_id=String, group_instance_id=since(3, NullableString))
HEARTBEAT_RESPONSE_SCHEMAS = message(
    HeartbeatResponse, 4, flexible_since=4, throttle_time_ms=since(1, Int32), error_code=Int16)


# =============================================================================================== LeaveGroup

@dataclass(slots=True)
class MemberIdentity:
    member_id: str = ""
    group_instance_id: str | None = None
    reason: str | None = None  # v5+


@dataclass(slots=True)
class LeaveGroupRequest:
    group_id: str = ""
    member_id: str = ""  # v0-v2 only
    members: list[MemberIdentity] = field(default_factory=list)  # v3+ (batch leave)


@dataclass(slots=True)
class MemberResponse:
    member_id: str = ""
    group_instance_id: str | None = None
    error_code: int = 0


@dataclass(slots=True)
class LeaveGroupResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0
    members: list[MemberResponse] = field(default_factory=list)  # v3+


LEAVE_GROUP_REQUEST_SCHEMAS = message(
    LeaveGroupRequest, 5, flexible_since=4,
    group_id=String,
    member_id=until(2, String),  # v3 replaces it with a members array (KIP-345)
    members=since(3, Array(struct(MemberIdentity, member_id=String, group_instance_id=NullableString,
                                  reason=since(5, NullableString)))))
LEAVE_GROUP_RESPONSE_SCHEMAS = message(
    LeaveGroupResponse, 5, flexible_since=4,
    throttle_time_ms=since(1, Int32), error_code=Int16,
    members=since(3, Array(struct(MemberResponse, member_id=String, group_instance_id=NullableString,
                                  error_code=Int16))))


# ================================================================================================ SyncGroup

@dataclass(slots=True)
class SyncGroupRequestAssignment:
    member_id: str = ""
    assignment: bytes = b""


@dataclass(slots=True)
class SyncGroupRequest:
    group_id: str = ""
    generation_id: int = 0
    member_id: str = ""
    group_instance_id: str | None = None  # v3+
    assignments: list[SyncGroupRequestAssignment] = field(default_factory=list)  # from the leader only
    protocol_type: str | None = None  # v5+ (checked against the group's when given; before the assignments)
    protocol_name: str | None = None  # v5+


@dataclass(slots=True)
class SyncGroupResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0
    assignment: bytes = b""
    protocol_type: str | None = None  # v5+ (before the assignment)
    protocol_name: str | None = None  # v5+


SYNC_GROUP_REQUEST_SCHEMAS = message(
    SyncGroupRequest, 5, flexible_since=4,
    group_id=String, generation_id=Int32, member_id=String, group_instance_id=since(3, NullableString),
    protocol_type=since(5, NullableString), protocol_name=since(5, NullableString),
    assignments=Array(struct(SyncGroupRequestAssignment, member_id=String, assignment=Bytes)))
SYNC_GROUP_RESPONSE_SCHEMAS = message(
    SyncGroupResponse, 5, flexible_since=4,
    throttle_time_ms=since(1, Int32), error_code=Int16, protocol_type=since(5, NullableString),
    protocol_name=since(5, NullableString), assignment=Bytes)


# =========================================================================================== DescribeGroups

@dataclass(slots=True)
class DescribeGroupsRequest:
    groups: list[str] = field(default_factory=list)
    include_authorized_operations: bool = False  # v3+


@dataclass(slots=True)
class DescribedGroupMember:
    member_id: str = ""
    group_instance_id: str | None = None  # v4+
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""  # only in the Stable state
    member_assignment: bytes = b""  # only in the Stable state


@dataclass(slots=True)
class DescribedGroup:
    error_code: int = 0
    group_id: str = ""
    group_state: str = ""  # "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
    protocol_type: str = ""
    protocol_data: str = ""  # the chosen assignor, in the Stable state
    members: list[DescribedGroupMember] = field(default_factory=list)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED  # v3+
    error_message: str | None = None  # v6+ (after the error code)


@dataclass(slots=True)
class DescribeGroupsResponse:
    throttle_time_ms: int = 0  # v1+
    groups: list[DescribedGroup] = field(default_factory=list)


DESCRIBE_GROUPS_REQUEST_SCHEMAS = message(
    DescribeGroupsRequest, 6, flexible_since=5,
    groups=Array(String), include_authorized_operations=since(3, Boolean))
DESCRIBE_GROUPS_RESPONSE_SCHEMAS = message(
    DescribeGroupsResponse, 6, flexible_since=5,
    throttle_time_ms=since(1, Int32),
    groups=Array(struct(
        DescribedGroup, error_code=Int16,
        error_message=since(6, NullableString),  # KIP-1043: e.g. why a group of another type is not described
        group_id=String, group_state=String, protocol_type=String, protocol_data=String,
        members=Array(struct(DescribedGroupMember, member_id=String, group_instance_id=since(4, NullableString),
                             client_id=String, client_host=String, member_metadata=Bytes,
                             member_assignment=Bytes)),
        authorized_operations=since(3, Int32))))


# =============================================================================================== ListGroups

@dataclass(slots=True)
class ListGroupsRequest:
    """No fields in v0-v3; empty filters list every group."""

    states_filter: list[str] = field(default_factory=list)  # v4+: e.g. ["Stable", "Empty"]
    types_filter: list[str] = field(default_factory=list)  # v5+: "classic", "consumer", "share"


@dataclass(slots=True)
class ListedGroup:
    group_id: str = ""
    protocol_type: str = ""
    group_state: str = ""  # v4+
    group_type: str = ""  # v5+


@dataclass(slots=True)
class ListGroupsResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0
    groups: list[ListedGroup] = field(default_factory=list)


LIST_GROUPS_REQUEST_SCHEMAS = message(
    ListGroupsRequest, 5, flexible_since=3, states_filter=since(4, Array(String)), types_filter=since(5, Array(String)))
LIST_GROUPS_RESPONSE_SCHEMAS = message(
    ListGroupsResponse, 5, flexible_since=3,
    throttle_time_ms=since(1, Int32), error_code=Int16,
    groups=Array(struct(ListedGroup, group_id=String, protocol_type=String, group_state=since(4, String),
                        group_type=since(5, String))))


# ============================================================================================= DeleteGroups

@dataclass(slots=True)
class DeleteGroupsRequest:
    groups_names: list[str] = field(default_factory=list)


@dataclass(slots=True)
class DeletableGroupResult:
    group_id: str = ""
    error_code: int = 0


@dataclass(slots=True)
class DeleteGroupsResponse:
    throttle_time_ms: int = 0
    results: list[DeletableGroupResult] = field(default_factory=list)


DELETE_GROUPS_REQUEST_SCHEMAS = message(DeleteGroupsRequest, 2, flexible_since=2, groups_names=Array(String))
DELETE_GROUPS_RESPONSE_SCHEMAS = message(  # v1 = v0 (throttling behaviour only)
    DeleteGroupsResponse, 2, flexible_since=2,
    throttle_time_ms=Int32, results=Array(struct(DeletableGroupResult, group_id=String, error_code=Int16)))


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    FIND_COORDINATOR_KEY: (FIND_COORDINATOR_REQUEST_SCHEMAS, FIND_COORDINATOR_RESPONSE_SCHEMAS),
    JOIN_GROUP_KEY: (JOIN_GROUP_REQUEST_SCHEMAS, JOIN_GROUP_RESPONSE_SCHEMAS),
    HEARTBEAT_KEY: (HEARTBEAT_REQUEST_SCHEMAS, HEARTBEAT_RESPONSE_SCHEMAS),
    LEAVE_GROUP_KEY: (LEAVE_GROUP_REQUEST_SCHEMAS, LEAVE_GROUP_RESPONSE_SCHEMAS),
    SYNC_GROUP_KEY: (SYNC_GROUP_REQUEST_SCHEMAS, SYNC_GROUP_RESPONSE_SCHEMAS),
    DESCRIBE_GROUPS_KEY: (DESCRIBE_GROUPS_REQUEST_SCHEMAS, DESCRIBE_GROUPS_RESPONSE_SCHEMAS),
    LIST_GROUPS_KEY: (LIST_GROUPS_REQUEST_SCHEMAS, LIST_GROUPS_RESPONSE_SCHEMAS),
    DELETE_GROUPS_KEY: (DELETE_GROUPS_REQUEST_SCHEMAS, DELETE_GROUPS_RESPONSE_SCHEMAS),
}
