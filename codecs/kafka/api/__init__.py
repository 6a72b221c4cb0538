"""The Kafka request/response bodies, one dataclass per message and nested struct, and their versioned schemas.

Each module holds one API (or a family) with its dataclasses (named as in Apache Kafka's message JSON, fields in
snake_case, the union of every implemented version's fields with defaults) and one schema per distinct
(api, version) layout; `registry` maps (key, version) to schemas and lists what the gateway advertises.
`headers` holds the request header v1 and response header v0. Non-flexible versions only.

- `api_versions` ApiVersions 0-2 · `produce` Produce 0-8 · `fetch` Fetch 0-11 · `list_offsets` ListOffsets 0-5
- `metadata` Metadata 0-8 · `offsets` OffsetCommit 0-7, OffsetFetch 0-5
- `groups` FindCoordinator 0-2, JoinGroup 0-5, Heartbeat 0-3, LeaveGroup 0-3, SyncGroup 0-3, DescribeGroups 0-4,
  ListGroups 0-2
- `admin` CreateTopics 0-4, DeleteTopics 0-3, InitProducerId 0-1
- `sasl` SaslHandshake 0-1, SaslAuthenticate 0-1
"""

from __future__ import annotations

from .admin import (CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreatableTopicResult,
                    CreateTopicsRequest, CreateTopicsResponse, DeletableTopicResult, DeleteTopicsRequest,
                    DeleteTopicsResponse, InitProducerIdRequest, InitProducerIdResponse)
from .api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from .fetch import (AbortedTransaction, FetchableTopicResponse, FetchPartition, FetchRequest, FetchResponse,
                    FetchTopic, ForgottenTopic, PartitionData)
from .groups import (DescribedGroup, DescribedGroupMember, DescribeGroupsRequest, DescribeGroupsResponse,
                     FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
                     JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse, JoinGroupResponseMember,
                     LeaveGroupRequest, LeaveGroupResponse, ListedGroup, ListGroupsRequest, ListGroupsResponse,
                     MemberIdentity, MemberResponse, SyncGroupRequest, SyncGroupRequestAssignment,
                     SyncGroupResponse)
from .headers import RequestHeader, ResponseHeader
from .list_offsets import (ListOffsetsPartition, ListOffsetsPartitionResponse, ListOffsetsRequest,
                           ListOffsetsResponse, ListOffsetsTopic, ListOffsetsTopicResponse)
from .metadata import (MetadataRequest, MetadataRequestTopic, MetadataResponse, MetadataResponseBroker,
                       MetadataResponsePartition, MetadataResponseTopic)
from .offsets import (OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
                      OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
                      OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse,
                      OffsetFetchResponsePartition, OffsetFetchResponseTopic)
from .produce import (BatchIndexAndErrorMessage, PartitionProduceData, PartitionProduceResponse, ProduceRequest,
                      ProduceResponse, TopicProduceData, TopicProduceResponse)
from .sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                   SaslHandshakeResponse)
from .registry import (API_KEYS, SUPPORTED, api_versions_response, is_supported, request_schema, request_type,
                       response_schema, response_type)

__all__ = [
    # registry
    "API_KEYS", "SUPPORTED", "is_supported", "request_schema", "response_schema", "request_type",
    "response_type", "api_versions_response",
    # headers
    "RequestHeader", "ResponseHeader",
    # ApiVersions
    "ApiVersionsRequest", "ApiVersionsResponse", "ApiVersion",
    # Produce
    "ProduceRequest", "TopicProduceData", "PartitionProduceData", "ProduceResponse", "TopicProduceResponse",
    "PartitionProduceResponse", "BatchIndexAndErrorMessage",
    # Fetch
    "FetchRequest", "FetchTopic", "FetchPartition", "ForgottenTopic", "FetchResponse", "FetchableTopicResponse",
    "PartitionData", "AbortedTransaction",
    # ListOffsets
    "ListOffsetsRequest", "ListOffsetsTopic", "ListOffsetsPartition", "ListOffsetsResponse",
    "ListOffsetsTopicResponse", "ListOffsetsPartitionResponse",
    # Metadata
    "MetadataRequest", "MetadataRequestTopic", "MetadataResponse", "MetadataResponseBroker",
    "MetadataResponseTopic", "MetadataResponsePartition",
    # OffsetCommit / OffsetFetch
    "OffsetCommitRequest", "OffsetCommitRequestTopic", "OffsetCommitRequestPartition", "OffsetCommitResponse",
    "OffsetCommitResponseTopic", "OffsetCommitResponsePartition", "OffsetFetchRequest", "OffsetFetchRequestTopic",
    "OffsetFetchResponse", "OffsetFetchResponseTopic", "OffsetFetchResponsePartition",
    # groups
    "FindCoordinatorRequest", "FindCoordinatorResponse", "JoinGroupRequest", "JoinGroupRequestProtocol",
    "JoinGroupResponse", "JoinGroupResponseMember", "HeartbeatRequest", "HeartbeatResponse", "LeaveGroupRequest",
    "MemberIdentity", "LeaveGroupResponse", "MemberResponse", "SyncGroupRequest", "SyncGroupRequestAssignment",
    "SyncGroupResponse", "DescribeGroupsRequest", "DescribeGroupsResponse", "DescribedGroup",
    "DescribedGroupMember", "ListGroupsRequest", "ListGroupsResponse", "ListedGroup",
    # admin
    "CreateTopicsRequest", "CreatableTopic", "CreatableReplicaAssignment", "CreatableTopicConfig",
    "CreateTopicsResponse", "CreatableTopicResult", "DeleteTopicsRequest", "DeleteTopicsResponse",
    "DeletableTopicResult", "InitProducerIdRequest", "InitProducerIdResponse",
    # SASL
    "SaslHandshakeRequest", "SaslHandshakeResponse", "SaslAuthenticateRequest", "SaslAuthenticateResponse",
]
