"""Consumer-group APIs: FindCoordinator (10, v0-2), JoinGroup (11, v0-5), Heartbeat (12, v0-3),
LeaveGroup (13, v0-3), SyncGroup (14, v0-3), DescribeGroups (15, v0-4), ListGroups (16, v0-2),
DeleteGroups (42, v0-1).

The member metadata (JoinGroup) and assignments (SyncGroup) are opaque bytes to the broker: the client-side
assignor (range, roundrobin, sticky, cooperative) encodes them. Layout notes per API sit beside the schemas;
most APIs add throttle_time_ms as their *first* response field in the version after v0 (JoinGroup in v2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import (Array, Boolean, Bytes, Int8, Int16, Int32, NullableString, String, schema,
                          versioned)

__all__ = [
    "FIND_COORDINATOR_KEY",
    "JOIN_GROUP_KEY",
    "HEARTBEAT_KEY",
    "LEAVE_GROUP_KEY",
    "SYNC_GROUP_KEY",
    "DESCRIBE_GROUPS_KEY",
    "LIST_GROUPS_KEY",
    "DELETE_GROUPS_KEY",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
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


# ========================================================================================== FindCoordinator

@dataclass(slots=True)
class FindCoordinatorRequest:
    key: str = ""  # the group id (key_type 0) or transactional id (key_type 1)
    key_type: int = 0  # v1+; 0 = group, 1 = transaction


@dataclass(slots=True)
class FindCoordinatorResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0
    error_message: str | None = None  # v1+
    node_id: int = 0
    host: str = ""
    port: int = 0


FIND_COORDINATOR_REQUEST_V0 = schema(FindCoordinatorRequest, key=String)
FIND_COORDINATOR_REQUEST_V1 = schema(FindCoordinatorRequest, key=String, key_type=Int8)  # v2 = v1
FIND_COORDINATOR_RESPONSE_V0 = schema(FindCoordinatorResponse, error_code=Int16, node_id=Int32, host=String,
                                      port=Int32)
# v1 adds throttle_time_ms (first) and error_message (after error_code); v2 = v1.
FIND_COORDINATOR_RESPONSE_V1 = schema(FindCoordinatorResponse, throttle_time_ms=Int32, error_code=Int16,
                                      error_message=NullableString, node_id=Int32, host=String, port=Int32)


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
    protocol_name: str = ""
    leader: str = ""
    member_id: str = ""
    members: list[JoinGroupResponseMember] = field(default_factory=list)  # filled for the leader only


_PROTOCOL_V0 = schema(JoinGroupRequestProtocol, name=String, metadata=Bytes)
JOIN_GROUP_REQUEST_V0 = schema(JoinGroupRequest, group_id=String, session_timeout_ms=Int32, member_id=String,
                               protocol_type=String, protocols=Array(_PROTOCOL_V0))
# v1 adds rebalance_timeout_ms after the session timeout (v2, v3 = v1; v4: the MEMBER_ID_REQUIRED two-step join).
JOIN_GROUP_REQUEST_V1 = schema(JoinGroupRequest, group_id=String, session_timeout_ms=Int32,
                               rebalance_timeout_ms=Int32, member_id=String, protocol_type=String,
                               protocols=Array(_PROTOCOL_V0))
JOIN_GROUP_REQUEST_V5 = schema(JoinGroupRequest, group_id=String, session_timeout_ms=Int32,
                               rebalance_timeout_ms=Int32, member_id=String, group_instance_id=NullableString,
                               protocol_type=String, protocols=Array(_PROTOCOL_V0))

_MEMBER_V0 = schema(JoinGroupResponseMember, member_id=String, metadata=Bytes)
_MEMBER_V5 = schema(JoinGroupResponseMember, member_id=String, group_instance_id=NullableString, metadata=Bytes)
JOIN_GROUP_RESPONSE_V0 = schema(JoinGroupResponse, error_code=Int16, generation_id=Int32, protocol_name=String,
                                leader=String, member_id=String, members=Array(_MEMBER_V0))  # v1 = v0
# v2 adds throttle_time_ms (first); v3, v4 = v2. protocol_name only becomes nullable in v7 (flexible).
JOIN_GROUP_RESPONSE_V2 = schema(JoinGroupResponse, throttle_time_ms=Int32, error_code=Int16, generation_id=Int32,
                                protocol_name=String, leader=String, member_id=String, members=Array(_MEMBER_V0))
JOIN_GROUP_RESPONSE_V5 = schema(JoinGroupResponse, throttle_time_ms=Int32, error_code=Int16, generation_id=Int32,
                                protocol_name=String, leader=String, member_id=String, members=Array(_MEMBER_V5))


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


HEARTBEAT_REQUEST_V0 = schema(HeartbeatRequest, group_id=String, generation_id=Int32, member_id=String)  # v1, v2
HEARTBEAT_REQUEST_V3 = schema(HeartbeatRequest, group_id=String, generation_id=Int32, member_id=String,
                              group_instance_id=NullableString)
HEARTBEAT_RESPONSE_V0 = schema(HeartbeatResponse, error_code=Int16)
HEARTBEAT_RESPONSE_V1 = schema(HeartbeatResponse, throttle_time_ms=Int32, error_code=Int16)  # v2, v3 = v1


# =============================================================================================== LeaveGroup

@dataclass(slots=True)
class MemberIdentity:
    member_id: str = ""
    group_instance_id: str | None = None


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


LEAVE_GROUP_REQUEST_V0 = schema(LeaveGroupRequest, group_id=String, member_id=String)  # v1, v2 = v0
# v3 replaces member_id with a members array (KIP-345).
LEAVE_GROUP_REQUEST_V3 = schema(LeaveGroupRequest, group_id=String, members=Array(
    schema(MemberIdentity, member_id=String, group_instance_id=NullableString)))
LEAVE_GROUP_RESPONSE_V0 = schema(LeaveGroupResponse, error_code=Int16)
LEAVE_GROUP_RESPONSE_V1 = schema(LeaveGroupResponse, throttle_time_ms=Int32, error_code=Int16)  # v2 = v1
LEAVE_GROUP_RESPONSE_V3 = schema(LeaveGroupResponse, throttle_time_ms=Int32, error_code=Int16, members=Array(
    schema(MemberResponse, member_id=String, group_instance_id=NullableString, error_code=Int16)))


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


@dataclass(slots=True)
class SyncGroupResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0
    assignment: bytes = b""


_ASSIGNMENT_V0 = schema(SyncGroupRequestAssignment, member_id=String, assignment=Bytes)
SYNC_GROUP_REQUEST_V0 = schema(SyncGroupRequest, group_id=String, generation_id=Int32, member_id=String,
                               assignments=Array(_ASSIGNMENT_V0))  # v1, v2 = v0
SYNC_GROUP_REQUEST_V3 = schema(SyncGroupRequest, group_id=String, generation_id=Int32, member_id=String,
                               group_instance_id=NullableString, assignments=Array(_ASSIGNMENT_V0))
SYNC_GROUP_RESPONSE_V0 = schema(SyncGroupResponse, error_code=Int16, assignment=Bytes)
SYNC_GROUP_RESPONSE_V1 = schema(SyncGroupResponse, throttle_time_ms=Int32, error_code=Int16,
                                assignment=Bytes)  # v2, v3 = v1


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


@dataclass(slots=True)
class DescribeGroupsResponse:
    throttle_time_ms: int = 0  # v1+
    groups: list[DescribedGroup] = field(default_factory=list)


DESCRIBE_GROUPS_REQUEST_V0 = schema(DescribeGroupsRequest, groups=Array(String))  # v1, v2 = v0
DESCRIBE_GROUPS_REQUEST_V3 = schema(DescribeGroupsRequest, groups=Array(String),
                                    include_authorized_operations=Boolean)  # v4 = v3

_DG_MEMBER_V0 = schema(DescribedGroupMember, member_id=String, client_id=String, client_host=String,
                       member_metadata=Bytes, member_assignment=Bytes)
_DG_MEMBER_V4 = schema(DescribedGroupMember, member_id=String, group_instance_id=NullableString,
                       client_id=String, client_host=String, member_metadata=Bytes, member_assignment=Bytes)
_DG_V0 = schema(DescribedGroup, error_code=Int16, group_id=String, group_state=String, protocol_type=String,
                protocol_data=String, members=Array(_DG_MEMBER_V0))
_DG_V3 = schema(DescribedGroup, error_code=Int16, group_id=String, group_state=String, protocol_type=String,
                protocol_data=String, members=Array(_DG_MEMBER_V0), authorized_operations=Int32)
_DG_V4 = schema(DescribedGroup, error_code=Int16, group_id=String, group_state=String, protocol_type=String,
                protocol_data=String, members=Array(_DG_MEMBER_V4), authorized_operations=Int32)
DESCRIBE_GROUPS_RESPONSE_V0 = schema(DescribeGroupsResponse, groups=Array(_DG_V0))
DESCRIBE_GROUPS_RESPONSE_V1 = schema(DescribeGroupsResponse, throttle_time_ms=Int32,
                                     groups=Array(_DG_V0))  # v2 = v1
DESCRIBE_GROUPS_RESPONSE_V3 = schema(DescribeGroupsResponse, throttle_time_ms=Int32, groups=Array(_DG_V3))
DESCRIBE_GROUPS_RESPONSE_V4 = schema(DescribeGroupsResponse, throttle_time_ms=Int32, groups=Array(_DG_V4))


# =============================================================================================== ListGroups

@dataclass(slots=True)
class ListGroupsRequest:
    """No fields in v0-v2 (v4 adds a states filter, flexible only)."""


@dataclass(slots=True)
class ListedGroup:
    group_id: str = ""
    protocol_type: str = ""


@dataclass(slots=True)
class ListGroupsResponse:
    throttle_time_ms: int = 0  # v1+
    error_code: int = 0
    groups: list[ListedGroup] = field(default_factory=list)


LIST_GROUPS_REQUEST_V0 = schema(ListGroupsRequest)  # v1, v2 = v0
_LISTED_V0 = schema(ListedGroup, group_id=String, protocol_type=String)
LIST_GROUPS_RESPONSE_V0 = schema(ListGroupsResponse, error_code=Int16, groups=Array(_LISTED_V0))
LIST_GROUPS_RESPONSE_V1 = schema(ListGroupsResponse, throttle_time_ms=Int32, error_code=Int16,
                                 groups=Array(_LISTED_V0))  # v2 = v1


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


DELETE_GROUPS_REQUEST_V0 = schema(DeleteGroupsRequest, groups_names=Array(String))  # v1 = v0
DELETE_GROUPS_RESPONSE_V0 = schema(DeleteGroupsResponse, throttle_time_ms=Int32, results=Array(schema(
    DeletableGroupResult, group_id=String, error_code=Int16)))  # v1 = v0 (throttling behaviour only)


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    FIND_COORDINATOR_KEY: (
        versioned(2, {0: FIND_COORDINATOR_REQUEST_V0, 1: FIND_COORDINATOR_REQUEST_V1}),
        versioned(2, {0: FIND_COORDINATOR_RESPONSE_V0, 1: FIND_COORDINATOR_RESPONSE_V1})),
    JOIN_GROUP_KEY: (
        versioned(5, {0: JOIN_GROUP_REQUEST_V0, 1: JOIN_GROUP_REQUEST_V1, 5: JOIN_GROUP_REQUEST_V5}),
        versioned(5, {0: JOIN_GROUP_RESPONSE_V0, 2: JOIN_GROUP_RESPONSE_V2, 5: JOIN_GROUP_RESPONSE_V5})),
    HEARTBEAT_KEY: (
        versioned(3, {0: HEARTBEAT_REQUEST_V0, 3: HEARTBEAT_REQUEST_V3}),
        versioned(3, {0: HEARTBEAT_RESPONSE_V0, 1: HEARTBEAT_RESPONSE_V1})),
    LEAVE_GROUP_KEY: (
        versioned(3, {0: LEAVE_GROUP_REQUEST_V0, 3: LEAVE_GROUP_REQUEST_V3}),
        versioned(3, {0: LEAVE_GROUP_RESPONSE_V0, 1: LEAVE_GROUP_RESPONSE_V1, 3: LEAVE_GROUP_RESPONSE_V3})),
    SYNC_GROUP_KEY: (
        versioned(3, {0: SYNC_GROUP_REQUEST_V0, 3: SYNC_GROUP_REQUEST_V3}),
        versioned(3, {0: SYNC_GROUP_RESPONSE_V0, 1: SYNC_GROUP_RESPONSE_V1})),
    DESCRIBE_GROUPS_KEY: (
        versioned(4, {0: DESCRIBE_GROUPS_REQUEST_V0, 3: DESCRIBE_GROUPS_REQUEST_V3}),
        versioned(4, {0: DESCRIBE_GROUPS_RESPONSE_V0, 1: DESCRIBE_GROUPS_RESPONSE_V1,
                      3: DESCRIBE_GROUPS_RESPONSE_V3, 4: DESCRIBE_GROUPS_RESPONSE_V4})),
    LIST_GROUPS_KEY: (
        versioned(2, {0: LIST_GROUPS_REQUEST_V0}),
        versioned(2, {0: LIST_GROUPS_RESPONSE_V0, 1: LIST_GROUPS_RESPONSE_V1})),
    DELETE_GROUPS_KEY: (
        versioned(1, {0: DELETE_GROUPS_REQUEST_V0}),
        versioned(1, {0: DELETE_GROUPS_RESPONSE_V0})),
}
