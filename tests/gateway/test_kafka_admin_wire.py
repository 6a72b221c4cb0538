"""The Kafka admin APIs at the byte level (DeleteRecords 21, DescribeConfigs 32, AlterConfigs 33, DescribeLogDirs 35,
CreatePartitions 37, DeleteGroups 42, IncrementalAlterConfigs 44, OffsetDelete 47, DescribeCluster 60): every error
answer Kafka gives, validate_only, and malformed bodies that must close only their own connection."""

from __future__ import annotations

import socket
import struct

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import cluster as K
from logway.codecs.kafka.api import configs as C
from logway.codecs.kafka.api import fetch, list_offsets, metadata
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api.api_versions import ApiVersionsRequest
from logway.codecs.kafka.api.registry import SUPPORTED, is_flexible
from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record

from ..kafka_wire import KafkaWireClient
from ..kafka_wire import client  # noqa: F401 - the fixture
from ..kafka_wire import new_topic as _new_topic

NEW_KEYS = (21, 32, 33, 35, 37, 42, 44, 47, 60)

NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 3
INVALID_TOPIC_EXCEPTION, INVALID_GROUP_ID, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT = 17, 24, 37, 39
INVALID_CONFIG, INVALID_REQUEST, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 40, 42, 68, 69, 86
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("admin-wire") / "data")
    g = GatewayProcess(data, "log_level=ERROR", "storage.retention_ms=86400000", "kafka.default_partitions=2")
    yield g
    g.stop()


def new_topic(gw, partitions=1) -> str:
    return _new_topic(gw, partitions, prefix="a-")


def produce(client, topic, partition, n, first=0):
    for i in range(n):
        assert client.produce(topic, partition, encode_batch([Record(b"r%d" % (first + i))],
                                                             default_timestamp=1))[0] == NONE


# -- ApiVersions, DescribeCluster ----------------------------------------------------------------------------------

def test_new_keys_are_advertised_over_the_codec_range(client):
    resp = client.call(18, 2, ApiVersionsRequest())
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for key in NEW_KEYS:
        assert advertised[key] == SUPPORTED[key], key
    assert is_flexible(60, 0) and is_flexible(44, 1) and not is_flexible(44, 0)


def test_describe_cluster_flexible_v0(gw, client):
    for include in (False, True):
        resp = client.call(60, 0, K.DescribeClusterRequest(include_cluster_authorized_operations=include))
        assert (resp.error_code, resp.error_message, resp.cluster_id, resp.controller_id) == (NONE, None, "logway", 0)
        assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [(0, *gw.addresses["kafka"], None)]
        # asked, an open gateway (no authentication, no ACL) allows every cluster operation, as Kafka without an
        # authorizer: Create 5, Alter 7, Describe 8, ClusterAction 9, DescribeConfigs 10, AlterConfigs 11,
        # IdempotentWrite 12 (AclOperation codes, one bit each); not asked, INT32_MIN
        every = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
        assert resp.cluster_authorized_operations == (every if include else -2147483648)



def test_describe_cluster_v1_v2_endpoint_types(gw, client):
    for version in (1, 2):
        resp = client.call(60, version, K.DescribeClusterRequest(endpoint_type=K.ENDPOINT_BROKERS,
                                                                 include_fenced_brokers=True))
        assert (resp.error_code, resp.endpoint_type, resp.cluster_id) == (NONE, K.ENDPOINT_BROKERS, "logway")
        assert [(b.broker_id, b.is_fenced) for b in resp.brokers] == [(0, False)]
        resp = client.call(60, version, K.DescribeClusterRequest(endpoint_type=K.ENDPOINT_CONTROLLERS))
        assert resp.error_code == 115 and resp.brokers == []  # UNSUPPORTED_ENDPOINT_TYPE


# -- DescribeConfigs -----------------------------------------------------------------------------------------------

def _describe(client, *resources, version=3, synonyms=False, docs=False):
    body = C.DescribeConfigsRequest(resources=[C.DescribeConfigsResource(t, n, keys) for t, n, keys in resources],
                                    include_synonyms=synonyms, include_documentation=docs)
    return client.call(32, version, body).results


def _configs(result) -> dict:
    return {c.name: c for c in result.configs}


