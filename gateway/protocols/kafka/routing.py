"""The Kafka broker as one member of a cluster (`logway.gateway.cluster`; `workers: N` > 1 today): node i of N
brokers, each the leader of the partitions its member leads — Kafka's answers of the cluster seam. Nothing here
runs with one process (`KafkaBroker.cluster` is None).

What changes for the clients, API by API (the rest is answered as by a single broker, for this worker's
partitions — DescribeLogDirs, for instance):

- Metadata lists every worker as a broker (node id = worker index, its advertised Kafka address), node 0 as the
  controller, and each partition with its owner as leader, only replica and ISR. It first catches up with topics
  the other workers created or changed (`WorkerRole.refresh`).
- Produce, Fetch, ListOffsets and DeleteRecords: partitions of other workers are answered NOT_LEADER_OR_FOLLOWER
  (the client refreshes its metadata and goes to the leader), the rest as usual; a Fetch that names any of them
  does not wait (max_wait 0) so the error goes out at once. A topic or partition this worker does not know yet is
  looked up on disk first.
- FindCoordinator: node 0 for every group (and transactional id). The group APIs (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, DeleteGroups, OffsetDelete, and KIP-848's
  ConsumerGroupHeartbeat and ConsumerGroupDescribe) sent to another worker are NOT_COORDINATOR; ListGroups there
  lists nothing (each broker lists the groups it coordinates).
- DeleteTopics goes to the controller (worker 0, which owns the offset store the topic's offsets leave):
  NOT_CONTROLLER elsewhere. So do CreateAcls, DeleteAcls, AlterUserScramCredentials and AlterClientQuotas (worker 0
  writes the security store, which the others read again every `worker_refresh_ms`); they are described anywhere.
  CreateTopics and CreatePartitions work on every worker (the engine serializes topic changes across workers).
- Transactions: node 0 is every transactional id's coordinator (`transactions.py`, `cluster/txn_peers.py`):
  InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit sent to
  another worker are NOT_COORDINATOR. Transactional batches go to the partitions' leaders as usual; a leader accepts
  them once the coordinator confirms the partition is in the open transaction. Without the native listener (whose relay
  sockets carry those requests) transactional producers are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
  Idempotent producers work: each worker hands out producer ids from its own range.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import acls as ACL
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import cluster as K
from logway.codecs.kafka.api import consumer_groups as CG
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api import quotas as Q
from logway.codecs.kafka.api import scram_credentials as S
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.error_codes import ErrorCode as E

from .groups import coordinator_answer
from .topic_ids import BY_ID_SINCE, UNKNOWN, name_topics

if TYPE_CHECKING:  # pragma: no cover
    from ...cluster.seam import Cluster
    from .state import BrokerState

log = logging.getLogger("logway.gateway.kafka")

__all__ = ["KafkaRouting"]


class _Routed:
    """How to split one partitioned API between this worker's partitions and the others': the request's and the
    response's field names, and the answer for a partition of another worker."""

    def __init__(self, topics, name, parts, index, r_topics, r_name, r_parts, r_index, topic_cls, error) -> None:
        self.topics, self.name, self.parts, self.index = topics, name, parts, index
        self.r_topics, self.r_name, self.r_parts, self.r_index = r_topics, r_name, r_parts, r_index
        self.topic_cls = topic_cls
        self.error = error  # partition number -> the response entry saying NOT_LEADER_OR_FOLLOWER


_NOT_LEADER = E.NOT_LEADER_OR_FOLLOWER
ROUTED = {
    P.API_KEY: _Routed("topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses",
                       "index", P.TopicProduceResponse,
                       lambda p: P.PartitionProduceResponse(index=p, error_code=_NOT_LEADER, base_offset=-1,
                                                            log_append_time_ms=-1, log_start_offset=-1)),
    F.API_KEY: _Routed("topics", "topic", "partitions", "partition", "responses", "topic", "partitions",
                       "partition_index", F.FetchableTopicResponse,
                       lambda p: F.PartitionData(partition_index=p, error_code=_NOT_LEADER, high_watermark=-1,
                                                 last_stable_offset=-1, log_start_offset=-1,
                                                 aborted_transactions=None, preferred_read_replica=-1, records=b"")),
    L.API_KEY: _Routed("topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                       "partition_index", L.ListOffsetsTopicResponse,
                       lambda p: L.ListOffsetsPartitionResponse(partition_index=p, error_code=_NOT_LEADER,
                                                                timestamp=-1, offset=-1, leader_epoch=-1,
                                                                old_style_offsets=[])),
    A.DELETE_RECORDS_KEY: _Routed("topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                                  "partition_index", A.DeleteRecordsTopicResult,
                                  lambda p: A.DeleteRecordsPartitionResult(partition_index=p, low_watermark=-1,
                                                                           error_code=_NOT_LEADER)),
}

