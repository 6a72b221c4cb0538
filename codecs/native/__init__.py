"""Sans-I/O codec for the native protocol (RustLog-style JSON frames; the protocol: docs/native.md).

Holds `events` (one dataclass per request/response), `wire` (the JSON <-> event mapping: decoders, encoders
and their validation) and `connection` (framing, receive buffer, error state).

Wire format: each frame is a u32 big-endian payload length followed by that many bytes of JSON, at most
`MAX_FRAME_BYTES` (10 MiB). The JSON is externally tagged, e.g. `{"Produce": {...}}`. Byte payloads are arrays
of integers 0..255.

Requests (server receives, client sends)::

    {"Produce": {"topic": str, "partition": int, "records": [record, ...]}}
    {"Fetch": {"topic", "partition", "offset", "max_bytes", "group_id": str|null (may be absent),
               "max_wait_ms"?: int, "min_bytes"?: int}}
    {"OffsetCommit": {"topic", "partition", "group_id": str, "offset": int, "metadata"?: str}}
    {"OffsetFetch": {"topic", "partition", "group_id": str}}
    {"CreateTopic": {"topic", "partitions"?: int >= 1}}      {"ListTopics": {}}
    {"DescribeTopic": {"topic", "details"?: bool, "partitions"?: [int], "at_timestamp"?: int}}  {"Ping": {}}
    {"DeleteTopic": {"topic"}}
    {"Auth": {"token": str} | {"user": str, "password": str} | {"mechanism": "SCRAM-SHA-256"|"SCRAM-SHA-512",
              "message": str}}
    {"CreatePartitions": {"topic", "partitions": int >= 1, "validate_only"?: bool}}
    {"DeleteRecords": {"topic", "partition", "offset": int >= -1}}
    {"AlterTopicConfig": {"topic", "set"?: {name: int|str}, "delete"?: [name, ...], "validate_only"?: bool}}
    {"DescribeTopicConfig": {"topic", "keys"?: [name, ...]|null}}
    {"DeleteGroupOffsets": {"group_id", "partitions"?: [{"topic", "partition"}, ...]|null}}
    {"ListGroups": {}}                                        {"DescribeGroup": {"group_id"}}
    {"ResetGroupOffsets": {"group_id", "to": "earliest"|"latest"|"offset"|"timestamp", "value"?: int,
                           "topics"?: [{"topic", "partitions"?: [int, ...]|null}, ...]|null, "validate_only"?: bool}}

Internal requests (`workers: N`: served only on a worker's relay socket, where only the other workers connect;
on a client's connection they are unknown requests), answered `{"Txn": {"state": "ok"|"ongoing"|"committed"|
"aborted"|"completing"}}`::

    {"TxnEnd": {"producer_id", "epoch", "committed": bool, "partitions": [{"topic", "partition"}, ...]}}
    {"TxnQuery": {"producer_id", "epoch", "topic", "partition"}}

A Produce `record` is either a byte array (the seed's form: payload only) or, as our extension so native
clients can send keys and timestamps, an object `{"payload": [...], "key": [...]|null, "timestamp": int|null}`
where `key`/`timestamp` may be absent and `"value"` is accepted as an alias of `"payload"`. The encoder sends
the bare array whenever a record has no key and no timestamp, so seed brokers understand our frames.

Responses (client receives, server sends)::

    {"Produce": {"offsets": [int, ...]}}
    {"Fetch": {"records": [{"offset", "payload", "key"?, "timestamp"?}, ...], "next_offset": int}}
    {"OffsetCommit": {"success": bool}}      {"OffsetFetch": {"offset": int|null}}
    {"CreateTopic": {"created": bool}}       {"DeleteTopic": {"deleted": bool}}
    {"ListTopics": {"topics": [{"name", "partitions"}, ...]}}
    {"DescribeTopic": {"topic", "partitions": [{"partition", "log_start_offset", "log_end_offset",
                                                "size_bytes"?, "segments"?, "timestamp_offset"?}, ...],
                       "format"?: str}}
    {"Pong": {}}                             {"Error": {"message": str}}
    {"Auth": {"authenticated": bool, "message"?: str, "principal"?: str}}
    {"CreatePartitions": {"topic", "partitions"}}            {"DeleteRecords": {"log_start_offset"}}
    {"AlterTopicConfig": {"altered": bool}}                  {"DeleteGroupOffsets": {"deleted": int}}
    {"DescribeTopicConfig": {"topic", "configs": [{"name", "value": int|str, "source": "topic"|"broker"|"default",
                                                   "default": int|str, "read_only": bool}, ...]}}
    {"ListGroups": {"groups": [{"group_id", "state", "protocol_type", "members": int, "type"}, ...]}}
    {"DescribeGroup": {"group_id", "state", "protocol_type", "type",
                       "members": [{"member_id", "client_id", "client_host", "partitions": [{"topic", "partition"}]}],
                       "partitions": [{"topic", "partition", "committed_offset": int|null,
                                       "log_end_offset": int|null, "metadata": str}, ...]}}
    {"ResetGroupOffsets": {"group_id", "offsets": [{"topic", "partition", "previous_offset": int|null, "offset"}],
                           "reset": bool}}

In fetched records `key` and `timestamp` appear only when set; a record with no value (a Kafka tombstone) has
`"payload": null`; record headers are not carried. Unknown fields inside a known request are ignored.
Integers are never booleans; offsets are 0..2**63-1, partitions 0..2**31-1.

The admin requests (`CreatePartitions`, `DeleteRecords`: offset -1 = every visible record, `AlterTopicConfig`,
`DescribeTopicConfig`, `DeleteGroupOffsets`: without `partitions` the whole group) are our extensions, as are
`CreateTopic` … `DescribeTopic`. Config values are int64 or strings (Kafka's names: `retention.ms`, …).

`DescribeTopic` with `"details": true` also answers each partition's `size_bytes` (on disk) and `segments`, and
the topic's storage `format`; without it the answer is the seed's. With `"partitions"` it answers those partitions
only, leaving out ones the topic lacks (with `workers: N`, how workers ask each other).

The group requests are our extensions too. `ListGroups`: the groups with committed offsets (any protocol) and the
live Kafka groups of every type, with Kafka's state names ("Empty" for offsets only) and the group's `type`
("classic", "consumer", "share"; "" for offsets only: absent from an older gateway's answer). `DescribeGroup`: per
topic-partition the committed offset and the log end offset a committed reader sees (the last stable offset; lag
is the difference), and a live Kafka group's members with their assigned partitions; an unknown group is answered
with state "Dead" and no members or partitions (as Kafka's DescribeGroups). `ResetGroupOffsets` (the
kafka-consumer-groups `--reset-offsets` conventions): "earliest" = log start, "latest" = last stable offset,
"offset" = `value` moved into [earliest, latest], "timestamp" = first record at or after `value` ms (else latest);
without `topics` the partitions the group has committed; refused with an `Error` "group has active members: …"
while its Kafka group is not Empty; with `validate_only` the plan is answered and nothing committed (`reset`:
false).

`Auth` is our extension for gateways that require a login (a user's password, SCRAM, or the legacy shared token):
it must be the connection's first request; any other request before it, or a failed login, is answered with an
`Error` and the connection is closed. A SCRAM login is two `Auth` requests (client-first, client-final), each
answered with the server's message. The security administration (ACLs, users' SCRAM credentials, client quotas) is
in `security`.
"""