def test_describe_topic_configs_every_version(gw, client):
    topic = new_topic(gw)
    with NativeClient(*gw.native) as n:
        n.alter_topic_config(topic, {"segment.ms": 3_600_000})
    for version in range(4):
        [r] = _describe(client, (TOPIC, topic, None), version=version, synonyms=True, docs=True)
        assert (r.error_code, r.error_message, r.resource_type, r.resource_name) == (NONE, None, TOPIC, topic)
        cfg = _configs(r)
        assert set(cfg) == {"retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "index.interval.bytes",
                            "max.message.bytes", "storage.format", "cleanup.policy", "min.cleanable.dirty.ratio",
                            "min.compaction.lag.ms", "max.compaction.lag.ms", "delete.retention.ms"}
        assert (cfg["cleanup.policy"].value, cfg["min.cleanable.dirty.ratio"].value) == ("delete", "0.5")
        assert cfg["segment.ms"].value == "3600000" and cfg["retention.ms"].value == "86400000"
        assert cfg["storage.format"].value == "kafka" and cfg["storage.format"].read_only
        assert not cfg["retention.ms"].read_only and not any(c.is_sensitive for c in cfg.values())
        if version == 0:
            assert not cfg["segment.ms"].is_default and not cfg["retention.ms"].is_default
            assert cfg["retention.bytes"].is_default
            continue
        assert cfg["segment.ms"].config_source == C.ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert cfg["retention.ms"].config_source == C.ConfigSource.STATIC_BROKER_CONFIG  # storage.retention_ms
        assert cfg["retention.bytes"].config_source == C.ConfigSource.DEFAULT_CONFIG
        assert [(s.name, s.value, s.source) for s in cfg["segment.ms"].synonyms] == [
            ("segment.ms", "3600000", 1), ("log.roll.ms", "604800000", 5)]
        assert [(s.name, s.value, s.source) for s in cfg["retention.ms"].synonyms] == [
            ("log.retention.ms", "86400000", 4), ("log.retention.ms", "604800000", 5)]
        assert [(s.name, s.value, s.source) for s in cfg["cleanup.policy"].synonyms] == [
            ("log.cleanup.policy", "delete", 5)]
        if version == 3:
            assert cfg["retention.ms"].config_type == C.ConfigType.LONG and cfg["retention.ms"].documentation
            assert cfg["storage.format"].config_type == C.ConfigType.STRING
            assert cfg["cleanup.policy"].config_type == C.ConfigType.LIST
            assert cfg["min.cleanable.dirty.ratio"].config_type == C.ConfigType.DOUBLE
    [r] = _describe(client, (TOPIC, topic, None), version=1)  # without synonyms or documentation
    assert all(c.synonyms == [] for c in r.configs)
    [r] = _describe(client, (TOPIC, topic, None), version=3)
    assert all(c.documentation is None for c in r.configs)


def test_describe_configs_keys_and_errors(gw, client):
    topic = new_topic(gw)
    [r] = _describe(client, (TOPIC, topic, ["retention.ms", "no.such.key", "segment.bytes"]))
    assert r.error_code == NONE and sorted(_configs(r)) == ["retention.ms", "segment.bytes"]  # unknown keys left out
    [r] = _describe(client, (TOPIC, topic, []))  # an empty list: every key, as a null one
    assert len(r.configs) == 12
    unknown, invalid, dup1, dup2, logger, other = _describe(
        client, (TOPIC, "missing-" + topic, None), (TOPIC, "bad name!", None), (TOPIC, topic, None),
        (TOPIC, topic, None), (BROKER_LOGGER, "0", None), (99, "x", None))
    assert (unknown.error_code, unknown.configs) == (UNKNOWN_TOPIC_OR_PARTITION, [])
    assert "missing-" + topic in unknown.error_message
    assert invalid.error_code == INVALID_TOPIC_EXCEPTION and invalid.error_message
    assert dup1.error_code == dup2.error_code == INVALID_REQUEST
    assert logger.error_code == other.error_code == INVALID_REQUEST and "BROKER_LOGGER" in logger.error_message


