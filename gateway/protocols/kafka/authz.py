"""Authorization of Kafka requests, answered as a Kafka broker answers them (Kafka's `KafkaApis` and `AuthHelper`):
the broker's dispatch calls `KafkaAuthz.handle(request, conn, serve)`, which checks what the request needs for the
connection's principal (`security.Authorizer`), hands `serve` the part it may do, and puts the refused part's
errors back into the answer — the API modules know nothing of ACLs.

What each API needs, and its answer when refused:

- Produce: Write on the transactional id (if any), Write on each topic — TRANSACTIONAL_ID_ / TOPIC_AUTHORIZATION_
  FAILED per partition. Fetch: Read, ListOffsets: Describe on each topic — TOPIC_AUTHORIZATION_FAILED per
  partition.
- Metadata: Describe on each topic — of all topics, only those it may Describe; a named one, TOPIC_AUTHORIZATION_
  FAILED; auto-creation needs Create on the cluster or the topic, else UNKNOWN_TOPIC_OR_PARTITION.
- OffsetCommit: Read on the group (GROUP_AUTHORIZATION_FAILED for every partition) and each topic (TOPIC_…).
  OffsetFetch: Describe on the group (GROUP_…) and each topic (TOPIC_… per partition; all partitions: only those of
  topics it may Describe). FindCoordinator: Describe on the group / transactional id (GROUP_ / TRANSACTIONAL_ID_…).
- JoinGroup, Heartbeat, LeaveGroup, SyncGroup: Read on the group (GROUP_…). DescribeGroups: Describe, DeleteGroups:
  Delete on each group (GROUP_… for that group). ListGroups: Describe on the cluster, else only the groups it may
  Describe. OffsetDelete: Delete on the group (GROUP_…), Read on each topic (TOPIC_…).
- CreateTopics: Create on the cluster or each topic; DeleteTopics, DeleteRecords: Delete, CreatePartitions: Alter on
  each topic — TOPIC_AUTHORIZATION_FAILED for that topic.
- InitProducerId: Write on the transactional id; without one, IdempotentWrite on the cluster or Write on some topic
  (TRANSACTIONAL_ID_ / CLUSTER_…). AddPartitionsToTxn: Write on the transactional id and each topic (TOPIC_… for
  the refused, OPERATION_NOT_ATTEMPTED for the others). AddOffsetsToTxn, EndTxn, TxnOffsetCommit: Write on the
  transactional id, Read on the group (and each topic).
- DescribeConfigs / AlterConfigs, IncrementalAlterConfigs: DescribeConfigs / AlterConfigs on the topic or the
  cluster (a broker) — TOPIC_ / CLUSTER_… per resource. DescribeLogDirs: Describe on the cluster, else no log
  directory.
- DescribeAcls, DescribeUserScramCredentials / CreateAcls, DeleteAcls, AlterUserScramCredentials: Describe / Alter
  on the cluster; DescribeClientQuotas / AlterClientQuotas: DescribeConfigs / AlterConfigs on it —
  CLUSTER_AUTHORIZATION_FAILED. ApiVersions, SASL, DescribeCluster: nothing.
- KIP-848 and KIP-932: ConsumerGroupHeartbeat, ShareGroupHeartbeat, AlterShareGroupOffsets: Read on the group;
  ConsumerGroupDescribe, ShareGroupDescribe, DescribeShareGroupOffsets: Describe on each group (GROUP_… for that
  group); DeleteShareGroupOffsets: Delete on the group; ShareFetch, ShareAcknowledge: Read on the group and on each
  topic (a refusal answers the whole request: GROUP_ / TOPIC_AUTHORIZATION_FAILED at its top level).
- Topics named by id (Metadata v10+, DeleteTopics v6+; Produce and Fetch are named before) are checked under the
  name of the topic with that id; an id no topic has is left to the API (UNKNOWN_TOPIC_ID).
- FindCoordinator v4+ and OffsetFetch v8+ carry several keys / groups: each is checked on its own.
  AddPartitionsToTxn v4+ (several transactions, verify-only) is a broker's request: ClusterAction on the cluster.

Authorized operations (KIP-430), when a request asks for them: Metadata v8+ (each topic it may Describe; v8-10 the
cluster's), DescribeGroups v3+, ConsumerGroupDescribe and ShareGroupDescribe (each group described without an
error: those it may Describe), DescribeCluster — each the bit field of the operations the principal may do on the
resource (`Authorizer.operations`), put into the answer the API served (before the rules add their refusals); the
cluster's is 0 to a principal that may not Describe the cluster, as Kafka answers it. Entries the principal may not
describe keep Kafka's "omitted" (INT32_MIN).

Every refusal is counted and logged by the authorizer; the filters (Metadata of all topics, ListGroups, OffsetFetch
of all partitions) are not refusals and are not logged, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable

from logway.codecs.kafka.api import acls as ACL
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import cluster as K
from logway.codecs.kafka.api import configs as C
from logway.codecs.kafka.api import consumer_groups as CG
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api import quotas as Q
from logway.codecs.kafka.api import scram_credentials as S
from logway.codecs.kafka.api import share_groups as SG
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...waiting import then
from ...security import CLUSTER, Operation as Op, ResourceType as R
from .topic_ids import topic_of

__all__ = ["KafkaAuthz"]

Serve = Callable[[Any, Any], Awaitable[Any]]
_CLUSTER = CLUSTER[1]
#: DescribeConfigs' resource types (Kafka's ConfigResource.Type): a topic, a broker, a broker's loggers.
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER = 2, 4, 8


@dataclass(frozen=True)
class _Topics:
    """Where a request keeps its topics and partitions, and where its answer puts each partition's error."""

    request: str  # the request's list of topics
    name: str  # a topic's name in the request
    partitions: str  # a request topic's partitions
    index: str | None  # a request partition's id (None: the partitions are ints)
    response: str  # the answer's list of topics
    topic_cls: type
    response_name: str
    response_partitions: str
    partition_cls: type
    response_index: str
    extra: dict = field(default_factory=dict)  # other fields of an error partition (-1 offsets)


