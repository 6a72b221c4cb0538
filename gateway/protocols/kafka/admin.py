"""The Kafka APIs about the cluster and its topics: ApiVersions, Metadata (with auto-creation), CreateTopics,
DeleteTopics, DeleteRecords, CreatePartitions, DescribeLogDirs, DescribeCluster. This broker is node 0 and the
controller; every partition's leader is node 0. (The config APIs are in `configs`, DeleteGroups and OffsetDelete
in `group_admin`.)

Partition counts are never cached here: Metadata, and every handler, read the engine's topics at each request, so
partitions CreatePartitions adds are visible to the next request."""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import cluster as K
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.connection import EncodedBody, encode_body
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.primitives import ZERO_UUID

from ...errors import FAILURES, ErrorKind, kind_of
from ...topic_admin import validate_topic_name
from .configs import created_topic_configs
from .errors import error_code
from .topic_ids import topic_of, wire_id

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

log = logging.getLogger("logway.gateway.kafka")

CLUSTER_ID = "logway"
#: DeleteRecords' low watermark of a partition that answers an error (Kafka's INVALID_LOW_WATERMARK).
INVALID_LOW_WATERMARK = -1
#: Kafka's "authorized operations not requested / not known" marker (INT32_MIN): there are no ACLs here.
OPERATIONS_UNKNOWN = -2147483648


#: The ApiVersions answer by (table served, request version), encoded once: it never changes (every client asks on
#: every connection).
_API_VERSIONS: dict[tuple[int, int], EncodedBody] = {}
#: What a client may call its software (KIP-511's rule, which Kafka enforces): letters, digits, "-" and ".", starting
#: and ending with a letter or digit. 64 characters at most here: the names become metric labels.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]{0,62}[a-zA-Z0-9])?")


def _software(name: str, version: str) -> str:
    """"name/version" for the logs and metrics; a name or version outside KIP-511's rule is "unknown" (Kafka refuses
    the request; we answer it, as the rule only protects the metrics)."""
    if _SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version):
        return f"{name}/{version}"
    return "unknown"


async def api_versions(broker: "BrokerState", body, version, conn):
    if version >= 3 and conn.client_software is None:  # KIP-511: the client names its library
        conn.client_software = _software(body.client_software_name, body.client_software_version)
        log.debug("%s: Kafka client %s (client id %r)", conn.peer, conn.client_software, conn.client_id)
    served = broker.served
    answer = _API_VERSIONS.get((id(served), version))
    if answer is not None:
        return answer
    keys = [V.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(served.items())]
    response = V.ApiVersionsResponse(error_code=E.NONE, api_keys=keys, throttle_time_ms=0)
    if version not in V.RESPONSE_SCHEMAS:  # an unsupported version: the codec answers in the v0 layout with these keys
        return response
    answer = _API_VERSIONS[(id(served), version)] = encode_body(V.API_KEY, version, response)
    return answer


async def metadata(broker: "BrokerState", body, version, conn):
    """Brokers and topics; v10+ tell each topic's id and take topics by id (an unknown id: UNKNOWN_TOPIC_ID, with
    no name from v12), v13 a top-level error code (always none here)."""
    topics_, kafka = broker.steps.topics, broker.config.kafka
    if body.topics is None or (version == 0 and not body.topics):
        names = [t.name for t in topics_.all()]
    else:
        names = []
        for t in body.topics:
            if t.name is None:  # by id (v10+)
                topic = topic_of(topics_, t.topic_id)
                names.append(topic.name if topic is not None else t.topic_id)
            else:
                names.append(t.name)
    allow_create = kafka.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
    topics = []
    for name in names:
        if isinstance(name, bytes):  # an id no topic has
            topics.append(M.MetadataResponseTopic(error_code=E.UNKNOWN_TOPIC_ID, name=None if version >= 12 else "",
                                                  topic_id=name, is_internal=False, partitions=[]))
            continue
        topic = topics_.get(name)
        if topic is None:
            error = E.UNKNOWN_TOPIC_OR_PARTITION
            try:
                validate_topic_name(name)
                if allow_create:
                    topic = await topics_.create(name, kafka.default_partitions)
            except FAILURES as exc:  # an invalid name, or creation failed (or another request created it)
                if kind_of(exc) is ErrorKind.TOPIC_EXISTS:
                    topic = topics_.get(name)
                else:
                    error = error_code(exc)
            if topic is None:
                topics.append(M.MetadataResponseTopic(error_code=error, name=name, is_internal=False,
                                                      partitions=[]))
                continue
        node = broker.node_id
        parts = [M.MetadataResponsePartition(error_code=E.NONE, partition_index=p, leader_id=node, leader_epoch=0,
                                             replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
                 for p in range(len(topic.partitions))]
        topics.append(M.MetadataResponseTopic(error_code=E.NONE, name=topic.name, topic_id=wire_id(topic),
                                              is_internal=False, partitions=parts))
    host, port = broker.advertised
    return M.MetadataResponse(throttle_time_ms=0, cluster_id=CLUSTER_ID, controller_id=broker.node_id,
                              brokers=[M.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port,
                                                                rack=None)],
                              topics=topics, error_code=E.NONE)


