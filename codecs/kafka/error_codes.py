"""Kafka protocol error codes: the one table (kafka-python habit 3), numbered as Apache Kafka's `Errors` enum.

`ErrorCode` is an IntEnum, so a member can be written into any `error_code` field as is. Only codes the gateway
may send or a client may reasonably expect are listed; `ErrorCode.name_of(code)` names any other number.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode"]


class ErrorCode(IntEnum):
    """Wire error codes (int16) of the Kafka protocol."""

    UNKNOWN_SERVER_ERROR = -1  # unexpected server-side failure; the client may retry
    NONE = 0  # success
    OFFSET_OUT_OF_RANGE = 1  # fetch/list offset outside [log start, log end]
    CORRUPT_MESSAGE = 2  # a record batch fails its CRC or is malformed
    UNKNOWN_TOPIC_OR_PARTITION = 3  # topic or partition does not exist on this broker
    INVALID_FETCH_SIZE = 4  # fetch size is invalid (e.g. negative)
    LEADER_NOT_AVAILABLE = 5  # leader election in progress; retriable
    NOT_LEADER_OR_FOLLOWER = 6  # this broker does not host the partition (was NOT_LEADER_FOR_PARTITION)
    REQUEST_TIMED_OUT = 7  # the request's own timeout expired
    BROKER_NOT_AVAILABLE = 8  # the broker is not available
    REPLICA_NOT_AVAILABLE = 9  # a replica named in the request is not available
    MESSAGE_TOO_LARGE = 10  # a batch is larger than the topic's max.message.bytes
    STALE_CONTROLLER_EPOCH = 11  # controller epoch is older than the broker's
    OFFSET_METADATA_TOO_LARGE = 12  # committed metadata string exceeds the configured limit
    NETWORK_EXCEPTION = 13  # server disconnected before a response was received
    COORDINATOR_LOAD_IN_PROGRESS = 14  # group coordinator still loading offsets; retriable
    COORDINATOR_NOT_AVAILABLE = 15  # group coordinator not available (group topic missing); retriable
    NOT_COORDINATOR = 16  # this broker is not the group's coordinator; look it up again
    INVALID_TOPIC_EXCEPTION = 17  # illegal topic name, or a write to an internal topic
    RECORD_LIST_TOO_LARGE = 18  # a produce request's records exceed the segment size
    NOT_ENOUGH_REPLICAS = 19  # fewer in-sync replicas than min.insync.replicas
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20  # appended, but fewer in-sync replicas than required
    INVALID_REQUIRED_ACKS = 21  # acks is not -1, 0 or 1
    ILLEGAL_GENERATION = 22  # generation id does not match the group's current generation
    INCONSISTENT_GROUP_PROTOCOL = 23  # protocol type/names do not match the group's
    INVALID_GROUP_ID = 24  # group id is empty or null
    UNKNOWN_MEMBER_ID = 25  # member id is not part of the group
    INVALID_SESSION_TIMEOUT = 26  # session timeout outside the broker's allowed range
    REBALANCE_IN_PROGRESS = 27  # group is rebalancing; the member must rejoin
    INVALID_COMMIT_OFFSET_SIZE = 28  # committed offset metadata too large (historical)
    TOPIC_AUTHORIZATION_FAILED = 29  # not authorized for the topic
    GROUP_AUTHORIZATION_FAILED = 30  # not authorized for the group
    CLUSTER_AUTHORIZATION_FAILED = 31  # not authorized for a cluster-level operation
    INVALID_TIMESTAMP = 32  # record timestamp out of the accepted range
    UNSUPPORTED_SASL_MECHANISM = 33  # SASL mechanism not enabled
    ILLEGAL_SASL_STATE = 34  # request not valid in the current SASL state
    UNSUPPORTED_VERSION = 35  # api key or version not supported by this broker
    TOPIC_ALREADY_EXISTS = 36  # CreateTopics for an existing topic
    INVALID_PARTITIONS = 37  # partition count is invalid (e.g. < 1)
    INVALID_REPLICATION_FACTOR = 38  # replication factor invalid or larger than the broker count
    INVALID_REPLICA_ASSIGNMENT = 39  # manual replica assignment is invalid
    INVALID_CONFIG = 40  # a topic config is invalid
    NOT_CONTROLLER = 41  # this broker is not the controller
    INVALID_REQUEST = 42  # malformed or semantically invalid request
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43  # operation needs a newer message format than the topic's
    POLICY_VIOLATION = 44  # request violates a broker policy
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45  # idempotent producer sequence gap
    DUPLICATE_SEQUENCE_NUMBER = 46  # batch already appended (idempotent retry)
    INVALID_PRODUCER_EPOCH = 47  # producer epoch is older than the current one (fenced)
    INVALID_TXN_STATE = 48  # transactional operation invalid in the current state
    INVALID_PRODUCER_ID_MAPPING = 49  # producer id does not match the transactional id
    INVALID_TRANSACTION_TIMEOUT = 50  # transaction timeout larger than the broker maximum
    CONCURRENT_TRANSACTIONS = 51  # another transaction operation is in progress
    TRANSACTION_COORDINATOR_FENCED = 52  # coordinator epoch is stale
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53  # not authorized for the transactional id
    SECURITY_DISABLED = 54  # security features are disabled
    OPERATION_NOT_ATTEMPTED = 55  # not attempted because a related operation failed
    KAFKA_STORAGE_ERROR = 56  # disk error on the broker while handling the request
    LOG_DIR_NOT_FOUND = 57  # requested log directory does not exist
    SASL_AUTHENTICATION_FAILED = 58  # SASL authentication failed
    UNKNOWN_PRODUCER_ID = 59  # broker has no state for this producer id (expired or never seen)
    REASSIGNMENT_IN_PROGRESS = 60  # partition reassignment in progress
    NON_EMPTY_GROUP = 68  # group still has members (e.g. DeleteGroups)
    GROUP_ID_NOT_FOUND = 69  # group does not exist
    FETCH_SESSION_ID_NOT_FOUND = 70  # incremental fetch session id unknown
    INVALID_FETCH_SESSION_EPOCH = 71  # fetch session epoch out of order
    LISTENER_NOT_FOUND = 72  # no listener on the leader matching the request's listener
    TOPIC_DELETION_DISABLED = 73  # delete.topic.enable is false
    FENCED_LEADER_EPOCH = 74  # request's leader epoch is older than the broker's
    UNKNOWN_LEADER_EPOCH = 75  # request's leader epoch is newer than the broker's
    UNSUPPORTED_COMPRESSION_TYPE = 76  # compression codec not supported by the fetch version
    STALE_BROKER_EPOCH = 77  # broker epoch is stale
    OFFSET_NOT_AVAILABLE = 78  # leader's high watermark not yet caught up after election
    MEMBER_ID_REQUIRED = 79  # JoinGroup v4+: first join gets a member id and must rejoin with it
    PREFERRED_LEADER_NOT_AVAILABLE = 80  # preferred leader not available
    GROUP_MAX_SIZE_REACHED = 81  # group has reached group.max.size
    FENCED_INSTANCE_ID = 82  # another member with the same group.instance.id took over
    GROUP_SUBSCRIBED_TO_TOPIC = 86  # offsets of a topic the active group subscribes to cannot be deleted
    INVALID_RECORD = 87  # a record failed broker-side validation
    UNSTABLE_OFFSET_COMMIT = 88  # pending transactional offset commits for the partition
    THROTTLING_QUOTA_EXCEEDED = 89  # a mutation quota was exceeded
    PRODUCER_FENCED = 90  # a newer producer with the same transactional id exists
    RESOURCE_NOT_FOUND = 91  # e.g. a SCRAM credential that does not exist
    DUPLICATE_RESOURCE = 92  # a resource named twice in one request
    UNACCEPTABLE_CREDENTIAL = 93  # a SCRAM credential the broker refuses (iterations, empty user)
    UNKNOWN_TOPIC_ID = 100  # no topic has this topic id (KIP-516)
    INCONSISTENT_TOPIC_ID = 103  # the topic id given does not match the topic's
    FENCED_MEMBER_EPOCH = 110  # KIP-848: the member's epoch is fenced; it must rejoin with epoch 0
    UNRELEASED_INSTANCE_ID = 111  # KIP-848: a static member's instance id is still used by another member
    UNSUPPORTED_ASSIGNOR = 112  # KIP-848: the server assignor asked for is not configured
    STALE_MEMBER_EPOCH = 113  # KIP-848: a commit or fetch with an epoch older than the member's current one
    UNSUPPORTED_ENDPOINT_TYPE = 115  # DescribeCluster v1+: an endpoint type this node does not serve
    INVALID_RECORD_STATE = 121  # KIP-932: an acknowledgement of a record not acquired by this member
    SHARE_SESSION_NOT_FOUND = 122  # KIP-932: no share session for this member (open one with epoch 0)
    INVALID_SHARE_SESSION_EPOCH = 123  # KIP-932: share session epoch out of order
    INVALID_REGULAR_EXPRESSION = 128  # KIP-848: the subscription regex cannot be compiled
    REBOOTSTRAP_REQUIRED = 129  # KIP-1102: the client must bootstrap again
    SHARE_SESSION_LIMIT_REACHED = 133  # KIP-932: the broker holds as many share sessions as it may

    @classmethod
    def name_of(cls, code: int) -> str:
        """The member name for `code`, or `UNKNOWN_CODE_<n>` for a code not in this table."""
        try:
            return cls(code).name
        except ValueError:
            return f"UNKNOWN_CODE_{code}"