def test_describe_broker_configs(gw, client):
    node, default, other, junk = _describe(client, (BROKER, "0", None), (BROKER, "", None), (BROKER, "1", None),
                                           (BROKER, "zero", None), synonyms=True, docs=True)
    assert node.error_code == default.error_code == NONE and len(node.configs) == len(default.configs)
    cfg = _configs(node)
    assert {"log.retention.ms", "log.segment.bytes", "message.max.bytes", "auto.create.topics.enable",
            "num.partitions", "group.min.session.timeout.ms", "group.max.session.timeout.ms",
            "transaction.max.timeout.ms", "log.dirs", "log.cleanup.policy", "log.cleaner.min.cleanable.ratio",
            "log.cleaner.delete.retention.ms", "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.dedupe.buffer.size", "log.cleaner.backoff.ms"} <= set(cfg)
    assert all(c.read_only for c in cfg.values())
    assert (cfg["log.retention.ms"].value, cfg["log.retention.ms"].config_source) == ("86400000", 4)
    assert (cfg["num.partitions"].value, cfg["num.partitions"].config_source) == ("2", 4)
    assert (cfg["auto.create.topics.enable"].value, cfg["auto.create.topics.enable"].config_source) == ("false", 5)
    assert cfg["log.dirs"].value == gw.data_dir
    assert other.error_code == junk.error_code == INVALID_REQUEST and "expected 0" in other.error_message
    [r] = _describe(client, (BROKER, "0", ["num.partitions"]), version=0)
    assert [(c.name, c.value, c.read_only, c.is_default) for c in r.configs] == [("num.partitions", "2", True, False)]


# -- AlterConfigs --------------------------------------------------------------------------------------------------

def _alter(client, *resources, validate_only=False, version=1):
    body = C.AlterConfigsRequest(resources=[
        C.AlterConfigsResource(t, n, [C.AlterableConfig(k, v) for k, v in configs]) for t, n, configs in resources],
        validate_only=validate_only)
    return client.call(33, version, body).responses


def _value(client, topic, key):
    [r] = _describe(client, (TOPIC, topic, [key]))
    [c] = r.configs
    return c.value, c.config_source


def test_alter_configs_replaces_the_overrides(gw, client):
    topic = new_topic(gw)
    for version in (0, 1):
        [r] = _alter(client, (TOPIC, topic, [("retention.ms", "1000"), ("segment.bytes", "1048576")]),
                     version=version)
        assert (r.error_code, r.error_message, r.resource_type, r.resource_name) == (NONE, None, TOPIC, topic)
        assert _value(client, topic, "retention.ms") == ("1000", 1)
    [r] = _alter(client, (TOPIC, topic, [("segment.bytes", "2097152"), ("max.message.bytes", None)]))
    assert r.error_code == NONE
    assert _value(client, topic, "retention.ms") == ("86400000", 4)  # left out: back to the broker's value
    assert _value(client, topic, "segment.bytes") == ("2097152", 1)
    with NativeClient(*gw.native) as n:
        assert {e.name: e.value for e in n.describe_topic_config(topic)}["segment.bytes"] == 2097152
    [r] = _alter(client, (TOPIC, topic, [("segment.bytes", "4194304")]), validate_only=True)
    assert r.error_code == NONE and _value(client, topic, "segment.bytes") == ("2097152", 1)


def test_alter_configs_errors(gw, client):
    topic = new_topic(gw)
    answers = _alter(
        client, (TOPIC, "missing-" + topic, [("retention.ms", "1")]), (TOPIC, topic + "x", [("nope", "1")]),
        (TOPIC, "bad name!", []), (BROKER, "0", [("log.retention.ms", "1")]), (BROKER, "7", []),
        (BROKER_LOGGER, "0", []))
    assert [r.error_code for r in answers] == [UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION,
                                               INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, INVALID_REQUEST,
                                               INVALID_REQUEST]
    assert "read-only" in answers[3].error_message
    [ok] = _alter(client, (BROKER, "0", []))  # nothing to change on the broker: fine
    assert ok.error_code == NONE
    for configs in ([("no.such.config", "1")], [("retention.ms", "soon")], [("segment.bytes", "10")],
                    [("storage.format", "tank")], [("retention.ms", "1"), ("nope", "2")]):
        [r] = _alter(client, (TOPIC, topic, configs))
        assert r.error_code == INVALID_CONFIG and r.error_message, configs
    [r] = _alter(client, (TOPIC, topic, [("retention.ms", "1"), ("retention.ms", "2")]))
    assert r.error_code == INVALID_REQUEST and "duplicate" in r.error_message
    a, b = _alter(client, (TOPIC, topic, [("retention.ms", "1")]), (TOPIC, topic, [("retention.ms", "2")]))
    assert a.error_code == b.error_code == INVALID_REQUEST
    [r] = _alter(client, (TOPIC, topic, [("storage.format", "kafka")]))  # unchanged: accepted
    assert r.error_code == NONE
    assert _value(client, topic, "retention.ms") == ("86400000", 4)  # no refused alteration left a trace


# -- IncrementalAlterConfigs ---------------------------------------------------------------------------------------

