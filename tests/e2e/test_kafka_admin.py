"""The Kafka admin APIs through unmodified admin clients — librdkafka's (confluent-kafka `AdminClient`) and
kafka-python's `KafkaAdminClient` — against a real gateway process, with their effects checked through Kafka
producers/consumers, the native protocol and a gateway restart: topic configs (describe, alter, incremental alter,
broker configs read-only), partitions added, records deleted, consumer groups and their offsets deleted, the cluster
and its log directory described."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, OffsetSpec, ResourceType)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient

from ..kafka_groups import POLL_MS, group_consumer

pytestmark = pytest.mark.slow

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("kafka-admin") / "data")
    gw = GatewayProcess(data, "storage.flush=always", "log_level=WARNING", f"storage.retention_ms={DAY_MS}")
    yield gw
    gw.stop()


def bootstrap(gw) -> str:
    host, port = gw.addresses["kafka"]
    return f"{host}:{port}"


def topic_name() -> str:
    return "adm-" + uuid.uuid4().hex[:10]


def create(gw, name, partitions=1):
    with NativeClient(*gw.native) as c:
        c.create_topic(name, partitions)


def native_config(gw, topic) -> dict:
    with NativeClient(*gw.native) as c:
        return {e.name: (e.value, e.source) for e in c.describe_topic_config(topic)}


def native_ranges(gw, topic) -> list[tuple[int, int]]:
    with NativeClient(*gw.native) as c:
        return [(p.log_start_offset, p.log_end_offset) for p in c.describe_topic(topic).partitions]


def rd_admin(gw) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap(gw)})


def rd_produce(gw, topic, partition, values):
    producer = Producer({"bootstrap.servers": bootstrap(gw), "linger.ms": 0})
    errors = []
    for v in values:
        producer.produce(topic, v, partition=partition, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(15) == 0 and not errors


def rd_describe(admin, resource_type, name) -> dict:
    resource = ConfigResource(resource_type, name)
    return admin.describe_configs([resource], request_timeout=10)[resource].result(10)


def rd_error(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(10)
    return info.value.args[0]


def consume(gw, topic, partition, *, expect, offset=0, timeout=20, **opts):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(gw), enable_auto_commit=False, **opts)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=300).values():
            out.extend(records)
    consumer.close()
    return out


def wait_assigned(consumer, timeout=30):
    deadline = time.monotonic() + timeout
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=POLL_MS)  # see tests/kafka_groups.py
    assert consumer.assignment()


# -- librdkafka (confluent-kafka AdminClient) -----------------------------------------------------------------------

def test_librdkafka_describe_and_alter_topic_configs(gateway):
    admin = rd_admin(gateway)
    topic = topic_name()
    create(gateway, topic)
    configs = rd_describe(admin, ResourceType.TOPIC, topic)
    assert {"retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "index.interval.bytes",
            "max.message.bytes", "storage.format"} <= set(configs)
    assert configs["retention.ms"].value == str(DAY_MS)
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value  # the gateway's storage.*
    assert configs["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["storage.format"].is_read_only and not configs["retention.ms"].is_read_only

    # IncrementalAlterConfigs: one key set, the others untouched.
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)])
    assert admin.incremental_alter_configs([resource])[resource].result(10) is None
    configs = rd_describe(admin, ResourceType.TOPIC, topic)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert native_config(gateway, topic)["retention.ms"] == (3600000, "topic")
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    assert admin.incremental_alter_configs([resource])[resource].result(10) is None
    assert native_config(gateway, topic)["segment.bytes"][1] == "default"
    assert native_config(gateway, topic)["retention.ms"] == (3600000, "topic")

    # validate_only changes nothing; bad keys and values are INVALID_CONFIG; unknown topics their own error.
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    assert admin.incremental_alter_configs([resource], validate_only=True)[resource].result(10) is None
    assert native_config(gateway, topic)["retention.ms"] == (3600000, "topic")
    for name, value, op in (("no.such.config", "1", AlterConfigOpType.SET), ("retention.ms", "soon",
                                                                             AlterConfigOpType.SET),
                            ("retention.ms", "1", AlterConfigOpType.APPEND)):
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])
        assert rd_error(admin.incremental_alter_configs([resource])[resource]).code() == KafkaError.INVALID_CONFIG
    resource = ConfigResource(ResourceType.TOPIC, "missing-" + topic, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    err = rd_error(admin.incremental_alter_configs([resource])[resource])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    missing = ConfigResource(ResourceType.TOPIC, "missing-" + topic)
    assert rd_error(admin.describe_configs([missing])[missing]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # AlterConfigs (deprecated in librdkafka, still sent): the given keys replace every override.
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "60000"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource])
    assert futures[resource].result(10) is None
    assert native_config(gateway, topic)["segment.ms"] == (60000, "topic")
    assert native_config(gateway, topic)["retention.ms"] == (DAY_MS, "broker")  # dropped: back to storage.*


def test_librdkafka_broker_configs_are_read_only(gateway):
    admin = rd_admin(gateway)
    configs = rd_describe(admin, ResourceType.BROKER, "0")
    assert configs["log.retention.ms"].value == str(DAY_MS)
    assert configs["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].value == "1" and configs["num.partitions"].source == (
        ConfigSource.DEFAULT_CONFIG.value)
    assert configs["auto.create.topics.enable"].value == "false"  # (off by default: docs/configuration.md)
    assert configs["message.max.bytes"].value == str(10 * 1024 * 1024)
    assert all(c.is_read_only for c in configs.values())
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    err = rd_error(admin.incremental_alter_configs([resource])[resource])
    assert err.code() == KafkaError.INVALID_REQUEST and "read-only" in err.str()
    assert rd_describe(admin, ResourceType.BROKER, "0")["log.retention.ms"].value == str(DAY_MS)


def test_librdkafka_create_partitions_then_produce_and_consume(gateway):
    admin = rd_admin(gateway)
    topic = topic_name()
    create(gateway, topic, 2)
    assert admin.create_partitions([NewPartitions(topic, 4)], validate_only=True)[topic].result(10) is None
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    assert admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10) is None
    assert rd_error(admin.create_partitions([NewPartitions(topic, 3)])[topic]).code() == (
        KafkaError.INVALID_PARTITIONS)
    assert rd_error(admin.create_partitions([NewPartitions(topic, 6, [[0], [1]])])[topic]).code() == (
        KafkaError.INVALID_REPLICA_ASSIGNMENT)
    deadline = time.monotonic() + 10  # librdkafka's metadata cache refreshes on its own schedule
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) != 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    rd_produce(gateway, topic, 3, [b"new-%d" % i for i in range(5)])
    assert [r.value for r in consume(gateway, topic, 3, expect=5)] == [b"new-%d" % i for i in range(5)]
    with NativeClient(*gateway.native) as n:
        assert [r.value for r in n.fetch(topic, 3, 0).records] == [b"new-%d" % i for i in range(5)]
        n.produce(topic, 2, [b"native"])
    consumer = Consumer({"bootstrap.servers": bootstrap(gateway), "group.id": "g-" + topic,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([RdTopicPartition(topic, 2, 0)])
    msg = None
    deadline = time.monotonic() + 20
    while msg is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
    consumer.close()
    assert msg is not None and msg.error() is None and msg.value() == b"native"


def test_librdkafka_delete_records(gateway):
    admin = rd_admin(gateway)
    topic = topic_name()
    create(gateway, topic, 2)
    rd_produce(gateway, topic, 0, [b"v%d" % i for i in range(10)])
    tp = RdTopicPartition(topic, 0, 4)
    deleted = admin.delete_records([tp])[tp].result(10)
    assert deleted.low_watermark == 4
    earliest = RdTopicPartition(topic, 0)
    assert admin.list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(10).offset == 4
    assert native_ranges(gateway, topic)[0] == (4, 10)
    beyond = RdTopicPartition(topic, 0, 11)
    assert rd_error(admin.delete_records([beyond])[beyond]).code() == KafkaError.OFFSET_OUT_OF_RANGE
    everything = RdTopicPartition(topic, 0, -1)  # -1: up to the high watermark
    assert admin.delete_records([everything])[everything].result(10).low_watermark == 10
    assert native_ranges(gateway, topic) == [(10, 10), (0, 0)]


def test_librdkafka_consumer_groups_and_their_offsets_deleted(gateway):
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = rd_admin(gateway)
    topic = topic_name()
    create(gateway, topic)
    rd_produce(gateway, topic, 0, [b"x%d" % i for i in range(3)])
    group = "rdg-" + topic
    request = [ConsumerGroupTopicPartitions(group, [RdTopicPartition(topic, 0, 2)])]
    assert admin.alter_consumer_group_offsets(request)[group].result(10).group_id == group
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert [(tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions] == [(topic, 0, 2)]

    consumer = Consumer({"bootstrap.servers": bootstrap(gateway), "group.id": group, "session.timeout.ms": 6000,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment()
    assert rd_error(admin.delete_consumer_groups([group])[group]).code() == KafkaError.NON_EMPTY_GROUP
    consumer.close()  # leaves the group: Empty, deletable
    assert admin.delete_consumer_groups([group], request_timeout=10)[group].result(10) is None
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [RdTopicPartition(topic, 0)])])
    assert [tp.offset for tp in listed[group].result(10).topic_partitions] == [-1001]  # OFFSET_INVALID: none
    with NativeClient(*gateway.native) as n:
        assert n.committed(topic, 0, group) is None
    assert rd_error(admin.delete_consumer_groups([group])[group]).code() == KafkaError.GROUP_ID_NOT_FOUND


def test_librdkafka_describe_cluster(gateway):
    admin = rd_admin(gateway)  # held: a collected client destroys its handle and fails what it has under way
    cluster = admin.describe_cluster(request_timeout=10).result(10)
    host, port = gateway.addresses["kafka"]
    assert cluster.cluster_id == "logway" and cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, host, port)]


# -- kafka-python (KafkaAdminClient) --------------------------------------------------------------------------------

@pytest.fixture
def kp_admin(gateway):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(gateway))
    yield admin
    admin.close()


def test_kafka_python_describe_alter_and_reset_configs(gateway, kp_admin):
    topic = topic_name()
    create(gateway, topic)
    resource = KpConfigResource(KpConfigResourceType.TOPIC, topic)
    described = kp_admin.describe_configs([resource], config_filter="all")["topic"][topic]
    assert described["retention.ms"]["value"] == str(DAY_MS)
    assert described["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert described["storage.format"]["read_only"]
    assert kp_admin.describe_configs([resource])["topic"][topic] == {}  # nothing modified yet

    # kafka-python uses IncrementalAlterConfigs (v1, flexible) when the broker offers it.
    assert kp_admin.alter_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic, {
        "retention.ms": "7200000", "retention.bytes": "1073741824"})]) == {"topic": {topic: "OK"}}
    modified = kp_admin.describe_configs([resource])["topic"][topic]
    assert {k: v["value"] for k, v in modified.items()} == {"retention.ms": "7200000", "retention.bytes": "1073741824"}
    assert native_config(gateway, topic)["retention.ms"] == (7200000, "topic")
    # Non-incremental AlterConfigs: kafka-python carries the other modified keys along itself.
    assert kp_admin.alter_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic, {"segment.ms": "600000"})],
                                  incremental=False) == {"topic": {topic: "OK"}}
    modified = kp_admin.describe_configs([resource])["topic"][topic]
    assert {k: v["value"] for k, v in modified.items()} == {"retention.ms": "7200000", "retention.bytes": "1073741824",
                                                            "segment.ms": "600000"}
    assert kp_admin.alter_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic, {"retention.ms": "1"})],
                                  validate_only=True) == {"topic": {topic: "OK"}}
    assert native_config(gateway, topic)["retention.ms"] == (7200000, "topic")
    answer = kp_admin.alter_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic, {"retention.ms": "x"})])
    assert "InvalidConfig" in answer["topic"][topic]
    with pytest.raises(ValueError):  # kafka-python checks the keys against DescribeConfigs first
        kp_admin.alter_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic, {"no.such.config": "1"})])
    assert kp_admin.reset_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic, ["retention.ms"])]) == {
        "topic": {topic: "OK"}}
    assert native_config(gateway, topic)["retention.ms"] == (DAY_MS, "broker")
    broker = kp_admin.describe_configs([KpConfigResource(KpConfigResourceType.BROKER, "0")],
                                       config_filter="all")["broker"]["0"]
    assert broker["log.retention.ms"] == {**broker["log.retention.ms"], "value": str(DAY_MS), "read_only": True,
                                          "config_source": "STATIC_BROKER_CONFIG"}
    with pytest.raises(ValueError):  # read-only: not among the dynamic configs kafka-python may alter
        kp_admin.alter_configs([KpConfigResource(KpConfigResourceType.BROKER, "0", {"num.partitions": "4"})])
    answer = kp_admin.alter_configs([KpConfigResource(KpConfigResourceType.BROKER, "0", {"num.partitions": "4"})],
                                    raise_on_unknown=False)
    assert "InvalidRequest" in answer["broker"]["0"]


def test_kafka_python_partitions_records_and_log_dirs(gateway, kp_admin):
    topic = topic_name()
    create(gateway, topic, 1)
    kp_admin.create_partitions({topic: 3}, validate_only=True)
    assert len(native_ranges(gateway, topic)) == 1
    kp_admin.create_partitions({topic: 3})
    assert native_ranges(gateway, topic) == [(0, 0)] * 3
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        kp_admin.create_partitions({topic: 2})
    producer = KafkaProducer(bootstrap_servers=bootstrap(gateway))
    for i in range(8):
        producer.send(topic, value=b"p2-%d" % i, partition=2)
    producer.flush()
    producer.close()
    assert [r.value for r in consume(gateway, topic, 2, expect=8)] == [b"p2-%d" % i for i in range(8)]

    result = kp_admin.delete_records({TopicPartition(topic, 2): 5})
    assert result[TopicPartition(topic, 2)]["low_watermark"] == 5
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(gateway), enable_auto_commit=False)
    assert consumer.beginning_offsets([TopicPartition(topic, 2)]) == {TopicPartition(topic, 2): 5}
    consumer.close()
    # A fetch below the new start: OFFSET_OUT_OF_RANGE, raised without a reset policy, else resolved by it.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(gateway), enable_auto_commit=False,
                             auto_offset_reset="none")
    consumer.assign([TopicPartition(topic, 2)])
    consumer.seek(TopicPartition(topic, 2), 1)
    with pytest.raises(kafka_errors.OffsetOutOfRangeError):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=300)
    consumer.close()
    assert [r.offset for r in consume(gateway, topic, 2, expect=3, offset=1, auto_offset_reset="earliest")] == [
        5, 6, 7]
    with pytest.raises(kafka_errors.OffsetOutOfRangeError):
        kp_admin.delete_records({TopicPartition(topic, 2): 9})

    [broker] = kp_admin.describe_log_dirs()
    [log_dir] = broker["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == gateway.data_dir
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"]
             for p in t["partitions"]}
    assert sizes[(topic, 0)] == 0 and sizes[(topic, 2)] > 0
    [broker] = kp_admin.describe_log_dirs({topic: [1, 2]})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in broker["log_dirs"][0]["topics"]] == [
        (topic, [1, 2])]


def test_kafka_python_delete_groups_and_group_offsets(gateway, kp_admin):
    topic, other = topic_name(), topic_name()
    create(gateway, topic)
    create(gateway, other)
    group = "kpg-" + topic
    with NativeClient(*gateway.native) as n:  # offsets committed over the native protocol: the same store
        n.commit(topic, 0, group, 4)
        n.commit(other, 0, group, 7)
    consumer = group_consumer(bootstrap(gateway), topic, group, enable_auto_commit=False, auto_offset_reset="earliest")
    wait_assigned(consumer)
    try:
        assert kp_admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        result = kp_admin.delete_group_offsets(group, [TopicPartition(topic, 0), TopicPartition(other, 0)])
        assert result == {TopicPartition(topic, 0): kafka_errors.GroupSubscribedToTopicError,
                          TopicPartition(other, 0): kafka_errors.NoError}
        offsets = kp_admin.list_group_offsets(group)[group]
        assert {tp: o.offset for tp, o in offsets.items()} == {TopicPartition(topic, 0): 4}
    finally:
        consumer.close()
    assert kp_admin.delete_group_offsets(group, [TopicPartition(topic, 0)]) == {
        TopicPartition(topic, 0): kafka_errors.NoError}
    with NativeClient(*gateway.native) as n:
        n.commit(topic, 0, group, 5)
    assert kp_admin.delete_groups([group, "nobody-" + topic]) == {group: "OK",
                                                                  "nobody-" + topic: "GroupIdNotFoundError"}
    assert kp_admin.list_group_offsets(group) == {group: {}}
    assert group not in {g["group_id"] for g in kp_admin.list_groups()}
    with pytest.raises(kafka_errors.GroupIdNotFoundError):
        kp_admin.delete_group_offsets(group, [TopicPartition(topic, 0)])


def test_kafka_python_describe_cluster(gateway, kp_admin):
    host, port = gateway.addresses["kafka"]
    cluster = kp_admin.describe_cluster()  # DescribeCluster v2 (kafka-python needs v1+: it reads endpoint_type)
    assert cluster["cluster_id"] == "logway" and cluster["controller_id"] == 0
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(0, host, port)]


# -- across a restart -----------------------------------------------------------------------------------------------

def test_admin_changes_survive_a_gateway_restart(tmp_path):
    data = str(tmp_path / "data")
    topic, group = "kept", "kept-group"
    with GatewayProcess(data, "log_level=WARNING") as gw:
        create(gw, topic, 1)
        admin = rd_admin(gw)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "123456789", incremental_operation=AlterConfigOpType.SET)])
        assert admin.incremental_alter_configs([resource])[resource].result(10) is None
        assert admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10) is None
        rd_produce(gw, topic, 2, [b"v%d" % i for i in range(6)])
        tp = RdTopicPartition(topic, 2, 4)
        assert admin.delete_records([tp])[tp].result(10).low_watermark == 4
        with NativeClient(*gw.native) as n:
            n.commit(topic, 1, group, 0)
        assert admin.delete_consumer_groups([group])[group].result(10) is None
    with GatewayProcess(data, "log_level=WARNING") as gw:
        admin = rd_admin(gw)
        configs = rd_describe(admin, ResourceType.TOPIC, topic)
        assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
            "123456789", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert native_config(gw, topic)["retention.ms"] == (123456789, "topic")
        assert native_ranges(gw, topic) == [(0, 0), (0, 0), (4, 6)]
        assert [r.value for r in consume(gw, topic, 2, expect=2, offset=4)] == [b"v4", b"v5"]
        with NativeClient(*gw.native) as n:
            assert n.committed(topic, 1, group) is None
        admin = KafkaAdminClient(bootstrap_servers=bootstrap(gw))
        try:
            assert admin.describe_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic)])["topic"][topic][
                "retention.ms"]["value"] == "123456789"
            assert len(admin.describe_topics([topic])[0]["partitions"]) == 3
        finally:
            admin.close()


def test_librdkafka_list_offsets_max_timestamp_and_topic_ids_survive_a_restart(tmp_path):
    """OffsetSpec.max_timestamp() (ListOffsets -3, KIP-734) is the record with the largest timestamp, not a search
    for timestamp -3; describe_topics shows the topic's id (Metadata v10+), the same after a restart."""
    from confluent_kafka import TopicCollection

    data = str(tmp_path / "data")
    name = topic_name()
    with GatewayProcess(data, "log_level=WARNING") as gw:
        create(gw, name)
        producer = Producer({"bootstrap.servers": bootstrap(gw), "linger.ms": 0})
        for value, ts in ((b"a", 1_000), (b"b", 9_000), (b"c", 5_000)):
            producer.produce(name, value, partition=0, timestamp=ts)
        assert producer.flush(15) == 0
        admin = rd_admin(gw)
        tp = RdTopicPartition(name, 0)
        top = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
        assert (top.offset, top.timestamp) == (1, 9_000)
        described = admin.describe_topics(TopicCollection([name]))[name].result(10)
        topic_id = str(described.topic_id)
        assert topic_id and topic_id != "AAAAAAAAAAAAAAAAAAAAAA"  # (librdkafka prints ids in Kafka's base64)
    with GatewayProcess(data, "log_level=WARNING") as gw:
        admin = rd_admin(gw)  # (held: a collected handle fails its futures)
        assert str(admin.describe_topics(TopicCollection([name]))[name].result(10).topic_id) == topic_id