_NC = E.NOT_COORDINATOR
_NCTL = E.NOT_CONTROLLER

#: The security administration's changes are the controller's (worker 0 writes the store the others read):
#: elsewhere, NOT_CONTROLLER for every item. (Describing them works on every worker.)
NOT_CONTROLLER = {
    ACL.CREATE_ACLS_KEY: lambda body: ACL.CreateAclsResponse(results=[
        ACL.AclCreationResult(_NCTL, "ACLs are changed by node 0") for _ in body.creations]),
    ACL.DELETE_ACLS_KEY: lambda body: ACL.DeleteAclsResponse(filter_results=[
        ACL.DeleteAclsFilterResult(_NCTL, "ACLs are changed by node 0") for _ in body.filters]),
    S.ALTER_USER_SCRAM_CREDENTIALS_KEY: lambda body: S.AlterUserScramCredentialsResponse(results=[
        S.AlterUserScramCredentialsResult(user, _NCTL, "credentials are changed by node 0")
        for user in dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])]),
    Q.ALTER_CLIENT_QUOTAS_KEY: lambda body: Q.AlterClientQuotasResponse(entries=[
        Q.AlterEntryResult(_NCTL, "quotas are changed by node 0", e.entity) for e in body.entries]),
}


def _not_coordinator_commit(body):
    return O.OffsetCommitResponse(throttle_time_ms=0, topics=[
        O.OffsetCommitResponseTopic(name=t.name, partitions=[
            O.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=_NC) for p in t.partitions])
        for t in body.topics])


def _not_coordinator_fetch(body):
    def topics(asked):
        return [O.OffsetFetchResponseTopic(name=t.name, partitions=[
            O.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata="", error_code=_NC)
            for p in t.partition_indexes]) for t in asked or []]
    # (v0-v7 answer one group's topics, v8+ each group's: the version's fields are the ones written)
    return O.OffsetFetchResponse(throttle_time_ms=0, error_code=_NC, topics=topics(body.topics), groups=[
        O.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics(g.topics), error_code=_NC)
        for g in body.groups])


#: The group APIs, answered NOT_COORDINATOR by every worker but the coordinator.
NOT_COORDINATOR = {
    O.OFFSET_COMMIT_KEY: _not_coordinator_commit,
    O.OFFSET_FETCH_KEY: _not_coordinator_fetch,
    G.JOIN_GROUP_KEY: lambda body: G.JoinGroupResponse(throttle_time_ms=0, error_code=_NC, generation_id=-1,
                                                       protocol_name="", leader="", member_id=body.member_id,
                                                       members=[]),
    G.SYNC_GROUP_KEY: lambda body: G.SyncGroupResponse(throttle_time_ms=0, error_code=_NC, assignment=b""),
    G.HEARTBEAT_KEY: lambda body: G.HeartbeatResponse(throttle_time_ms=0, error_code=_NC),
    G.LEAVE_GROUP_KEY: lambda body: G.LeaveGroupResponse(throttle_time_ms=0, error_code=_NC, members=[]),
    G.DESCRIBE_GROUPS_KEY: lambda body: G.DescribeGroupsResponse(throttle_time_ms=0, groups=[
        G.DescribedGroup(error_code=_NC, group_id=g, group_state="", protocol_type="", protocol_data="", members=[],
                         authorized_operations=-2147483648) for g in body.groups]),
    G.LIST_GROUPS_KEY: lambda body: G.ListGroupsResponse(throttle_time_ms=0, error_code=E.NONE, groups=[]),
    G.DELETE_GROUPS_KEY: lambda body: G.DeleteGroupsResponse(throttle_time_ms=0, results=[
        G.DeletableGroupResult(group_id=g, error_code=_NC) for g in body.groups_names]),
    O.OFFSET_DELETE_KEY: lambda body: O.OffsetDeleteResponse(error_code=_NC, throttle_time_ms=0, topics=[]),
    CG.CONSUMER_GROUP_HEARTBEAT_KEY: lambda body: CG.ConsumerGroupHeartbeatResponse(
        error_code=_NC, error_message="the group coordinator is node 0"),
    CG.CONSUMER_GROUP_DESCRIBE_KEY: lambda body: CG.ConsumerGroupDescribeResponse(groups=[
        CG.DescribedConsumerGroup(error_code=_NC, group_id=g) for g in body.group_ids]),
    # the transaction coordinator's (worker 0's too)
    X.ADD_PARTITIONS_TO_TXN_KEY: lambda body: X.AddPartitionsToTxnResponse(throttle_time_ms=0, results=[
        X.AddPartitionsToTxnTopicResult(name=t.name, results=[
            X.AddPartitionsToTxnPartitionResult(partition_index=p, error_code=_NC) for p in t.partitions])
        for t in body.topics]),
    X.ADD_OFFSETS_TO_TXN_KEY: lambda body: X.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_NC),
    X.END_TXN_KEY: lambda body: X.EndTxnResponse(throttle_time_ms=0, error_code=_NC),
    X.TXN_OFFSET_COMMIT_KEY: lambda body: X.TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        X.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            X.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=_NC)
            for p in t.partitions])
        for t in body.topics]),
}