def _incremental(client, *resources, validate_only=False, version=1):
    body = C.IncrementalAlterConfigsRequest(resources=[
        C.IncrementalAlterConfigsResource(t, n, [C.IncrementalAlterableConfig(k, op, v) for k, op, v in configs])
        for t, n, configs in resources], validate_only=validate_only)
    return client.call(44, version, body).responses


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs(gw, client, version):
    topic = new_topic(gw)
    [r] = _incremental(client, (TOPIC, topic, [("retention.ms", SET, "5000"), ("segment.ms", SET, "60000")]),
                       version=version)
    assert (r.error_code, r.error_message, r.resource_name) == (NONE, None, topic)
    [r] = _incremental(client, (TOPIC, topic, [("retention.bytes", SET, "1048576")]), version=version)
    assert r.error_code == NONE
    assert _value(client, topic, "retention.ms") == ("5000", 1)  # untouched keys stay
    assert _value(client, topic, "retention.bytes") == ("1048576", 1)
    [r] = _incremental(client, (TOPIC, topic, [("retention.ms", DELETE, None), ("never.set", DELETE, None)]),
                       version=version)
    assert r.error_code == INVALID_CONFIG  # an unknown key, even to delete
    [r] = _incremental(client, (TOPIC, topic, [("retention.ms", DELETE, None), ("segment.ms", DELETE, "x")]),
                       version=version)
    assert r.error_code == NONE and _value(client, topic, "retention.ms") == ("86400000", 4)
    [r] = _incremental(client, (TOPIC, topic, [("retention.bytes", SET, "1")]), validate_only=True, version=version)
    assert r.error_code == NONE and _value(client, topic, "retention.bytes") == ("1048576", 1)


def test_incremental_alter_configs_errors(gw, client):
    topic = new_topic(gw)
    cases = [
        ((TOPIC, "missing-" + topic, [("retention.ms", SET, "1")]), UNKNOWN_TOPIC_OR_PARTITION),
        ((TOPIC, topic, [("retention.ms", APPEND, "1")]), INVALID_CONFIG),  # not a list config
        ((TOPIC, topic, [("retention.ms", SUBTRACT, "1")]), INVALID_CONFIG),
        ((TOPIC, topic, [("cleanup.policy", APPEND, "shred")]), INVALID_CONFIG),  # no such policy
        ((TOPIC, topic, [("cleanup.policy", SUBTRACT, "delete")]), INVALID_CONFIG),  # none left
        ((TOPIC, topic, [("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")]),
         INVALID_CONFIG),
        ((TOPIC, topic, [("retention.ms", 9, "1")]), INVALID_REQUEST),  # no such operation
        ((TOPIC, topic, [("retention.ms", SET, None)]), INVALID_REQUEST),  # SET null
        ((TOPIC, topic, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]), INVALID_REQUEST),
        ((TOPIC, topic, [("retention.ms", SET, "-5")]), INVALID_CONFIG),
        ((TOPIC, topic, [("storage.format", SET, "tank")]), INVALID_CONFIG),
        ((BROKER, "0", [("log.retention.ms", SET, "1")]), INVALID_REQUEST),
        ((BROKER, "", [("num.partitions", DELETE, None)]), INVALID_REQUEST),
        ((BROKER, "3", []), INVALID_REQUEST),
        ((BROKER_LOGGER, "0", [("kafka", SET, "DEBUG")]), INVALID_REQUEST),
    ]
    for version in (0, 1):
        for resource, code in cases:
            [r] = _incremental(client, resource, version=version)
            assert (r.error_code, bool(r.error_message)) == (code, True), (resource, version)
        # One bad resource does not spoil the others in the same request.
        ok, bad = _incremental(client, (TOPIC, topic, [("segment.ms", SET, "120000")]),
                               (TOPIC, topic + "-gone", [("segment.ms", SET, "1")]), version=version)
        assert (ok.error_code, bad.error_code) == (NONE, UNKNOWN_TOPIC_OR_PARTITION)
    assert _value(client, topic, "segment.ms") == ("120000", 1)
    assert _value(client, topic, "retention.ms") == ("86400000", 4)


