"""The Kafka request/response bodies, one dataclass per message and nested struct, and their versioned schemas.

Each module holds one API (or a family) with its dataclasses (named as in Apache Kafka's message JSON, fields in
snake_case, the union of every implemented version's fields with defaults) and its schemas, declared once for
every version with `message.message` (fields present from or until a version, as Kafka's JSON says);
`registry` maps (key, version) to schemas and lists what the gateway advertises. `headers` holds the request
headers v1/v2 and response headers v0/v1. Versions go up to Kafka 4.1's maxima; flexible versions (KIP-482) are
those from `registry.FLEXIBLE_SINCE` on.

- `api_versions` ApiVersions 0-4 · `produce` Produce 0-13 · `fetch` Fetch 0-18 · `list_offsets` ListOffsets 0-10
- `metadata` Metadata 0-13 · `offsets` OffsetCommit 0-9, OffsetFetch 0-9, OffsetDelete 0
- `groups` FindCoordinator 0-6, JoinGroup 0-9, Heartbeat 0-4, LeaveGroup 0-5, SyncGroup 0-5, DescribeGroups 0-6,
  ListGroups 0-5, DeleteGroups 0-2
- `consumer_groups` ConsumerGroupHeartbeat 0-1, ConsumerGroupDescribe 0-1 (KIP-848)
- `share_groups` ShareGroupHeartbeat 1, ShareGroupDescribe 1, ShareFetch 1, ShareAcknowledge 1,
  Describe/Alter/DeleteShareGroupOffsets 0 (KIP-932)
- `admin` CreateTopics 0-7, DeleteTopics 0-6, DeleteRecords 0-2, InitProducerId 0-5, CreatePartitions 0-3
- `transactions` AddPartitionsToTxn 0-5, AddOffsetsToTxn 0-4, EndTxn 0-5, TxnOffsetCommit 0-5
- `configs` DescribeConfigs 0-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1
- `cluster` DescribeLogDirs 0-4, DescribeCluster 0-2
- `sasl` SaslHandshake 0-1, SaslAuthenticate 0-2
- `acls` DescribeAcls 0-3, CreateAcls 0-3, DeleteAcls 0-3 (v2+ f) · `quotas` DescribeClientQuotas 0-1,
  AlterClientQuotas 0-1 (v1 f) · `scram_credentials` DescribeUserScramCredentials 0 (f), AlterUserScramCredentials 0 (f)
"""

from __future__ import annotations

from .admin import (CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreatableTopicResult,
                    CreatePartitionsAssignment, CreatePartitionsRequest, CreatePartitionsResponse,
                    CreatePartitionsTopic, CreatePartitionsTopicResult, CreateTopicsRequest, CreateTopicsResponse,
                    DeletableTopicResult, DeleteRecordsPartition, DeleteRecordsPartitionResult,
                    DeleteRecordsRequest, DeleteRecordsResponse, DeleteRecordsTopic, DeleteRecordsTopicResult,
                    DeleteTopicsRequest, DeleteTopicsResponse, InitProducerIdRequest, InitProducerIdResponse)
from .api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from .cluster import (DescribableLogDirTopic, DescribeClusterBroker, DescribeClusterRequest,
                      DescribeClusterResponse, DescribeLogDirsPartition, DescribeLogDirsRequest,
                      DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic)
from .configs import (AlterableConfig, AlterConfigOp, AlterConfigsRequest, AlterConfigsResource,
                      AlterConfigsResourceResponse, AlterConfigsResponse, ConfigResourceType, ConfigSource,
                      ConfigType, DescribeConfigsRequest, DescribeConfigsResource, DescribeConfigsResourceResult,
                      DescribeConfigsResponse, DescribeConfigsResult, DescribeConfigsSynonym,
                      IncrementalAlterableConfig, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResource,
                      IncrementalAlterConfigsResponse)
from .fetch import (AbortedTransaction, FetchableTopicResponse, FetchPartition, FetchRequest, FetchResponse,
                    FetchTopic, ForgottenTopic, PartitionData)
from .groups import (DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse, DescribedGroup,
                     DescribedGroupMember, DescribeGroupsRequest, DescribeGroupsResponse,
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
                      OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
                      OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
                      OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse,
                      OffsetFetchResponsePartition, OffsetFetchResponseTopic)