_PRODUCE = _Topics("topic_data", "name", "partition_data", "index", "responses", P.TopicProduceResponse, "name",
                   "partition_responses", P.PartitionProduceResponse, "index", {"base_offset": -1})
_FETCH = _Topics("topics", "topic", "partitions", "partition", "responses", F.FetchableTopicResponse, "topic",
                 "partitions", F.PartitionData, "partition_index",
                 {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1})
_LIST_OFFSETS = _Topics("topics", "name", "partitions", "partition_index", "topics", L.ListOffsetsTopicResponse,
                        "name", "partitions", L.ListOffsetsPartitionResponse, "partition_index",
                        {"timestamp": -1, "offset": -1})
_OFFSET_COMMIT = _Topics("topics", "name", "partitions", "partition_index", "topics", O.OffsetCommitResponseTopic,
                         "name", "partitions", O.OffsetCommitResponsePartition, "partition_index")
_OFFSET_FETCH = _Topics("topics", "name", "partition_indexes", None, "topics", O.OffsetFetchResponseTopic, "name",
                        "partitions", O.OffsetFetchResponsePartition, "partition_index", {"committed_offset": -1})
_OFFSET_DELETE = _Topics("topics", "name", "partitions", "partition_index", "topics", O.OffsetDeleteResponseTopic,
                         "name", "partitions", O.OffsetDeleteResponsePartition, "partition_index")
_TXN_OFFSET_COMMIT = _Topics("topics", "name", "partitions", "partition_index", "topics",
                             X.TxnOffsetCommitResponseTopic, "name", "partitions", X.TxnOffsetCommitResponsePartition,
                             "partition_index")
_ADD_PARTITIONS = _Topics("topics", "name", "partitions", None, "results", X.AddPartitionsToTxnTopicResult, "name",
                          "results", X.AddPartitionsToTxnPartitionResult, "partition_index")
_DELETE_RECORDS = _Topics("topics", "name", "partitions", "partition_index", "topics", A.DeleteRecordsTopicResult,
                          "name", "partitions", A.DeleteRecordsPartitionResult, "partition_index",
                          {"low_watermark": -1})


def _partition_ids(spec: _Topics, topic) -> list[int]:
    parts = getattr(topic, spec.partitions) or []
    return list(parts) if spec.index is None else [getattr(p, spec.index) for p in parts]


def _error_topic(spec: _Topics, name: str, partitions: list[int], code: int):
    return spec.topic_cls(**{spec.response_name: name, spec.response_partitions: [
        spec.partition_cls(**{spec.response_index: p, "error_code": code, **spec.extra}) for p in partitions]})