def test_compaction_configs(gw, client):
    """cleanup.policy is a list config (APPEND, SUBTRACT); the compaction settings alter and describe as Kafka's."""
    topic = new_topic(gw)
    [r] = _incremental(client, (TOPIC, topic, [("cleanup.policy", APPEND, "compact")]))
    assert r.error_code == NONE and _value(client, topic, "cleanup.policy") == ("compact,delete", 1)
    [r] = _incremental(client, (TOPIC, topic, [("cleanup.policy", SUBTRACT, "delete"),
                                               ("min.cleanable.dirty.ratio", SET, "0.1"),
                                               ("delete.retention.ms", SET, "1000")]))
    assert r.error_code == NONE and _value(client, topic, "cleanup.policy") == ("compact", 1)
    assert _value(client, topic, "min.cleanable.dirty.ratio") == ("0.1", 1)
    [r] = _alter(client, (TOPIC, topic, [("cleanup.policy", "delete,compact"), ("min.compaction.lag.ms", "60000")]))
    assert r.error_code == NONE and _value(client, topic, "cleanup.policy") == ("compact,delete", 1)
    assert _value(client, topic, "delete.retention.ms") == ("86400000", 5)  # replaced: back to the default
    for bad in ([("min.cleanable.dirty.ratio", "2")], [("cleanup.policy", "")], [("max.compaction.lag.ms", "0")]):
        [r] = _alter(client, (TOPIC, topic, bad))
        assert r.error_code == INVALID_CONFIG and r.error_message, bad


# -- CreatePartitions ----------------------------------------------------------------------------------------------

def _create_partitions(client, *topics, validate_only=False, version=1):
    body = A.CreatePartitionsRequest(topics=[
        A.CreatePartitionsTopic(name, count, None if assignments is None else [
            A.CreatePartitionsAssignment(ids) for ids in assignments]) for name, count, assignments in topics],
        timeout_ms=5000, validate_only=validate_only)
    return client.call(37, version, body).results


def _partition_count(client, topic) -> int:
    resp = client.call(3, 8, metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(topic)],
                                                      allow_auto_topic_creation=False))
    [t] = resp.topics
    assert t.error_code == NONE
    return len(t.partitions)


def test_create_partitions(gw, client):
    topic = new_topic(gw, 2)
    [r] = _create_partitions(client, (topic, 5, None), validate_only=True)
    assert (r.name, r.error_code, r.error_message) == (topic, NONE, None) and _partition_count(client, topic) == 2
    [r] = _create_partitions(client, (topic, 3, None), version=0)
    assert r.error_code == NONE and _partition_count(client, topic) == 3
    [r] = _create_partitions(client, (topic, 5, [[0], [0]]))
    assert r.error_code == NONE and _partition_count(client, topic) == 5
    produce(client, topic, 4, 3)  # the new partitions work at once, for every protocol
    with NativeClient(*gw.native) as n:
        assert [r.value for r in n.fetch(topic, 4, 0).records] == [b"r0", b"r1", b"r2"]
        assert [p.partition for p in n.describe_topic(topic).partitions] == [0, 1, 2, 3, 4]


def test_create_partitions_errors(gw, client):
    topic = new_topic(gw, 3)
    cases = [
        ((topic, 2, None), INVALID_PARTITIONS),  # shrinking
        ((topic, 3, None), INVALID_PARTITIONS),  # no change
        ((topic, 0, None), INVALID_PARTITIONS),
        ((topic, 10**6, None), INVALID_PARTITIONS),
        (("missing-" + topic, 4, None), UNKNOWN_TOPIC_OR_PARTITION),
        (("missing-" + topic, 4, [[0]]), UNKNOWN_TOPIC_OR_PARTITION),
        ((topic, 2, [[0]]), INVALID_PARTITIONS),  # the count is checked before the assignments
        ((topic, 5, [[0]]), INVALID_REPLICA_ASSIGNMENT),  # one list per new partition
        ((topic, 4, [[1]]), INVALID_REPLICA_ASSIGNMENT),  # no broker 1
        ((topic, 4, [[0, 1]]), INVALID_REPLICA_ASSIGNMENT),
        ((topic, 4, [[0, 0]]), INVALID_REPLICA_ASSIGNMENT),  # replication factor 1 only
        ((topic, 4, [[]]), INVALID_REPLICA_ASSIGNMENT),
    ]
    for spec, code in cases:
        [r] = _create_partitions(client, spec)
        assert (r.error_code, bool(r.error_message)) == (code, True), spec
    a, b = _create_partitions(client, (topic, 4, None), (topic, 5, None))
    assert a.error_code == b.error_code == INVALID_REQUEST
    assert _partition_count(client, topic) == 3  # nothing refused was applied


# -- DeleteRecords -------------------------------------------------------------------------------------------------