from .produce import (BatchIndexAndErrorMessage, PartitionProduceData, PartitionProduceResponse, ProduceRequest,
                      ProduceResponse, TopicProduceData, TopicProduceResponse)
from .sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                   SaslHandshakeResponse)
from .transactions import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnPartitionResult,
                           AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnTopic,
                           AddPartitionsToTxnTopicResult, EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest,
                           TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic, TxnOffsetCommitResponse,
                           TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic)
from .registry import (API_KEYS, FLEXIBLE_SINCE, SUPPORTED, advertised, api_versions_response, is_flexible,
                       is_supported, request_schema, request_type, response_schema, response_type)

__all__ = [
    # registry
    "API_KEYS", "SUPPORTED", "FLEXIBLE_SINCE", "advertised", "is_flexible", "is_supported", "request_schema",
    "response_schema", "request_type", "response_type", "api_versions_response",
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
    # OffsetDelete
    "OffsetDeleteRequest", "OffsetDeleteRequestTopic", "OffsetDeleteRequestPartition", "OffsetDeleteResponse",
    "OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition",
    # groups
    "FindCoordinatorRequest", "FindCoordinatorResponse", "JoinGroupRequest", "JoinGroupRequestProtocol",
    "JoinGroupResponse", "JoinGroupResponseMember", "HeartbeatRequest", "HeartbeatResponse", "LeaveGroupRequest",
    "MemberIdentity", "LeaveGroupResponse", "MemberResponse", "SyncGroupRequest", "SyncGroupRequestAssignment",
    "SyncGroupResponse", "DescribeGroupsRequest", "DescribeGroupsResponse", "DescribedGroup",
    "DescribedGroupMember", "ListGroupsRequest", "ListGroupsResponse", "ListedGroup", "DeleteGroupsRequest",
    "DeleteGroupsResponse", "DeletableGroupResult",
    # admin
    "CreateTopicsRequest", "CreatableTopic", "CreatableReplicaAssignment", "CreatableTopicConfig",
    "CreateTopicsResponse", "CreatableTopicResult", "DeleteTopicsRequest", "DeleteTopicsResponse",
    "DeletableTopicResult", "InitProducerIdRequest", "InitProducerIdResponse", "DeleteRecordsRequest",
    "DeleteRecordsTopic", "DeleteRecordsPartition", "DeleteRecordsResponse", "DeleteRecordsTopicResult",
    "DeleteRecordsPartitionResult", "CreatePartitionsRequest", "CreatePartitionsTopic",
    "CreatePartitionsAssignment", "CreatePartitionsResponse", "CreatePartitionsTopicResult",
    # transactions
    "AddPartitionsToTxnRequest", "AddPartitionsToTxnTopic", "AddPartitionsToTxnResponse",
    "AddPartitionsToTxnTopicResult", "AddPartitionsToTxnPartitionResult", "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse", "EndTxnRequest", "EndTxnResponse", "TxnOffsetCommitRequest",
    "TxnOffsetCommitRequestTopic", "TxnOffsetCommitRequestPartition", "TxnOffsetCommitResponse",
    "TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition",
    # configs
    "ConfigResourceType", "ConfigSource", "ConfigType", "AlterConfigOp", "DescribeConfigsRequest",
    "DescribeConfigsResource", "DescribeConfigsResponse", "DescribeConfigsResult", "DescribeConfigsResourceResult",
    "DescribeConfigsSynonym", "AlterConfigsRequest", "AlterConfigsResource", "AlterableConfig",
    "AlterConfigsResponse", "AlterConfigsResourceResponse", "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResource", "IncrementalAlterableConfig", "IncrementalAlterConfigsResponse",
    # cluster
    "DescribeLogDirsRequest", "DescribableLogDirTopic", "DescribeLogDirsResponse", "DescribeLogDirsResult",
    "DescribeLogDirsTopic", "DescribeLogDirsPartition", "DescribeClusterRequest", "DescribeClusterResponse",
    "DescribeClusterBroker",
    # SASL
    "SaslHandshakeRequest", "SaslHandshakeResponse", "SaslAuthenticateRequest", "SaslAuthenticateResponse",
]