from logway.codecs.native.connection import CLOSED, MAX_FRAME_BYTES, NEED_DATA, NativeConnection
from logway.codecs.native.events import (
    RESET_TARGETS,
    AlterTopicConfigRequest,
    AlterTopicConfigResponse,
    AuthRequest,
    AuthResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteGroupOffsetsRequest,
    DeleteGroupOffsetsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    DescribeGroupRequest,
    DescribeGroupResponse,
    DescribeTopicConfigRequest,
    DescribeTopicConfigResponse,
    DescribeTopicRequest,
    DescribeTopicResponse,
    EncodedRecords,
    ErrorResponse,
    FetchRequest,
    FetchResponse,
    GroupMember,
    GroupOffsetReset,
    GroupPartition,
    GroupSummary,
    ListGroupsRequest,
    ListGroupsResponse,
    ListTopicsRequest,
    ListTopicsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionSummary,
    PingRequest,
    PongResponse,
    ProduceRequest,
    RelayedResponse,
    ProduceResponse,
    Request,
    ResetGroupOffsetsRequest,
    ResetGroupOffsetsResponse,
    Response,
    TopicConfigEntry,
    TopicSummary,
    TxnEndRequest,
    TxnQueryRequest,
    TxnResponse,
)
from logway.codecs.native.security import (AclEntry, AclsResponse, AlterQuotasRequest, AlterQuotasResponse,
                                           AlterUserRequest, AlterUserResponse, CreateAclsRequest,
                                           CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
                                           DescribeAclsRequest, DescribeQuotasRequest, DescribeUsersRequest,
                                           QuotaComponent, QuotaEntry, QuotasResponse, UserCredentials,
                                           UsersResponse)