def _delete_records(client, topic, *offsets, version=1):
    body = A.DeleteRecordsRequest(topics=[A.DeleteRecordsTopic(topic, [
        A.DeleteRecordsPartition(p, o) for p, o in offsets])], timeout_ms=5000)
    [t] = client.call(21, version, body).topics
    return [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions]


def _fetch_code(client, topic, offset, partition=0):
    body = fetch.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                              topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
                                  partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    part = client.call(1, 11, body).responses[0].partitions[0]
    return part.error_code, part.log_start_offset, part.high_watermark


def _earliest(client, topic, partition=0):
    body = list_offsets.ListOffsetsRequest(replica_id=-1, topics=[list_offsets.ListOffsetsTopic(
        topic, [list_offsets.ListOffsetsPartition(partition_index=partition, timestamp=-2)])])
    return client.call(2, 5, body).topics[0].partitions[0].offset


def test_delete_records(gw, client):
    topic = new_topic(gw, 2)
    produce(client, topic, 0, 10)
    produce(client, topic, 1, 4)
    assert _delete_records(client, topic, (0, 4), version=0) == [(0, 4, NONE)]
    assert _fetch_code(client, topic, 3) == (OFFSET_OUT_OF_RANGE, 4, 10)
    assert _fetch_code(client, topic, 4)[0] == NONE and _earliest(client, topic) == 4
    assert _delete_records(client, topic, (0, 2)) == [(0, 4, NONE)]  # below the start: nothing changes
    assert _delete_records(client, topic, (0, 4)) == [(0, 4, NONE)]
    assert _delete_records(client, topic, (0, 11), (1, -1)) == [(0, -1, OFFSET_OUT_OF_RANGE), (1, 4, NONE)]
    assert _delete_records(client, topic, (0, -2), (0, 10)) == [(0, -1, OFFSET_OUT_OF_RANGE), (0, 10, NONE)]
    assert _earliest(client, topic) == 10 and _earliest(client, topic, 1) == 4
    produce(client, topic, 0, 1, first=10)  # the partition goes on from its end
    assert _fetch_code(client, topic, 10)[0] == NONE
    with NativeClient(*gw.native) as n:
        assert [(p.log_start_offset, p.log_end_offset) for p in n.describe_topic(topic).partitions] == [(10, 11),
                                                                                                       (4, 4)]
        assert [r.value for r in n.fetch(topic, 0, 10).records] == [b"r10"]
    assert _delete_records(client, topic, (7, 0)) == [(7, -1, UNKNOWN_TOPIC_OR_PARTITION)]
    assert _delete_records(client, "missing-" + topic, (0, 0)) == [(0, -1, UNKNOWN_TOPIC_OR_PARTITION)]


# -- DescribeLogDirs -----------------------------------------------------------------------------------------------

def test_describe_log_dirs(gw, client):
    topic = new_topic(gw, 2)
    produce(client, topic, 1, 5)
    for version in (0, 1):
        [d] = client.call(35, version, K.DescribeLogDirsRequest(topics=None)).results
        assert (d.error_code, d.log_dir) == (NONE, gw.data_dir)
        sizes = {(t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
                 for t in d.topics for p in t.partitions}
        assert sizes[(topic, 0)] == (0, 0, False)
        assert sizes[(topic, 1)][0] > 5 * 60 and sizes[(topic, 1)][1:] == (0, False)
    [d] = client.call(35, 1, K.DescribeLogDirsRequest(topics=[
        K.DescribableLogDirTopic(topic, [1, 9]), K.DescribableLogDirTopic("missing-" + topic, [0])])).results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in d.topics] == [(topic, [1])]
    [d] = client.call(35, 1, K.DescribeLogDirsRequest(topics=[])).results
    assert (d.error_code, d.topics) == (NONE, [])


# -- groups: DeleteGroups, OffsetDelete ------------------------------------------------------------------------------

def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: the consumer's topics, no user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join(gw, group: str, metadata_bytes: bytes, protocol_type: str = "consumer"):
    """A member that joins and syncs on its own connection; (client, member id, generation)."""
    c = KafkaWireClient(*gw.addresses["kafka"])
    body = G.JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                              protocol_type=protocol_type,
                              protocols=[G.JoinGroupRequestProtocol("range", metadata_bytes)])
    first = c.call(11, 5, body)
    assert first.error_code == 79  # MEMBER_ID_REQUIRED
    body.member_id = first.member_id
    joined = c.call(11, 5, body)
    assert joined.error_code == NONE
    synced = c.call(14, 3, G.SyncGroupRequest(group_id=group, generation_id=joined.generation_id,
                                              member_id=joined.member_id, assignments=[
                                                  G.SyncGroupRequestAssignment(joined.member_id, b"")]))
    assert synced.error_code == NONE
    return c, joined.member_id, joined.generation_id