class KafkaRouting:
    """Routing for a Kafka broker that is member `cluster.me` of a cluster (see the module docstring)."""

    def __init__(self, cluster: "Cluster") -> None:
        self.cluster = cluster
        self.node_id = cluster.me
        self._refused_transactions = False

    def leader(self, topic: str, partition: int) -> int:
        return self.cluster.leader(topic, partition)

    def brokers(self, broker: "BrokerState") -> list[tuple[int, str, int]]:
        """(node id, host, port) of every member's Kafka listener (only this one until the others are known)."""
        return self.cluster.brokers(broker.advertised)

    def _broker(self, broker: "BrokerState", node: int) -> tuple[int, str, int]:
        """(node id, host, port) of member `node` (this one's, until the others are known)."""
        brokers = self.brokers(broker)
        return next((b for b in brokers if b[0] == node), brokers[0])

    async def handle(self, broker: "BrokerState", request, conn, handlers):
        key, body, version = request.api_key, request.body, request.api_version
        if key in BY_ID_SINCE and version >= BY_ID_SINCE[key] and _names_unknown_id(key, body):
            await self.cluster.refresh()  # a topic another worker created? (its id is news here)
            name_topics(broker.steps.topics, key, version, body)
        if key in ROUTED:
            return await self._routed(broker, ROUTED[key], handlers[key], request, conn)
        if key in NOT_COORDINATOR and self.node_id != self.cluster.coordinator():
            return NOT_COORDINATOR[key](body)
        if key == O.OFFSET_COMMIT_KEY:  # a topic another worker created a moment ago?
            await self.cluster.look_up_unknown([(t.name, None) for t in body.topics])
        if key in NOT_CONTROLLER and self.node_id != self.cluster.controller:
            return NOT_CONTROLLER[key](body)
        if key == A.DELETE_TOPICS_KEY and self.node_id != self.cluster.controller:
            return A.DeleteTopicsResponse(throttle_time_ms=0, responses=[
                A.DeletableTopicResult(name=name, error_code=E.NOT_CONTROLLER) for name in body.topic_names])
        if key == A.INIT_PRODUCER_ID_KEY and body.transactional_id is not None:
            if self.node_id != self.cluster.coordinator():
                return A.InitProducerIdResponse(throttle_time_ms=0, error_code=_NC, producer_id=-1, producer_epoch=-1)
            if broker.transactions.peers is None:  # no native relay sockets to reach the partitions' owners
                if not self._refused_transactions:
                    self._refused_transactions = True
                    log.warning("refusing transactional producers (transactional id %r): transactions across "
                                "members need the native listener enabled (its relay sockets carry the transaction "
                                "markers; see docs/scaling.md)", body.transactional_id)
                return A.InitProducerIdResponse(throttle_time_ms=0,
                                                error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                                                producer_epoch=-1)
        if key == CG.CONSUMER_GROUP_HEARTBEAT_KEY:  # subscribed topics another worker created or grew?
            await self.cluster.look_up_unknown([(t, None) for t in body.subscribed_topic_names or ()])
            await self.cluster.refresh()  # (rate-limited: partitions added, regex matches)
        if key in (X.ADD_PARTITIONS_TO_TXN_KEY, X.TXN_OFFSET_COMMIT_KEY):  # a topic another worker just created?
            await self.cluster.look_up_unknown([(t.name, None) for t in body.topics])
        if key == M.API_KEY:
            await self.cluster.look_up_unknown([(t.name, None) for t in body.topics or () if t.name is not None])
            if version >= 10 and any(t.name is None for t in body.topics or ()):
                await self.cluster.refresh(max_age=0)  # topics asked for by id: any worker's
            await self.cluster.refresh()
            return self._metadata(broker, await handlers[key](broker, body, version, conn))
        if key == G.FIND_COORDINATOR_KEY:
            keys = body.coordinator_keys if version >= 4 else [body.key]
            coordinator = self._broker(broker, self.cluster.coordinator())
            return coordinator_answer(version, body.key_type, keys, coordinator)
        if key == K.DESCRIBE_CLUSTER_KEY:
            response = await handlers[key](broker, body, version, conn)
            if response.error_code == E.NONE:
                response.controller_id = self.cluster.controller
                response.brokers = [K.DescribeClusterBroker(broker_id=node, host=host, port=port, rack=None)
                                    for node, host, port in self.brokers(broker)]
            return response
        return await handlers[key](broker, body, version, conn)

    def _metadata(self, broker: "BrokerState", response):
        response.controller_id = self.cluster.controller
        response.brokers = [M.MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)
                            for node, host, port in self.brokers(broker)]
        for topic in response.topics:
            for p in topic.partitions:
                leader = self.leader(topic.name, p.partition_index)
                if leader < 0:  # (no live member leads it for a moment: a dead one's before its lease passed)
                    p.leader_id, p.replica_nodes, p.isr_nodes = -1, [], []
                    if p.error_code == E.NONE:
                        p.error_code = E.LEADER_NOT_AVAILABLE
                else:
                    p.leader_id, p.replica_nodes, p.isr_nodes = leader, [leader], [leader]
        return response

    async def _routed(self, broker: "BrokerState", api: _Routed, handler, request, conn):
        """Serve this worker's partitions of the request; answer the others NOT_LEADER_OR_FOLLOWER."""
        body = request.body
        topics_now = broker.steps.topics.names
        topics = getattr(body, api.topics)
        # created or grown by another worker a moment ago?
        await self.cluster.look_up_unknown([(getattr(t, api.name), getattr(p, api.index))
                                            for t in topics for p in getattr(t, api.parts)])
        ours, theirs = [], set()
        for t in topics:
            name = getattr(t, api.name)
            mine = []
            for p in getattr(t, api.parts):
                number = getattr(p, api.index)
                if self._known(topics_now, name, number) and self.leader(name, number) != self.node_id:
                    theirs.add((name, number))
                else:  # ours, or unknown here too: the handler answers UNKNOWN_TOPIC_OR_PARTITION
                    mine.append(p)
            if mine:
                ours.append(replace(t, **{api.parts: mine}))
        if not theirs:
            return await handler(broker, body, request.api_version, conn)
        changes = {api.topics: ours}
        if request.api_key == F.API_KEY:
            changes["max_wait_ms"] = 0  # the client must hear about the other leaders now
        response = None
        if ours:
            response = await handler(broker, replace(body, **changes), request.api_version, conn)
            if response is None:  # a Produce with acks=0
                return None
        elif request.api_key == P.API_KEY and body.acks == 0:
            return None
        answered = {}
        if response is not None:
            for rt in getattr(response, api.r_topics):
                for rp in getattr(rt, api.r_parts):
                    answered[getattr(rt, api.r_name), getattr(rp, api.r_index)] = rp
        else:
            response = _empty_response(request.api_key)
        # Every partition asked about, in the request's order.
        out = []
        for t in topics:
            name = getattr(t, api.name)
            parts = []
            for p in getattr(t, api.parts):
                number = getattr(p, api.index)
                entry = api.error(number) if (name, number) in theirs else answered.get((name, number))
                if entry is not None:
                    parts.append(entry)
            entry = api.topic_cls(**{api.r_name: name, api.r_parts: parts})
            if hasattr(t, "topic_id"):  # (Produce, Fetch: v13+ name topics by id)
                entry.topic_id = t.topic_id
            out.append(entry)
        setattr(response, api.r_topics, out)
        return response

    @staticmethod
    def _known(topics_now, topic: str, partition: int) -> bool:
        t = topics_now.get(topic)
        return t is not None and 0 <= partition < len(t.partitions)


def _names_unknown_id(api_key: int, body) -> bool:
    """Whether a request naming topics by id named one this worker does not know (see `topic_ids`)."""
    topics = body.topic_data if api_key == P.API_KEY else body.topics
    return any((t.name if api_key == P.API_KEY else t.topic) == UNKNOWN for t in topics)


def _empty_response(api_key: int):
    if api_key == P.API_KEY:
        return P.ProduceResponse(responses=[], throttle_time_ms=0)
    if api_key == F.API_KEY:
        return F.FetchResponse(throttle_time_ms=0, error_code=E.NONE, session_id=0, responses=[])
    if api_key == L.API_KEY:
        return L.ListOffsetsResponse(throttle_time_ms=0, topics=[])
    return A.DeleteRecordsResponse(throttle_time_ms=0, topics=[])