from logway.codecs.native.wire import encode_fetched

#: Every request and response event: the log's (`events`) and the security administration's (`security`).
Request = (Request | DescribeAclsRequest | CreateAclsRequest | DeleteAclsRequest | DescribeUsersRequest
           | AlterUserRequest | DescribeQuotasRequest | AlterQuotasRequest)
Response = (Response | AclsResponse | CreateAclsResponse | DeleteAclsResponse | UsersResponse | AlterUserResponse
            | QuotasResponse | AlterQuotasResponse)

__all__ = [
    "AclEntry", "AclsResponse", "AlterUserRequest", "AlterUserResponse", "CreateAclsRequest", "CreateAclsResponse",
    "DeleteAclsRequest", "DeleteAclsResponse", "DescribeAclsRequest", "DescribeUsersRequest", "UserCredentials",
    "UsersResponse", "AlterQuotasRequest", "AlterQuotasResponse", "DescribeQuotasRequest", "QuotaComponent",
    "QuotaEntry", "QuotasResponse",
    "CLOSED",
    "MAX_FRAME_BYTES",
    "NEED_DATA",
    "NativeConnection",
    "Request",
    "Response",
    "ProduceRequest",
    "FetchRequest",
    "OffsetCommitRequest",
    "OffsetFetchRequest",
    "CreateTopicRequest",
    "DeleteTopicRequest",
    "ListTopicsRequest",
    "DescribeTopicRequest",
    "CreatePartitionsRequest",
    "DeleteRecordsRequest",
    "AlterTopicConfigRequest",
    "DescribeTopicConfigRequest",
    "DeleteGroupOffsetsRequest",
    "ListGroupsRequest",
    "DescribeGroupRequest",
    "ResetGroupOffsetsRequest",
    "RESET_TARGETS",
    "PingRequest",
    "AuthRequest",
    "TxnEndRequest",
    "TxnQueryRequest",
    "TxnResponse",
    "ProduceResponse",
    "RelayedResponse",
    "FetchResponse",
    "EncodedRecords",
    "encode_fetched",
    "OffsetCommitResponse",
    "OffsetFetchResponse",
    "CreateTopicResponse",
    "DeleteTopicResponse",
    "ListTopicsResponse",
    "TopicSummary",
    "DescribeTopicResponse",
    "PartitionSummary",
    "CreatePartitionsResponse",
    "DeleteRecordsResponse",
    "AlterTopicConfigResponse",
    "DescribeTopicConfigResponse",
    "TopicConfigEntry",
    "DeleteGroupOffsetsResponse",
    "ListGroupsResponse",
    "GroupSummary",
    "DescribeGroupResponse",
    "GroupMember",
    "GroupPartition",
    "ResetGroupOffsetsResponse",
    "GroupOffsetReset",
    "PongResponse",
    "AuthResponse",
    "ErrorResponse",
]