def leave(c, group, member_id):
    assert c.call(13, 3, G.LeaveGroupRequest(group_id=group, members=[G.MemberIdentity(member_id)])).error_code == 0
    c.close()


def commit(client, group, *pairs):
    body = O.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        O.OffsetCommitRequestTopic(t, [O.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)])
        for t, p, o in pairs])
    resp = client.call(8, 7, body)
    assert all(p.error_code == NONE for t in resp.topics for p in t.partitions)


def committed(client, group) -> dict:
    resp = client.call(9, 5, O.OffsetFetchRequest(group_id=group, topics=None))
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


def _delete_groups(client, *groups, version=1):
    return [(r.group_id, r.error_code) for r in client.call(42, version, G.DeleteGroupsRequest(list(groups))).results]


def test_delete_groups(gw, client):
    topic = new_topic(gw)
    lone, active = "lone-" + topic, "active-" + topic
    commit(client, lone, (topic, 0, 3))  # a group that only commits (manual assignment): it exists
    commit(client, active, (topic, 0, 5))
    member, member_id, _ = join(gw, active, subscription(topic))
    try:
        assert _delete_groups(client, lone, active, "nobody-" + topic, "", version=0) == [
            (lone, NONE), (active, NON_EMPTY_GROUP), ("nobody-" + topic, GROUP_ID_NOT_FOUND), ("", INVALID_GROUP_ID)]
        assert committed(client, lone) == {} and committed(client, active) == {(topic, 0): 5}
        with NativeClient(*gw.native) as n:
            assert n.committed(topic, 0, lone) is None
    finally:
        leave(member, active, member_id)
    # Empty now (kept for a while with its generation): deletable.
    groups = {g.group_id for g in client.call(16, 2, G.ListGroupsRequest()).groups}
    assert active in groups
    assert _delete_groups(client, active) == [(active, NONE)]
    assert committed(client, active) == {}
    assert active not in {g.group_id for g in client.call(16, 2, G.ListGroupsRequest()).groups}
    [d] = client.call(15, 4, G.DescribeGroupsRequest(groups=[active])).groups
    assert d.group_state == "Dead"
    assert _delete_groups(client, active, lone) == [(active, GROUP_ID_NOT_FOUND), (lone, GROUP_ID_NOT_FOUND)]