async def create_topics(broker: "BrokerState", body, version, conn):
    """v5+ answer each created (or validated) topic's partitions, replication factor and settings, v7 its id."""
    results = []
    validate_only = body.validate_only if version >= 1 else False
    for t in body.topics:
        code, message = await _create_one(broker, t, validate_only)
        result = A.CreatableTopicResult(name=t.name, error_code=code, error_message=message)
        if code == E.NONE and version >= 5:
            configs = {c.name: c.value for c in t.configs}
            topic = None if validate_only else broker.steps.topics.get(t.name)
            result.topic_id = wire_id(topic)
            result.num_partitions = len(topic.partitions) if topic is not None else _partitions(broker, t)
            result.replication_factor = 1
            result.configs = created_topic_configs(broker.steps.topics, configs)
        results.append(result)
    return A.CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _partitions(broker: "BrokerState", t) -> int:
    """The partitions CreateTopics asks for: the assignments', the count given, or the default (-1)."""
    if t.assignments:
        return len(t.assignments)
    return broker.config.kafka.default_partitions if t.num_partitions == -1 else t.num_partitions


async def _create_one(broker: "BrokerState", t, validate_only: bool):
    node = broker.node_id
    partitions = _partitions(broker, t)
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            return E.INVALID_REQUEST, "give either assignments or num_partitions/replication_factor, not both"
        if sorted(a.partition_index for a in t.assignments) != list(range(partitions)):
            return E.INVALID_REPLICA_ASSIGNMENT, "assigned partitions must be 0..n-1, each once"
        if any(set(a.broker_ids) - {node} for a in t.assignments):
            return E.INVALID_REPLICATION_FACTOR, f"only broker {node} exists"
    if t.replication_factor not in (-1, 1) and not t.assignments:
        return E.INVALID_REPLICATION_FACTOR, "replication factor must be 1 (this is a single broker)"
    configs = {c.name: c.value for c in t.configs}
    topics = broker.steps.topics
    try:
        topics.check_new(t.name, partitions, configs)
        await topics.create(t.name, partitions, configs, validate_only=validate_only)
    except FAILURES as exc:
        if kind_of(exc) is ErrorKind.TOPIC_EXISTS:
            return E.TOPIC_ALREADY_EXISTS, f"topic '{t.name}' already exists"
        return error_code(exc), str(exc)
    return E.NONE, None