class KafkaAuthz:
    def __init__(self, authorizer, topics) -> None:
        """`topics`: the `TopicAdmin` (requests naming topics by id are told apart by it)."""
        self.authorizer = authorizer
        self.topics = topics
        self._rules = {
            P.API_KEY: self._produce, F.API_KEY: self._fetch, L.API_KEY: self._list_offsets, M.API_KEY: self._metadata,
            O.OFFSET_COMMIT_KEY: self._offset_commit, O.OFFSET_FETCH_KEY: self._offset_fetch,
            G.FIND_COORDINATOR_KEY: self._find_coordinator, G.JOIN_GROUP_KEY: self._group_read,
            G.HEARTBEAT_KEY: self._group_read, G.LEAVE_GROUP_KEY: self._group_read,
            G.SYNC_GROUP_KEY: self._group_read, G.DESCRIBE_GROUPS_KEY: self._describe_groups,
            G.LIST_GROUPS_KEY: self._list_groups, A.CREATE_TOPICS_KEY: self._create_topics,
            A.DELETE_TOPICS_KEY: self._delete_topics, A.DELETE_RECORDS_KEY: self._delete_records,
            A.CREATE_PARTITIONS_KEY: self._create_partitions, A.INIT_PRODUCER_ID_KEY: self._init_producer_id,
            X.ADD_PARTITIONS_TO_TXN_KEY: self._add_partitions, X.ADD_OFFSETS_TO_TXN_KEY: self._add_offsets,
            X.END_TXN_KEY: self._end_txn, X.TXN_OFFSET_COMMIT_KEY: self._txn_offset_commit,
            C.DESCRIBE_CONFIGS_KEY: self._describe_configs, C.ALTER_CONFIGS_KEY: self._alter_configs,
            C.INCREMENTAL_ALTER_CONFIGS_KEY: self._alter_configs, K.DESCRIBE_LOG_DIRS_KEY: self._describe_log_dirs,
            G.DELETE_GROUPS_KEY: self._delete_groups, O.OFFSET_DELETE_KEY: self._offset_delete,
            ACL.DESCRIBE_ACLS_KEY: self._cluster(Op.DESCRIBE, lambda b, c: ACL.DescribeAclsResponse(
                error_code=c, error_message="not authorized to describe ACLs")),
            ACL.CREATE_ACLS_KEY: self._cluster(Op.ALTER, lambda b, c: ACL.CreateAclsResponse(results=[
                ACL.AclCreationResult(c, "not authorized to create ACLs") for _ in b.creations])),
            ACL.DELETE_ACLS_KEY: self._cluster(Op.ALTER, lambda b, c: ACL.DeleteAclsResponse(filter_results=[
                ACL.DeleteAclsFilterResult(c, "not authorized to delete ACLs") for _ in b.filters])),
            Q.DESCRIBE_CLIENT_QUOTAS_KEY: self._cluster(
                Op.DESCRIBE_CONFIGS, lambda b, c: Q.DescribeClientQuotasResponse(
                    error_code=c, error_message="not authorized to describe client quotas", entries=None)),
            Q.ALTER_CLIENT_QUOTAS_KEY: self._cluster(Op.ALTER_CONFIGS, lambda b, c: Q.AlterClientQuotasResponse(
                entries=[Q.AlterEntryResult(c, "not authorized to alter client quotas", e.entity)
                         for e in b.entries])),
            S.DESCRIBE_USER_SCRAM_CREDENTIALS_KEY: self._cluster(
                Op.DESCRIBE, lambda b, c: S.DescribeUserScramCredentialsResponse(
                    error_code=c, error_message="not authorized to describe SCRAM credentials")),
            CG.CONSUMER_GROUP_HEARTBEAT_KEY: self._group_level(
                Op.READ, lambda c: CG.ConsumerGroupHeartbeatResponse(error_code=c, error_message="not authorized")),
            SG.SHARE_GROUP_HEARTBEAT_KEY: self._group_level(
                Op.READ, lambda c: SG.ShareGroupHeartbeatResponse(error_code=c, error_message="not authorized")),
            SG.ALTER_SHARE_GROUP_OFFSETS_KEY: self._group_level(
                Op.READ, lambda c: SG.AlterShareGroupOffsetsResponse(error_code=c, error_message="not authorized")),
            SG.DELETE_SHARE_GROUP_OFFSETS_KEY: self._group_level(
                Op.DELETE, lambda c: SG.DeleteShareGroupOffsetsResponse(error_code=c, error_message="not authorized")),
            CG.CONSUMER_GROUP_DESCRIBE_KEY: self._describe_named_groups(
                lambda g: CG.DescribedConsumerGroup(error_code=E.GROUP_AUTHORIZATION_FAILED, group_id=g)),
            SG.SHARE_GROUP_DESCRIBE_KEY: self._describe_named_groups(
                lambda g: SG.DescribedShareGroup(error_code=E.GROUP_AUTHORIZATION_FAILED, group_id=g)),
            SG.DESCRIBE_SHARE_GROUP_OFFSETS_KEY: self._describe_share_group_offsets,
            SG.SHARE_FETCH_KEY: self._share_records(SG.ShareFetchResponse),
            SG.SHARE_ACKNOWLEDGE_KEY: self._share_records(SG.ShareAcknowledgeResponse),
            S.ALTER_USER_SCRAM_CREDENTIALS_KEY: self._cluster(
                Op.ALTER, lambda b, c: S.AlterUserScramCredentialsResponse(results=[
                    S.AlterUserScramCredentialsResult(user, c, "not authorized to alter SCRAM credentials")
                    for user in dict.fromkeys([d.name for d in b.deletions] + [u.name for u in b.upsertions])])),
        }

        #: api key -> (whether a request asks for authorized operations, what puts them into its answer)
        self._operations = {
            M.API_KEY: (lambda r: r.api_version >= 8 and (r.body.include_topic_authorized_operations or (
                r.api_version <= 10 and r.body.include_cluster_authorized_operations)), self._metadata_operations),
            G.DESCRIBE_GROUPS_KEY: (lambda r: r.api_version >= 3 and r.body.include_authorized_operations,
                                    self._groups_operations),
            CG.CONSUMER_GROUP_DESCRIBE_KEY: (lambda r: r.body.include_authorized_operations,
                                             self._groups_operations),
            SG.SHARE_GROUP_DESCRIBE_KEY: (lambda r: r.body.include_authorized_operations,
                                          self._groups_operations),
            K.DESCRIBE_CLUSTER_KEY: (lambda r: r.body.include_cluster_authorized_operations,
                                     lambda r, conn, answer: replace(
                                         answer, cluster_authorized_operations=self._cluster_operations(conn))),
        }

    async def handle(self, request, conn, serve: Serve):
        """The answer to `request` from `conn`: `serve(request, conn)` for what it may do, the refusals put back
        (and the authorized operations it asks for)."""
        key = request.api_key
        operations = self._operations.get(key)
        if operations is not None and not conn.internal and operations[0](request):
            serve = self._with_operations(serve, operations[1])
        rule = self._rules.get(key)
        if rule is None or conn.internal or self.authorizer.open:
            return await serve(request, conn)
        return await rule(request, conn, serve)

    # -- authorized operations -------------------------------------------------------------------------------
    @staticmethod
    def _with_operations(serve: Serve, fill) -> Serve:
        """`serve`, its answer (what the rules let through: not the refusals they add) given its authorized
        operations by `fill(request, conn, answer)`."""
        async def serving(request, conn):
            return then(await serve(request, conn), lambda answer: fill(request, conn, answer))
        return serving

    def _cluster_operations(self, conn) -> int:
        """The cluster's authorized operations: 0 to a principal that may not Describe it (as Kafka)."""
        if not self._sees(conn, Op.DESCRIBE, R.CLUSTER, _CLUSTER):
            return 0
        return self.authorizer.operations(conn.principal, conn.address, R.CLUSTER, _CLUSTER)

    def _metadata_operations(self, request, conn, answer):
        body, operations = request.body, self.authorizer.operations
        changes = {}
        if body.include_topic_authorized_operations:
            changes["topics"] = [
                replace(t, topic_authorized_operations=operations(conn.principal, conn.address, R.TOPIC, t.name))
                if t.name is not None else t for t in answer.topics]
        if request.api_version <= 10 and body.include_cluster_authorized_operations:
            changes["cluster_authorized_operations"] = self._cluster_operations(conn)
        return replace(answer, **changes)

    def _groups_operations(self, request, conn, answer):
        """Each group a DescribeGroups-like answer describes (without an error) with its authorized operations."""
        operations = self.authorizer.operations
        return replace(answer, groups=[
            replace(g, authorized_operations=operations(conn.principal, conn.address, R.GROUP, g.group_id))
            if g.error_code == E.NONE else g for g in answer.groups])

    # -- helpers ---------------------------------------------------------------------------------------------
    def _may(self, conn, op: Op, rtype: R, name: str) -> bool:
        return self.authorizer.check(conn, op, rtype, name)

    def _sees(self, conn, op: Op, rtype: R, name: str) -> bool:
        """`allowed` without counting a refusal (filters)."""
        return self.authorizer.allowed(conn.principal, conn.address, op, rtype, name)

    async def _by_topic(self, request, conn, serve: Serve, spec: _Topics, op: Op, empty, *, refused_code=None):
        """Serve the topics `conn` may do `op` on; the others answered TOPIC_AUTHORIZATION_FAILED (or every topic
        `refused_code`, without serving anything). `empty()`: the answer to a request with no topic left."""
        body = request.body
        topics = getattr(body, spec.request) or []
        kept, denied = [], []
        for topic in topics:
            name = getattr(topic, spec.name)
            if refused_code is None and self._may(conn, op, R.TOPIC, name):
                kept.append(topic)
            else:
                denied.append((name, _partition_ids(spec, topic)))
        if not denied:
            return await serve(request, conn)
        code = refused_code if refused_code is not None else E.TOPIC_AUTHORIZATION_FAILED

        def merged(answer):
            errors = [_error_topic(spec, name, parts, code) for name, parts in denied]
            return replace(answer, **{spec.response: list(getattr(answer, spec.response) or []) + errors})

        if not kept:
            return merged(empty())
        return then(await serve(replace(request, body=replace(body, **{spec.request: kept})), conn), merged)

    def _cluster(self, op: Op, refused):
        """A rule: `op` on the cluster, else `refused(body, CLUSTER_AUTHORIZATION_FAILED)`."""
        async def rule(request, conn, serve):
            if self._may(conn, op, R.CLUSTER, _CLUSTER):
                return await serve(request, conn)
            return refused(request.body, E.CLUSTER_AUTHORIZATION_FAILED)
        return rule

    def _txn_id_refused(self, conn, transactional_id: str | None) -> bool:
        return transactional_id is not None and not self._may(conn, Op.WRITE, R.TRANSACTIONAL_ID, transactional_id)

    # -- records ---------------------------------------------------------------------------------------------
    async def _produce(self, request, conn, serve):
        body = request.body
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if self._txn_id_refused(conn, body.transactional_id) else None
        answer = await self._by_topic(request, conn, serve, _PRODUCE, Op.WRITE, P.ProduceResponse, refused_code=code)
        return None if body.acks == 0 else answer

    async def _fetch(self, request, conn, serve):
        return await self._by_topic(request, conn, serve, _FETCH, Op.READ,
                                    lambda: F.FetchResponse(throttle_time_ms=0, error_code=E.NONE, session_id=0))

    async def _list_offsets(self, request, conn, serve):
        return await self._by_topic(request, conn, serve, _LIST_OFFSETS, Op.DESCRIBE, L.ListOffsetsResponse)

    async def _metadata(self, request, conn, serve):
        body, version = request.body, request.api_version
        if body.topics is None or (version == 0 and not body.topics):  # every topic: those it may Describe
            answer = await serve(request, conn)
            return replace(answer, topics=[t for t in answer.topics if self._sees(conn, Op.DESCRIBE, R.TOPIC, t.name)])
        refused, kept = [], []
        may_create = None
        for topic in body.topics:
            name = topic.name
            if name is None:  # (v10+) asked by id: checked under the name of the topic with that id
                found = topic_of(self.topics, topic.topic_id)
                if found is None:  # no topic has that id: the API answers UNKNOWN_TOPIC_ID
                    kept.append(topic)
                    continue
                name = found.name
            if not self._may(conn, Op.DESCRIBE, R.TOPIC, name):
                refused.append(M.MetadataResponseTopic(error_code=E.TOPIC_AUTHORIZATION_FAILED, name=name))
                continue
            if name not in self.topics.names:  # auto-creation needs Create
                if may_create is None:
                    may_create = self._sees(conn, Op.CREATE, R.CLUSTER, _CLUSTER)
                if not (may_create or self._may(conn, Op.CREATE, R.TOPIC, name)):
                    refused.append(M.MetadataResponseTopic(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=name))
                    continue
            kept.append(topic)
        if not refused:
            return await serve(request, conn)
        answer = await serve(replace(request, body=replace(body, topics=kept)), conn)
        if not kept:  # (to a v0 request, no topic means every topic: the answer lists none of them)
            answer = replace(answer, topics=[])
        return replace(answer, topics=answer.topics + refused)

    # -- groups and offsets ----------------------------------------------------------------------------------
    async def _offset_commit(self, request, conn, serve):
        body = request.body
        code = None if self._may(conn, Op.READ, R.GROUP, body.group_id) else E.GROUP_AUTHORIZATION_FAILED
        return await self._by_topic(request, conn, serve, _OFFSET_COMMIT, Op.READ, O.OffsetCommitResponse,
                                    refused_code=code)

    async def _offset_fetch(self, request, conn, serve):
        body = request.body
        if request.api_version >= 8:  # several groups: each on its own (its topics filtered as below)
            denied = [g for g in body.groups if not self._may(conn, Op.DESCRIBE, R.GROUP, g.group_id)]
            kept = [g for g in body.groups if g not in denied]
            refused = [O.OffsetFetchResponseGroup(group_id=g.group_id, error_code=E.GROUP_AUTHORIZATION_FAILED)
                       for g in denied]
            for g in kept:
                if g.topics is not None:
                    g.topics = [t for t in g.topics if self._may(conn, Op.DESCRIBE, R.TOPIC, t.name)]
            if not kept:
                return O.OffsetFetchResponse(groups=refused)

            def filtered(answer):
                groups = [replace(g, topics=[t for t in g.topics if self._sees(conn, Op.DESCRIBE, R.TOPIC, t.name)])
                          for g in answer.groups]
                return replace(answer, groups=groups + refused)
            return then(await serve(replace(request, body=replace(body, groups=kept)), conn), filtered)
        if not self._may(conn, Op.DESCRIBE, R.GROUP, body.group_id):
            answer = O.OffsetFetchResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)
            if request.api_version < 2:  # (no top-level error code before v2)
                answer.topics = [_error_topic(_OFFSET_FETCH, t.name, list(t.partition_indexes),
                                              E.GROUP_AUTHORIZATION_FAILED) for t in body.topics or ()]
            return answer
        if body.topics is None:  # every partition the group committed: those of topics it may Describe
            return then(await serve(request, conn), lambda answer: replace(answer, topics=[
                t for t in answer.topics if self._sees(conn, Op.DESCRIBE, R.TOPIC, t.name)]))
        return await self._by_topic(request, conn, serve, _OFFSET_FETCH, Op.DESCRIBE, O.OffsetFetchResponse)

    async def _find_coordinator(self, request, conn, serve):
        body = request.body
        if body.key_type == 1:
            rtype, code = R.TRANSACTIONAL_ID, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:  # a group (0) or a share group (2)
            rtype, code = R.GROUP, E.GROUP_AUTHORIZATION_FAILED
        if request.api_version >= 4:  # several keys: each on its own
            return await self._named(request, conn, serve, "coordinator_keys", lambda k: k, "coordinators",
                                     lambda k: G.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code,
                                                             error_message="not authorized"),
                                     lambda k: self._may(conn, Op.DESCRIBE, rtype, k))
        if self._may(conn, Op.DESCRIBE, rtype, body.key):
            return await serve(request, conn)
        return G.FindCoordinatorResponse(error_code=code, error_message="not authorized", node_id=-1, host="",
                                         port=-1)

    async def _group_read(self, request, conn, serve):
        if self._may(conn, Op.READ, R.GROUP, request.body.group_id):
            return await serve(request, conn)
        refused = {G.JOIN_GROUP_KEY: G.JoinGroupResponse, G.HEARTBEAT_KEY: G.HeartbeatResponse,
                   G.LEAVE_GROUP_KEY: G.LeaveGroupResponse, G.SYNC_GROUP_KEY: G.SyncGroupResponse}[request.api_key]
        answer = refused(error_code=E.GROUP_AUTHORIZATION_FAILED)
        if request.api_key == G.JOIN_GROUP_KEY:
            answer.generation_id = -1
        return answer

    def _group_level(self, op: Op, refused):
        """A rule: `op` on the request's group, else `refused(GROUP_AUTHORIZATION_FAILED)`."""
        async def rule(request, conn, serve):
            if self._may(conn, op, R.GROUP, request.body.group_id or ""):
                return await serve(request, conn)
            return refused(E.GROUP_AUTHORIZATION_FAILED)
        return rule

    def _describe_named_groups(self, refused):
        """A rule: Describe on each of the request's `group_ids`, answered in `groups` (`refused(group)`)."""
        async def rule(request, conn, serve):
            return await self._named(request, conn, serve, "group_ids", lambda g: g, "groups", refused,
                                     lambda g: self._may(conn, Op.DESCRIBE, R.GROUP, g))
        return rule

    async def _describe_share_group_offsets(self, request, conn, serve):
        return await self._named(request, conn, serve, "groups", lambda g: g.group_id, "groups",
                                 lambda g: SG.DescribeShareGroupOffsetsResponseGroup(
                                     group_id=g, error_code=E.GROUP_AUTHORIZATION_FAILED,
                                     error_message="not authorized"),
                                 lambda g: self._may(conn, Op.DESCRIBE, R.GROUP, g))

    def _share_records(self, answer):
        """A rule for ShareFetch / ShareAcknowledge: Read on the group and on every topic named (by id)."""
        async def rule(request, conn, serve):
            body = request.body
            if not self._may(conn, Op.READ, R.GROUP, body.group_id or ""):
                return answer(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message="not authorized")
            for t in body.topics:
                topic = topic_of(self.topics, t.topic_id)
                if topic is not None and not self._may(conn, Op.READ, R.TOPIC, topic.name):
                    return answer(error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                  error_message=f"not authorized to read {topic.name}")
            return await serve(request, conn)
        return rule

    async def _describe_groups(self, request, conn, serve):
        return await self._named(request, conn, serve, "groups", lambda g: g, "groups",
                                 lambda g: G.DescribedGroup(error_code=E.GROUP_AUTHORIZATION_FAILED, group_id=g),
                                 lambda g: self._may(conn, Op.DESCRIBE, R.GROUP, g))

    async def _list_groups(self, request, conn, serve):
        answer = await serve(request, conn)
        if self._sees(conn, Op.DESCRIBE, R.CLUSTER, _CLUSTER):
            return answer
        return replace(answer, groups=[g for g in answer.groups if self._sees(conn, Op.DESCRIBE, R.GROUP, g.group_id)])

    async def _delete_groups(self, request, conn, serve):
        return await self._named(request, conn, serve, "groups_names", lambda g: g, "results",
                                 lambda g: G.DeletableGroupResult(g, E.GROUP_AUTHORIZATION_FAILED),
                                 lambda g: self._may(conn, Op.DELETE, R.GROUP, g))

    async def _offset_delete(self, request, conn, serve):
        if not self._may(conn, Op.DELETE, R.GROUP, request.body.group_id):
            return O.OffsetDeleteResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)
        return await self._by_topic(request, conn, serve, _OFFSET_DELETE, Op.READ, O.OffsetDeleteResponse)

    # -- topics ----------------------------------------------------------------------------------------------
    async def _named(self, request, conn, serve, items: str, name_of, results: str, refused, may):
        """A request whose list `items` holds things named `name_of(item)`, answered in the list `results`: those
        `may(name)` refuses are left out of what is served and answered `refused(name)`."""
        body = request.body
        denied = [item for item in getattr(body, items) if not may(name_of(item))]
        if not denied:
            return await serve(request, conn)
        kept = [item for item in getattr(body, items) if item not in denied]
        answer = await serve(replace(request, body=replace(body, **{items: kept})), conn)
        return replace(answer, **{results: list(getattr(answer, results)) + [refused(name_of(i)) for i in denied]})

    def _topic_op(self, conn, op: Op):
        return lambda name: self._may(conn, op, R.TOPIC, name)

    async def _create_topics(self, request, conn, serve):
        may = ((lambda name: True) if self._sees(conn, Op.CREATE, R.CLUSTER, _CLUSTER)
               else self._topic_op(conn, Op.CREATE))
        return await self._named(request, conn, serve, "topics", lambda t: t.name, "topics",
                                 lambda name: A.CreatableTopicResult(name, E.TOPIC_AUTHORIZATION_FAILED,
                                                                     "not authorized to create the topic"), may)

    async def _delete_topics(self, request, conn, serve):
        if request.api_version >= 6:  # by name or by id
            may = self._topic_op(conn, Op.DELETE)

            def name_of(state):
                if state.name is not None:
                    return state.name
                topic = topic_of(self.topics, state.topic_id)
                return None if topic is None else topic.name  # (an unknown id: UNKNOWN_TOPIC_ID from the API)

            return await self._named(request, conn, serve, "topics", name_of, "responses",
                                     lambda name: A.DeletableTopicResult(name, E.TOPIC_AUTHORIZATION_FAILED,
                                                                         "not authorized to delete the topic"),
                                     lambda name: name is None or may(name))
        return await self._named(request, conn, serve, "topic_names", lambda name: name, "responses",
                                 lambda name: A.DeletableTopicResult(name, E.TOPIC_AUTHORIZATION_FAILED),
                                 self._topic_op(conn, Op.DELETE))

    async def _create_partitions(self, request, conn, serve):
        return await self._named(request, conn, serve, "topics", lambda t: t.name, "results",
                                 lambda name: A.CreatePartitionsTopicResult(name, E.TOPIC_AUTHORIZATION_FAILED,
                                                                            "not authorized to alter the topic"),
                                 self._topic_op(conn, Op.ALTER))

    async def _delete_records(self, request, conn, serve):
        return await self._by_topic(request, conn, serve, _DELETE_RECORDS, Op.DELETE, A.DeleteRecordsResponse)

    async def _describe_log_dirs(self, request, conn, serve):
        if self._may(conn, Op.DESCRIBE, R.CLUSTER, _CLUSTER):
            return await serve(request, conn)
        return K.DescribeLogDirsResponse()

    # -- configs ---------------------------------------------------------------------------------------------
    def _config_refusal(self, conn, resource, op: Op) -> int | None:
        if resource.resource_type == _CONFIG_TOPIC:
            return None if self._may(conn, op, R.TOPIC, resource.resource_name) else E.TOPIC_AUTHORIZATION_FAILED
        if resource.resource_type == _CONFIG_BROKER_LOGGER:
            op = Op.DESCRIBE if op is Op.DESCRIBE_CONFIGS else Op.ALTER
        return None if self._may(conn, op, R.CLUSTER, _CLUSTER) else E.CLUSTER_AUTHORIZATION_FAILED

    async def _configs(self, request, conn, serve, op: Op, results: str, refused):
        """Each resource refused answered `refused(resource, code)` in the answer's `results`."""
        codes = {id(r): self._config_refusal(conn, r, op) for r in request.body.resources}
        return await self._named(request, conn, serve, "resources", lambda r: r, results,
                                 lambda r: refused(r, codes[id(r)]), lambda r: codes[id(r)] is None)

    async def _describe_configs(self, request, conn, serve):
        return await self._configs(request, conn, serve, Op.DESCRIBE_CONFIGS, "results", lambda r, code: (
            C.DescribeConfigsResult(error_code=code, error_message="not authorized", resource_type=r.resource_type,
                                    resource_name=r.resource_name)))

    async def _alter_configs(self, request, conn, serve):
        return await self._configs(request, conn, serve, Op.ALTER_CONFIGS, "responses", lambda r, code: (
            C.AlterConfigsResourceResponse(code, "not authorized", r.resource_type, r.resource_name)))

    # -- transactions ----------------------------------------------------------------------------------------
    async def _init_producer_id(self, request, conn, serve):
        tid = request.body.transactional_id
        if tid is not None:
            if self._may(conn, Op.WRITE, R.TRANSACTIONAL_ID, tid):
                return await serve(request, conn)
            code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif (self._sees(conn, Op.IDEMPOTENT_WRITE, R.CLUSTER, _CLUSTER)
              or self.authorizer.any_allowed(conn.principal, conn.address, Op.WRITE, R.TOPIC)):
            return await serve(request, conn)
        else:
            self.authorizer.refused(conn.protocol, conn.principal, conn.peer, Op.IDEMPOTENT_WRITE, R.CLUSTER, _CLUSTER)
            code = E.CLUSTER_AUTHORIZATION_FAILED
        return A.InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)

    async def _add_partitions(self, request, conn, serve):
        body = request.body
        if request.api_version >= 4:  # several transactions, verify-only: a broker's request (ClusterAction)
            if self._may(conn, Op.CLUSTER_ACTION, R.CLUSTER, _CLUSTER):
                return await serve(request, conn)
            return X.AddPartitionsToTxnResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED)
        if self._txn_id_refused(conn, body.transactional_id):
            code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return X.AddPartitionsToTxnResponse(results=[_error_topic(_ADD_PARTITIONS, t.name, list(t.partitions), code)
                                                         for t in body.topics])
        denied = {t.name for t in body.topics if not self._may(conn, Op.WRITE, R.TOPIC, t.name)}
        if not denied:
            return await serve(request, conn)
        return X.AddPartitionsToTxnResponse(results=[  # nothing is added when one topic is refused (Kafka)
            _error_topic(_ADD_PARTITIONS, t.name, list(t.partitions),
                         E.TOPIC_AUTHORIZATION_FAILED if t.name in denied else E.OPERATION_NOT_ATTEMPTED)
            for t in body.topics])

    async def _add_offsets(self, request, conn, serve):
        body = request.body
        if self._txn_id_refused(conn, body.transactional_id):
            return X.AddOffsetsToTxnResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self._may(conn, Op.READ, R.GROUP, body.group_id):
            return X.AddOffsetsToTxnResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)
        return await serve(request, conn)

    async def _end_txn(self, request, conn, serve):
        if self._txn_id_refused(conn, request.body.transactional_id):
            return X.EndTxnResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return await serve(request, conn)

    async def _txn_offset_commit(self, request, conn, serve):
        body = request.body
        code = None
        if self._txn_id_refused(conn, body.transactional_id):
            code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self._may(conn, Op.READ, R.GROUP, body.group_id):
            code = E.GROUP_AUTHORIZATION_FAILED
        return await self._by_topic(request, conn, serve, _TXN_OFFSET_COMMIT, Op.READ, X.TxnOffsetCommitResponse,
                                    refused_code=code)
