"""The Kafka APIs about the cluster and its topics: ApiVersions, Metadata (with auto-creation), CreateTopics,
DeleteTopics and InitProducerId. This broker is node 0 and the controller; every partition's leader is node 0."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api.registry import SUPPORTED
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.storage import InvalidPartitions, TopicExists, UnknownTopic, validate_topic_name

from ...errors import FAILURES
from .errors import error_code

if TYPE_CHECKING:  # pragma: no cover
    from .broker import KafkaBroker

CLUSTER_ID = "logway"
#: Producer ids named by a transactional id live above this; allocated ids (logway.storage.sequences) stay below.
STABLE_ID_BASE = 2**62


async def api_versions(broker: "KafkaBroker", body, version, conn):
    keys = [V.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED.items())]
    return V.ApiVersionsResponse(error_code=E.NONE, api_keys=keys, throttle_time_ms=0)


async def metadata(broker: "KafkaBroker", body, version, conn):
    engine, kafka = broker.engine, broker.config.kafka
    if body.topics is None or (version == 0 and not body.topics):
        names = [t.name for t in engine.topics()]
    else:
        names = [t.name for t in body.topics]
    allow_create = kafka.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
    topics = []
    for name in names:
        topic = engine.topics_by_name.get(name)
        if topic is None:
            error = E.UNKNOWN_TOPIC_OR_PARTITION
            try:
                validate_topic_name(name)
                if allow_create:
                    topic = await broker.steps.in_thread(engine.create_topic, name, kafka.default_partitions)
            except TopicExists:
                topic = engine.topics_by_name.get(name)
            except FAILURES as exc:  # an invalid name, or creation failed
                error = error_code(exc)
            if topic is None:
                topics.append(M.MetadataResponseTopic(error_code=error, name=name, is_internal=False,
                                                      partitions=[]))
                continue
        node = broker.node_id
        parts = [M.MetadataResponsePartition(error_code=E.NONE, partition_index=p, leader_id=node, leader_epoch=0,
                                             replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
                 for p in range(len(topic.partitions))]
        topics.append(M.MetadataResponseTopic(error_code=E.NONE, name=topic.name, is_internal=False,
                                              partitions=parts))
    host, port = broker.advertised
    return M.MetadataResponse(throttle_time_ms=0, cluster_id=CLUSTER_ID, controller_id=broker.node_id,
                              brokers=[M.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port,
                                                                rack=None)],
                              topics=topics)


async def create_topics(broker: "KafkaBroker", body, version, conn):
    results = []
    for t in body.topics:
        code, message = await _create_one(broker, t, body.validate_only if version >= 1 else False)
        results.append(A.CreatableTopicResult(name=t.name, error_code=code, error_message=message))
    return A.CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def _create_one(broker: "KafkaBroker", t, validate_only: bool):
    node = broker.node_id
    partitions = broker.config.kafka.default_partitions if t.num_partitions == -1 else t.num_partitions
    if t.assignments:
        partitions = len(t.assignments)
        if t.num_partitions != -1 or t.replication_factor != -1:
            return E.INVALID_REQUEST, "give either assignments or num_partitions/replication_factor, not both"
        if sorted(a.partition_index for a in t.assignments) != list(range(partitions)):
            return E.INVALID_REPLICA_ASSIGNMENT, "assigned partitions must be 0..n-1, each once"
        if any(set(a.broker_ids) - {node} for a in t.assignments):
            return E.INVALID_REPLICATION_FACTOR, f"only broker {node} exists"
    if t.replication_factor not in (-1, 1) and not t.assignments:
        return E.INVALID_REPLICATION_FACTOR, "replication factor must be 1 (this is a single broker)"
    configs = {c.name: c.value for c in t.configs}
    engine = broker.engine
    try:
        validate_topic_name(t.name)
        if t.name in engine.topics_by_name:
            raise TopicExists(f"topic '{t.name}' already exists")
        if partitions < 1:
            raise InvalidPartitions(f"partition count {partitions} must be at least 1")
        engine.defaults.with_overrides(configs)
        if not validate_only:
            await broker.steps.in_thread(engine.create_topic, t.name, partitions, configs)
    except TopicExists:
        return E.TOPIC_ALREADY_EXISTS, f"topic '{t.name}' already exists"
    except FAILURES as exc:
        return error_code(exc), str(exc)
    return E.NONE, None


async def delete_topics(broker: "KafkaBroker", body, version, conn):
    results = []
    for name in body.topic_names:
        code = E.NONE
        try:
            await broker.steps.in_thread(broker.engine.delete_topic, name)
            broker.producers.forget(name)
        except UnknownTopic:
            code = E.UNKNOWN_TOPIC_OR_PARTITION
        except FAILURES as exc:
            code = error_code(exc)
        results.append(A.DeletableTopicResult(name=name, error_code=code))
    return A.DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def init_producer_id(broker: "KafkaBroker", body, version, conn):
    if body.transactional_id:
        # No transactions here: a transactional id only names a stable producer id (epoch 0), so a writer that
        # replays its batches under the same name (a retried Spark task) is recognised and not appended twice.
        # Clients that go on to use transactions fail at AddPartitionsToTxn (unsupported).
        return A.InitProducerIdResponse(throttle_time_ms=0, error_code=E.NONE,
                                        producer_id=stable_producer_id(body.transactional_id), producer_epoch=0)
    pid = await broker.steps.in_thread(broker.engine.producer_ids.next_id)
    return A.InitProducerIdResponse(throttle_time_ms=0, error_code=E.NONE, producer_id=pid, producer_epoch=0)


def stable_producer_id(name: str) -> int:
    """The producer id a transactional id always maps to (a 62-bit hash, above every allocated id)."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return STABLE_ID_BASE + int.from_bytes(digest, "big") % STABLE_ID_BASE