async def delete_topics(broker: "BrokerState", body, version, conn):
    """By name, or (v6+) by name or id: an id no topic has is UNKNOWN_TOPIC_ID; v5+ say why in a message."""
    if version >= 6:
        asked = [(t.name, t.topic_id) for t in body.topics]
    else:
        asked = [(name, ZERO_UUID) for name in body.topic_names]
    results = []
    for name, topic_id in asked:
        code, message = E.NONE, None
        if name is None:  # by id
            topic = topic_of(broker.steps.topics, topic_id)
            if topic is None:
                results.append(A.DeletableTopicResult(name=None, topic_id=topic_id, error_code=E.UNKNOWN_TOPIC_ID,
                                                      error_message="no topic has this id"))
                continue
            name = topic.name
        else:
            topic_id = wire_id(broker.steps.topics.get(name))
        try:
            await broker.steps.topics.delete(name)
            broker.producers.forget(name)
        except FAILURES as exc:
            code, message = error_code(exc), str(exc)
        results.append(A.DeletableTopicResult(name=name, topic_id=topic_id, error_code=code, error_message=message))
    return A.DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def delete_records(broker: "BrokerState", body, version, conn):
    """Move each partition's log start offset up to the offset given (-1: the high watermark), durably. An offset
    past the high watermark (or negative other than -1) is OFFSET_OUT_OF_RANGE; one at or below the log start
    changes nothing and answers the current start."""
    steps = broker.steps
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            code, low = E.NONE, INVALID_LOW_WATERMARK
            try:
                low = await steps.topics.delete_records(steps.partition(t.name, p.partition_index), p.offset)
            except FAILURES as exc:
                code = error_code(exc)
            parts.append(A.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=low,
                                                        error_code=code))
        topics.append(A.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return A.DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


async def create_partitions(broker: "BrokerState", body, version, conn):
    names = Counter(t.name for t in body.topics)
    results = []
    for t in body.topics:
        if names[t.name] > 1:
            code, message = E.INVALID_REQUEST, "duplicate topic in request"
        else:
            code, message = await _grow(broker, t, body.validate_only)
        results.append(A.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
    return A.CreatePartitionsResponse(throttle_time_ms=0, results=results)


async def _grow(broker: "BrokerState", t, validate_only: bool) -> tuple[int, str | None]:
    """One topic of CreatePartitions: `count` is the new total. Manual assignments must name this broker alone
    (replication factor 1), one list per new partition."""
    topics, node = broker.steps.topics, broker.node_id
    try:
        if t.assignments is not None:
            topic = topics.topic(t.name)
            topics.check_partitions(t.name, t.count)  # the count first: UnknownTopic, InvalidPartitions
            added = t.count - len(topic.partitions)
            if len(t.assignments) != added:
                given = len(t.assignments)
                return E.INVALID_REPLICA_ASSIGNMENT, f"{added} partition(s) added but {given} assignment(s) given"
            unknown = sorted({b for a in t.assignments for b in a.broker_ids} - {node})
            if unknown:
                listed = ", ".join(map(str, unknown))
                return E.INVALID_REPLICA_ASSIGNMENT, f"unknown broker(s) in assignment: {listed} (only {node} exists)"
            if any(len(a.broker_ids) != 1 for a in t.assignments):
                return E.INVALID_REPLICA_ASSIGNMENT, f"each new partition must have one replica: broker {node}"
        await topics.create_partitions(t.name, t.count, validate_only=validate_only)
    except FAILURES as exc:
        return error_code(exc), str(exc)
    return E.NONE, None


async def describe_log_dirs(broker: "BrokerState", body, version, conn):
    """One log directory, the data directory, with the size of every partition asked for (null: all of them;
    partitions we do not have are left out, as Kafka does). No replicas, so no lag and no future logs."""
    topics = broker.steps.topics
    usage, space = await topics.disk_usage()  # (space, v4+: the file system's total and free)
    if body.topics is None:
        wanted = sorted(usage)
    else:
        wanted = list(dict.fromkeys((t.topic, p) for t in body.topics for p in t.partitions if (t.topic, p) in usage))
    by_topic: dict[str, list] = {}
    for topic, partition in wanted:
        by_topic.setdefault(topic, []).append(K.DescribeLogDirsPartition(
            partition_index=partition, partition_size=usage[(topic, partition)], offset_lag=0, is_future_key=False))
    result = K.DescribeLogDirsResult(error_code=E.NONE, log_dir=topics.data_dir, topics=[
        K.DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
        total_bytes=space.f_blocks * space.f_frsize, usable_bytes=space.f_bavail * space.f_frsize)
    return K.DescribeLogDirsResponse(throttle_time_ms=0, error_code=E.NONE, results=[result])


async def describe_cluster(broker: "BrokerState", body, version, conn):
    host, port = broker.advertised
    if version >= 1 and body.endpoint_type != K.ENDPOINT_BROKERS:  # no KRaft controllers here
        return K.DescribeClusterResponse(throttle_time_ms=0, error_code=E.UNSUPPORTED_ENDPOINT_TYPE,
                                         error_message=f"endpoint type {body.endpoint_type} is not served here",
                                         endpoint_type=body.endpoint_type, cluster_id=CLUSTER_ID)
    return K.DescribeClusterResponse(
        throttle_time_ms=0, error_code=E.NONE, error_message=None, cluster_id=CLUSTER_ID,
        controller_id=broker.node_id,
        brokers=[K.DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_authorized_operations=OPERATIONS_UNKNOWN)