def _offset_delete(client, group, *pairs):
    by_topic: dict[str, list[int]] = {}
    for t, p in pairs:
        by_topic.setdefault(t, []).append(p)
    resp = client.call(47, 0, O.OffsetDeleteRequest(group, [
        O.OffsetDeleteRequestTopic(t, [O.OffsetDeleteRequestPartition(p) for p in ps]) for t, ps in by_topic.items()]))
    return resp.error_code, {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def test_offset_delete(gw, client):
    used, unused = new_topic(gw, 2), new_topic(gw)
    group = "od-" + used
    commit(client, group, (used, 0, 1), (used, 1, 2), (unused, 0, 3))
    member, member_id, _ = join(gw, group, subscription(used))
    try:
        code, parts = _offset_delete(client, group, (used, 0), (unused, 0), ("missing-" + used, 0), (unused, 5))
        assert code == NONE and parts == {(used, 0): GROUP_SUBSCRIBED_TO_TOPIC, (unused, 0): NONE,
                                          ("missing-" + used, 0): UNKNOWN_TOPIC_OR_PARTITION,
                                          (unused, 5): UNKNOWN_TOPIC_OR_PARTITION}
        assert committed(client, group) == {(used, 0): 1, (used, 1): 2}
    finally:
        leave(member, group, member_id)
    assert _offset_delete(client, group, (used, 0)) == (NONE, {(used, 0): NONE})  # Empty now
    assert committed(client, group) == {(used, 1): 2}
    assert _offset_delete(client, "nobody-" + used, (used, 0)) == (GROUP_ID_NOT_FOUND, {})
    assert _offset_delete(client, "", (used, 0)) == (INVALID_GROUP_ID, {})
    lone = "lone-" + used  # only committed offsets: an Empty group to Kafka
    commit(client, lone, (used, 0, 9))
    assert _offset_delete(client, lone, (used, 0), (used, 1)) == (NONE, {(used, 0): NONE, (used, 1): NONE})
    assert committed(client, lone) == {}


def test_offset_delete_active_group_of_another_protocol_or_unreadable_subscription(gw, client):
    topic, other = new_topic(gw), new_topic(gw)
    connect = "connect-" + topic
    member, member_id, _ = join(gw, connect, b"\x00\x01whatever", protocol_type="connect")
    try:
        assert _offset_delete(client, connect, (topic, 0)) == (NON_EMPTY_GROUP, {})
    finally:
        leave(member, connect, member_id)
    garbled = "garbled-" + topic
    commit(client, garbled, (other, 0, 4))
    member, member_id, _ = join(gw, garbled, b"\x00\x00\x7f\xff\xff\xff")  # unreadable: every topic counts
    try:
        assert _offset_delete(client, garbled, (other, 0)) == (NONE, {(other, 0): GROUP_SUBSCRIBED_TO_TOPIC})
        assert committed(client, garbled) == {(other, 0): 4}
    finally:
        leave(member, garbled, member_id)


# -- malformed bodies ----------------------------------------------------------------------------------------------

VALID = {
    21: (1, A.DeleteRecordsRequest(topics=[A.DeleteRecordsTopic("t", [A.DeleteRecordsPartition(0, 1)])],
                                   timeout_ms=1)),
    32: (3, C.DescribeConfigsRequest(resources=[C.DescribeConfigsResource(2, "t", None)])),
    33: (1, C.AlterConfigsRequest(resources=[C.AlterConfigsResource(2, "t", [C.AlterableConfig("a", "b")])])),
    35: (1, K.DescribeLogDirsRequest(topics=[K.DescribableLogDirTopic("t", [0])])),
    37: (1, A.CreatePartitionsRequest(topics=[A.CreatePartitionsTopic("t", 2, None)], timeout_ms=1)),
    42: (1, G.DeleteGroupsRequest(["g"])),
    44: (1, C.IncrementalAlterConfigsRequest(resources=[C.IncrementalAlterConfigsResource(
        2, "t", [C.IncrementalAlterableConfig("a", 0, "b")])])),
    47: (0, O.OffsetDeleteRequest("g", [O.OffsetDeleteRequestTopic("t", [O.OffsetDeleteRequestPartition(0)])])),
    60: (0, K.DescribeClusterRequest(include_cluster_authorized_operations=True)),
}


def raw_exchange(gw, data: bytes, *, answers: int = 0) -> tuple[bytes, bool]:
    """Send raw bytes on a fresh connection; read until the gateway closes it, or (with `answers`) until that many
    response frames came. (What was read, whether the gateway closed the connection within 5 s.)"""
    s = socket.create_connection(gw.addresses["kafka"], timeout=5)
    s.sendall(data)
    out, closed = b"", False
    try:
        while not answers or _frames(out) < answers:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            out += chunk
    except ConnectionResetError:
        closed = True
    except TimeoutError:
        pass
    s.close()
    return out, closed


def _frames(data: bytes) -> int:
    n = pos = 0
    while pos + 4 <= len(data) and pos + 4 + struct.unpack_from(">i", data, pos)[0] <= len(data):
        pos += 4 + struct.unpack_from(">i", data, pos)[0]
        n += 1
    return n


def _frame(key: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", key, version, 7, 4) + b"test" + (b"\x00" if is_flexible(key, version) else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def _valid_body(key: int) -> tuple[int, bytes]:
    version, body = VALID[key]
    frame = KafkaClientConnection().send(KafkaRequest(key, version, body=body, correlation_id=7, client_id="test"))
    header = len(_frame(key, version, b""))
    return version, frame[header:]


@pytest.mark.parametrize("key", NEW_KEYS)
def test_malformed_bodies_close_only_their_connection(gw, client, key):
    version, body = _valid_body(key)
    answer, closed = raw_exchange(gw, _frame(key, version, body), answers=1)  # the well-formed request is answered
    assert _frames(answer) == 1 and answer[4:8] == struct.pack(">i", 7) and not closed
    for bad in (body[:-1], body[:len(body) // 2], b"", b"\x7f\xff\xff\xff" * 2, b"\xff" * 3):
        assert raw_exchange(gw, _frame(key, version, bad)) == (b"", True), (key, bad)
    with KafkaWireClient(*gw.addresses["kafka"]) as other:
        assert other.call(18, 2, ApiVersionsRequest()).error_code == NONE
    assert client.call(18, 2, ApiVersionsRequest()).error_code == NONE  # a connection opened before, too
