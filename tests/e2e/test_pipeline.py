"""The Spark data pipeline (`logway.pipeline`): client, producer, decoder, options and push-down without Spark;
then, against one gateway process and one SparkSession (local[2]), batch reads (of records produced through
Kafka and through the native protocol), offsets and timestamps, push-down, streaming with Trigger.AvailableNow
and maxRecordsPerTrigger, writes, a streaming topic-to-topic copy, and what transactions guarantee: the
transactional producer, aborted records left out of reads, a retried write task and a micro-batch re-run after a
restart (option exactlyOnce) written once.

The Spark tests skip with the reason when pyspark or Java 17+ is missing, unless REQUIRE_SPARK=1 (see
`spark_fixtures`)."""

from __future__ import annotations

import ast
import datetime as dt
import pickle
import random
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logway.clients.errors import KafkaError
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.codecs.kafka.records import decode_batch, decode_records, encode_batch, iter_batches
from logway.codecs.records import Record
from logway.pipeline import DataLossError, JavaNotFound, OptionError, Producer
from logway.pipeline.java import java_problem

from ..spark_fixtures import (kafka_address, logway_gateway, new_topic, read_rows, require_spark,  # noqa: F401
                             spark)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent.parent
BASE_MS = 1_700_000_000_000


def ms(ts: dt.datetime) -> int:
    """A Spark timestamp (a naive datetime in local time) as ms since the epoch."""
    return round(ts.timestamp() * 1000)


def client_for(address: str) -> KafkaClient:
    return KafkaClient(KafkaConfig.parse(address))


# ============================================================================ without Spark: layering, Java, options

def test_pipeline_imports_respect_the_layers_and_modules_have_docstrings():
    offenders = []
    for path in sorted((ROOT / "pipeline").glob("*.py")):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path.name} has no module docstring"
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] == "trio" or name.startswith("logway.storage") or (
                        name.startswith("logway.gateway") and path.name != "bench.py"):
                    offenders.append(f"{path.name} imports {name}")
    assert not offenders, offenders


def test_missing_java_gives_the_clear_message(tmp_path, monkeypatch):
    message = java_problem({"PATH": str(tmp_path)})
    assert message.startswith("Spark needs a Java 17+ runtime") and "JAVA_HOME" in message
    old = tmp_path / "old" / "bin"
    old.mkdir(parents=True)
    (old / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    (old / "java").chmod(0o755)
    assert "is Java 11" in java_problem({"JAVA_HOME": str(tmp_path / "old")})
    eight = tmp_path / "eight" / "bin"
    eight.mkdir(parents=True)
    (eight / "java").write_text('#!/bin/sh\necho \'java version "1.8.0_292"\' >&2\n')
    (eight / "java").chmod(0o755)
    assert "is Java 8" in java_problem({"JAVA_HOME": str(tmp_path / "eight")})

    from logway.pipeline.session import spark_session

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(JavaNotFound, match=r"Spark needs a Java 17\+ runtime"):
        spark_session()


def test_spark_tests_skip_without_java_unless_required(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.delenv("REQUIRE_SPARK", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"Spark needs a Java 17\+ runtime"):
        require_spark()
    monkeypatch.setenv("REQUIRE_SPARK", "1")
    with pytest.raises(pytest.fail.Exception, match=r"REQUIRE_SPARK=1 but Spark needs a Java 17\+ runtime"):
        require_spark()


def test_options_are_checked_with_clear_errors():
    from logway.pipeline.options import read_options, write_options

    ok = {"gateway": "127.0.0.1:9092", "subscribe": "a,b"}
    opts = read_options(ok, streaming=False)
    assert opts.subscribe == ("a", "b") and opts.client.port == 9092
    assert read_options({"GATEWAY": "[::1]:19092", "subscribePattern": "a.*"}, streaming=True).client.host == "::1"
    cases = [
        ({"subscribe": "a"}, "option 'gateway' is required"),
        ({"gateway": "h:1"}, "exactly one of the options subscribe"),
        ({**ok, "subscribePattern": "x"}, "exactly one of the options subscribe"),
        ({**ok, "startingOffset": "earliest"}, "unknown read option"),
        ({**ok, "startingOffsets": "{bad"}, "not valid JSON"),
        ({**ok, "endingOffsets": "earliest"}, "expected latest or JSON"),
        ({**ok, "maxRecordsPerPartition": "0"}, "must be positive"),
        ({**ok, "maxRecordsPerTrigger": "5"}, "cannot be used in a batch read"),
        ({**ok, "gateway": "host:port"}, "is not a number"),
    ]
    for options, message in cases:
        with pytest.raises(OptionError, match=message):
            read_options(options, streaming=False)
    with pytest.raises(OptionError, match="cannot be used in a streaming read"):
        read_options({**ok, "endingOffsets": "latest"}, streaming=True)
    assert write_options({"gateway": "h:1", "compression": "ZSTD"}).compression == 4
    with pytest.raises(OptionError, match="expected one of"):
        write_options({"gateway": "h:1", "compression": "brotli"})
    plain = write_options({"gateway": "h:1"}, streaming=True)
    assert (plain.exactly_once, plain.transaction_timeout_ms) == (False, 60000)
    eo = write_options({"gateway": "h:1", "exactlyOnce": "TRUE", "transactionTimeoutMs": "5000"}, streaming=True)
    assert (eo.exactly_once, eo.transaction_timeout_ms) == (True, 5000)
    with pytest.raises(OptionError, match="exactlyOnce is for streaming writes"):
        write_options({"gateway": "h:1", "exactlyOnce": "true"})
    with pytest.raises(OptionError, match="must be true or false"):
        write_options({"gateway": "h:1", "exactlyOnce": "yes"}, streaming=True)
    with pytest.raises(OptionError, match="must be positive"):
        write_options({"gateway": "h:1", "transactionTimeoutMs": "0"})


def test_partitioner_matches_kafka_python():
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    from logway.pipeline.producer import murmur2, partition_for_key

    rng = random.Random(3)
    for _ in range(300):
        key = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
        partitions = rng.randint(1, 12)
        assert murmur2(key) == kafka_python_murmur2(key) & 0xFFFFFFFF
        assert partition_for_key(key, partitions) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    # Kafka's own test vectors (org.apache.kafka.common.utils.UtilsTest#testMurmur2)
    assert murmur2(b"21") & 0xFFFFFFFF == (-973932308) & 0xFFFFFFFF
    assert murmur2(b"foobar") & 0xFFFFFFFF == (-790332482) & 0xFFFFFFFF


def test_admit_splits_a_backlog_in_proportion_and_exactly():
    from logway.pipeline.stream import admit

    assert admit({("t", 0): 5, ("t", 1): 3}, 100) == {("t", 0): 5, ("t", 1): 3}
    take = admit({("t", 0): 30, ("t", 1): 10, ("t", 2): 0}, 8)
    assert sum(take.values()) == 8 and take[("t", 0)] == 6 and take[("t", 1)] == 2 and take[("t", 2)] == 0
    take = admit({("t", p): 1 for p in range(5)}, 3)
    assert sum(take.values()) == 3 and all(v <= 1 for v in take.values())


# ============================================================================================ the Arrow decoder

_record = st.builds(
    Record,
    value=st.none() | st.binary(max_size=300) | st.sampled_from([b"x" * 5000]),
    key=st.none() | st.binary(max_size=40),
    timestamp=st.none() | st.integers(BASE_MS, BASE_MS + 3000) | st.integers(BASE_MS, BASE_MS + 5_000_000),
    headers=st.just(()) | st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)),
                                   max_size=2).map(tuple),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.tuples(st.lists(_record, min_size=1, max_size=80), st.sampled_from([0, 0, 1, 2, 3, 4]),
                                  st.booleans()), min_size=1, max_size=4),
       cut=st.tuples(st.integers(0, 400), st.integers(0, 400)))
def test_arrow_decoder_equals_the_codec(batches, cut):
    pytest.importorskip("pyarrow")
    from logway.pipeline.arrow import decode_fetch

    data, offset = [], 0
    for records, codec, log_append in batches:
        data.append(encode_batch(records, base_offset=offset, default_timestamp=BASE_MS, compression=codec,
                                 timestamp_type=1 if log_append else 0))
        offset += len(records)
    data = b"".join(data)
    start, end = min(cut), max(cut)
    decoded = decode_fetch(data, "topic", 7, start, end)
    expected = [r for r in decode_records(data, min_offset=start) if r.offset < end]
    got = decoded.batch.to_pylist() if decoded.batch is not None else []
    assert len(got) == len(expected)
    for row, rec in zip(got, expected):
        assert (row["offset"], row["key"], row["value"]) == (rec.offset, rec.key, rec.value)
        assert row["timestamp"] == dt.datetime.fromtimestamp(rec.timestamp / 1000, dt.timezone.utc)
        assert [(h["key"], h["value"]) for h in row["headers"]] == list(rec.headers)
        assert (row["topic"], row["partition"]) == ("topic", 7)


def test_arrow_decoder_fast_path_handles_plain_records(monkeypatch):
    pytest.importorskip("pyarrow")
    from logway.pipeline import arrow

    monkeypatch.setattr(arrow, "_slow", lambda *a: pytest.fail("the fast path gave up on plain records"))
    rng = random.Random(5)
    batches, offset = [], 0
    for sizes in ([100] * 700, [rng.randint(0, 3000) for _ in range(300)], [5, 5, 5, 70, 70, 70, 70]):
        recs = [Record(bytes([i % 251]) * n, key=None if i % 3 else b"k%d" % i, timestamp=BASE_MS + i)
                for i, n in enumerate(sizes)]
        batches.append(encode_batch(recs, base_offset=offset, default_timestamp=BASE_MS, compression=offset % 3))
        offset += len(recs)
    data = b"".join(batches)
    decoded = arrow.decode_fetch(data, "t", 0, 0, offset)
    rows = decoded.batch.to_pylist()
    expected = decode_records(data)
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(r.offset, r.key, r.value) for r in expected]
    assert decoded.next_offset == offset and decoded.done


def test_arrow_schema_is_what_spark_expects():
    pytest.importorskip("pyspark")  # no JVM needed
    from pyspark.sql.pandas.types import to_arrow_schema

    from logway.pipeline.arrow import ARROW_SCHEMA
    from logway.pipeline.source import SCHEMA

    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


# ========================================================================== the client, against a real gateway

def test_client_metadata_offsets_and_fetch(kafka_address):
    topic = new_topic()
    with client_for(kafka_address) as client:
        assert client.create_topic(topic, 2) is True
        assert client.create_topic(topic, 2) is False
        assert client.partition_counts([topic, "no-such-topic"]) == {topic: 2}
        producer = Producer(client, batch_bytes=200)
        for i in range(40):
            producer.send(topic, b"v%02d" % i, partition=i % 2, timestamp=BASE_MS + i)
        producer.flush()
        assert producer.records_sent == 40 and producer.batches_sent > 2
        tp0, tp1 = (topic, 0), (topic, 1)
        assert client.list_offsets({tp0: -2, tp1: -1}) == {tp0: 0, tp1: 20}
        assert client.list_offsets({tp0: BASE_MS + 10, tp1: BASE_MS + 999}) == {tp0: 5, tp1: -1}
        result = client.fetch(topic, 1, 3, 1 << 20)
        assert result.high_watermark == 20
        values = [r.value for r in decode_records(result.records, min_offset=3)]
        assert values == [b"v%02d" % i for i in range(7, 40, 2)]
        with pytest.raises(KafkaError, match="OFFSET_OUT_OF_RANGE") as err:
            client.fetch(topic, 0, 999, 1 << 20)
        assert (err.value.topic, err.value.partition) == (topic, 0)
        copy = pickle.loads(pickle.dumps(client))
        assert copy.config == client.config and copy._sock is None
        assert copy.partition_counts([topic]) == {topic: 2}
        copy.close()


class DroppingProxy:
    """A TCP proxy to the gateway that, once, forwards a request of api key `drop_key`, reads the gateway's
    answer, and then closes the client's connection instead of passing the answer on: the request was applied
    but the client never hears of it."""

    def __init__(self, target: tuple[str, int], drop_key: int) -> None:
        self.target, self.drop_key, self.dropped = target, drop_key, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _frame(sock) -> bytes | None:
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        size = struct.unpack(">i", head)[0]
        body = b""
        while len(body) < size:
            chunk = sock.recv(size - len(body))
            if not chunk:
                return None
            body += chunk
        return head + body

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn) -> None:
        upstream = socket.create_connection(self.target)
        try:
            while (request := self._frame(conn)) is not None:
                upstream.sendall(request)
                answer = self._frame(upstream)
                if answer is None:
                    return
                if struct.unpack(">h", request[4:6])[0] == self.drop_key and not self.dropped:
                    self.dropped += 1
                    return
                conn.sendall(answer)
        finally:
            conn.close()
            upstream.close()

    def close(self) -> None:
        self.listener.close()


def test_a_produce_retried_after_a_lost_answer_is_not_duplicated(logway_gateway, kafka_address):
    topic = new_topic()
    with client_for(kafka_address) as admin:
        admin.create_topic(topic, 1)
    proxy = DroppingProxy(logway_gateway.addresses["kafka"], drop_key=0)
    try:
        with KafkaClient(KafkaConfig.parse(proxy.address, retry_backoff=0.01)) as client:
            producer = Producer(client)
            for i in range(10):
                producer.send(topic, b"r%d" % i, partition=0)
            producer.flush()  # appended, answer lost, re-sent: the gateway recognises the sequence numbers
            producer.send(topic, b"after", partition=0)
            producer.flush()
    finally:
        proxy.close()
    assert proxy.dropped == 1
    with client_for(kafka_address) as client:
        records = decode_records(client.fetch(topic, 0, 0, 1 << 20).records)
    assert [r.value for r in records] == [b"r%d" % i for i in range(10)] + [b"after"]


def test_gateway_errors_carry_code_and_message(kafka_address):
    with client_for(kafka_address) as client:
        with pytest.raises(KafkaError) as err:
            client.produce("no-such-topic-x", 0, encode_batch([Record(b"x")], default_timestamp=BASE_MS))
    assert err.value.code == 3 and "UNKNOWN_TOPIC_OR_PARTITION" in str(err.value)
    assert "no-such-topic-x" in str(err.value)
    assert pickle.loads(pickle.dumps(err.value)).code_name == "UNKNOWN_TOPIC_OR_PARTITION"
    unreachable = KafkaClient(KafkaConfig("127.0.0.1", 1, retries=1, retry_backoff=0.01, connect_timeout=1))
    with pytest.raises(Exception, match="cannot reach the logway gateway at 127.0.0.1:1"):
        unreachable.partition_counts()


def _filling(client, topic: str, partitions: int, per_partition: int, per_batch: int = 10) -> None:
    """`per_partition` records in every partition, values "p<partition>-<i>", timestamps BASE_MS + i."""
    for p in range(partitions):
        for first in range(0, per_partition, per_batch):
            recs = [Record(b"p%d-%d" % (p, i), key=b"k%d" % i, timestamp=BASE_MS + i)
                    for i in range(first, min(first + per_batch, per_partition))]
            client.produce(topic, p, encode_batch(recs, default_timestamp=BASE_MS))


def test_pushdown_reduces_what_is_fetched(kafka_address):
    """In process (the reader's own counters): partition, offset and timestamp predicates shrink the fetches,
    and the rows are exactly the matching ones. No JVM needed: the reader runs here as it would in a task."""
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, LessThan

    from logway.pipeline.source import SCHEMA, LogwayDataSource, LogwayFilteringReader

    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 3)
        _filling(client, topic, 3, 200)
    options = {"gateway": kafka_address, "subscribe": topic, "pushFilters": "true"}

    def run(filters):
        reader = LogwayDataSource(dict(options)).reader(SCHEMA)
        assert isinstance(reader, LogwayFilteringReader)
        left = list(reader.pushFilters(filters))
        rows = [row for part in reader.partitions() for batch in reader.read(part) for row in batch.to_pylist()]
        return reader, left, rows

    full, _, all_rows = run([])
    assert len(all_rows) == 600
    since = dt.datetime.fromtimestamp((BASE_MS + 120) / 1000, dt.timezone.utc)
    filters = [EqualTo(("partition",), 1), GreaterThanOrEqual(("offset",), 50), LessThan(("offset",), 150),
               GreaterThan(("timestamp",), since), EqualTo(("key",), b"k3")]
    narrow, left, rows = run(filters)
    assert left == filters[3:]  # timestamp narrows but Spark re-checks it; key is not ours
    assert [(r["partition"], r["offset"]) for r in rows] == [(1, o) for o in range(121, 150)]
    assert narrow.stats.records_decoded < full.stats.records_decoded / 10
    assert narrow.stats.bytes_fetched < full.stats.bytes_fetched / 5
    empty, _, rows = run([EqualTo(("partition",), 7)])
    assert rows == [] and empty.stats.fetches == 0


# ================================================================================================== Spark: batch

def test_batch_read_equals_what_kafka_python_produced(spark, kafka_address):
    from kafka import KafkaProducer

    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 3)
    producer = KafkaProducer(bootstrap_servers=kafka_address, linger_ms=5)
    futures = []
    for i in range(300):
        key = b"k%d" % (i % 11) if i % 5 else None
        headers = [("h", b"%d" % i), ("empty", b"")] if i % 7 == 0 else []
        fut = producer.send(topic, value=b"value-%d" % i, key=key, partition=i % 3, timestamp_ms=BASE_MS + i,
                            headers=headers)
        futures.append((fut, key, b"value-%d" % i, BASE_MS + i, headers))
    producer.flush()
    expected = []
    for fut, key, value, ts, headers in futures:
        md = fut.get(timeout=10)
        expected.append((md.partition, md.offset, key, value, ts, headers))
    producer.close()
    rows = read_rows(spark, kafka_address, subscribe=topic)
    got = [(r.partition, r.offset, r.key, r.value, ms(r.timestamp), [(h.key, h.value) for h in r.headers])
           for r in rows]
    assert got == sorted(expected)
    assert {(r.topic, r.timestampType) for r in rows} == {(topic, 0)}


def test_batch_read_equals_what_the_native_protocol_produced(spark, logway_gateway, kafka_address):
    topic = new_topic()
    expected = []
    with NativeClient(*logway_gateway.native) as native:
        native.create_topic(topic, 2)
        for p in range(2):
            recs = [Record(b"n%d-%d" % (p, i), key=b"key%d" % i if i % 2 else None, timestamp=BASE_MS + 10 * i)
                    for i in range(25)]
            offsets = native.produce(topic, p, recs)
            expected += [(p, o, r.key, r.value, r.timestamp, list(r.headers)) for o, r in zip(offsets, recs)]
            native.produce(topic, p, [b"plain-%d" % p])
            expected.append((p, 25, None, b"plain-%d" % p, None, []))
    rows = read_rows(spark, kafka_address, subscribe=topic)
    got = [(r.partition, r.offset, r.key, r.value, ms(r.timestamp), [(h.key, h.value) for h in r.headers])
           for r in rows]
    assert [g[:4] + g[5:] for g in got] == [e[:4] + e[5:] for e in expected]
    assert [g[4] for g in got if g[1] < 25] == [e[4] for e in expected if e[1] < 25]


def test_batch_read_of_a_compacted_topic_steps_over_the_gaps(spark, tmp_path):
    """A compacted topic (cleanup.policy=compact, its cleaner eager): the rows are the last record of each key at
    its offset, whatever the tasks' ranges (some hold only offsets the cleaner emptied)."""
    from logway.bench.launcher import GatewayProcess

    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING", "storage.flush_interval_ms=50",
                        "storage.cleaner_check_interval_ms=50", "storage.cleaner_io_bytes_per_second=0") as gw:
        topic = new_topic("compacted")
        with NativeClient(*gw.native) as native:
            native.create_topic(topic, 1)
            native.alter_topic_config(topic, {"cleanup.policy": "compact", "segment.bytes": 1024,
                                              "min.cleanable.dirty.ratio": 0.01})
            rows = []
            for i in range(0, 120, 4):  # keys 0..6 written throughout, 7..9 only at first: gaps in the middle
                recs = [Record(b"v%d" % j, key=b"k%d" % (j % (10 if j < 40 else 7))) for j in range(i, i + 4)]
                rows += list(zip(native.produce(topic, 0, recs), (r.key for r in recs), (r.value for r in recs)))
            for i in range(3):  # roll the active segment past them: all of them can be cleaned
                rows += [(native.produce(topic, 0, [Record(b"r" * 700, key=b"roll%d" % i)])[0], b"roll%d" % i,
                          b"r" * 700)]
            latest = {}
            for row in rows:
                latest[row[1]] = row
            expected = sorted(latest.values())
            deadline = time.monotonic() + 30
            while len(_native_rows(native, topic)) != len(expected):
                assert time.monotonic() < deadline, "not compacted in time"
                time.sleep(0.05)
        address = "%s:%d" % gw.addresses["kafka"]
        for per_task in (None, 5):
            options = {} if per_task is None else {"maxRecordsPerPartition": per_task}
            got = [(r.offset, r.key, r.value) for r in read_rows(spark, address, subscribe=topic, **options)]
            assert got == expected, per_task


def _native_rows(native, topic) -> list:
    out, offset = [], 0
    while True:
        resp = native.fetch(topic, 0, offset)
        out += resp.records
        if not resp.records:
            return out
        offset = resp.next_offset


def test_batch_offsets_and_timestamps(spark, kafka_address):
    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 2)
        _filling(client, topic, 2, 50)

    def offsets(**options):
        return [(r.partition, r.offset) for r in read_rows(spark, kafka_address, subscribe=topic, **options)]

    assert offsets() == [(p, o) for p in range(2) for o in range(50)]
    assert offsets(startingOffsets='{"%s": {"0": 10, "1": -2}}' % topic,
                   endingOffsets='{"%s": {"0": 20, "1": -1}}' % topic) == (
        [(0, o) for o in range(10, 20)] + [(1, o) for o in range(50)])
    assert offsets(startingOffsets="latest") == []
    assert offsets(startingTimestamp=BASE_MS + 20, endingTimestamp=BASE_MS + 30) == (
        [(p, o) for p in range(2) for o in range(20, 30)])
    assert offsets(startingOffsetsByTimestamp='{"%s": {"1": %d}}' % (topic, BASE_MS + 45)) == (
        [(0, o) for o in range(50)] + [(1, o) for o in range(45, 50)])
    assert offsets(startingTimestamp=BASE_MS + 10_000) == []
    assigned = read_rows(spark, kafka_address, assign='{"%s": [1]}' % topic, maxRecordsPerPartition=7)
    assert [(r.partition, r.offset) for r in assigned] == [(1, o) for o in range(50)]
    with pytest.raises(Exception, match="give exactly one of the options subscribe"):
        offsets(assign='{"%s": [1]}' % topic)
    df = spark.read.format("logway").option("gateway", kafka_address).option("subscribe", topic).option(
        "maxRecordsPerPartition", "7").load()
    assert df.rdd.getNumPartitions() == 2 * 8


def test_spark_filters_return_exactly_the_matching_rows(spark, kafka_address):
    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 3)
        _filling(client, topic, 3, 60)
    def reader():
        return spark.read.format("logway").option("gateway", kafka_address).option("subscribe", topic)

    query = "partition = 2 AND offset >= 10 AND offset < 20 AND timestamp >= timestamp_millis(%d)" % (BASE_MS + 15)
    pushed = reader().option("pushFilters", "true").load().where(query).collect()
    assert sorted((r.partition, r.offset) for r in pushed) == [(2, o) for o in range(15, 20)]
    # The default is safe to reuse: a DataFrame queried with filters, then without, still reads everything.
    df = reader().load()
    assert df.where(query).count() == 5
    assert df.count() == 180


def test_reading_a_missing_topic_fails_clearly(spark, kafka_address):
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PARTITION"):
        read_rows(spark, kafka_address, subscribe="never-created-" + new_topic())


# ============================================================================================== Spark: streaming

def _available_now(spark, address: str, checkpoint, **options):
    """Run one Trigger.AvailableNow query; returns the values of each non-empty micro-batch."""
    batches = []

    def collect(df, batch_id):
        values = [r.value for r in df.collect()]
        if values:
            batches.append(values)

    reader = spark.readStream.format("logway").option("gateway", address)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    query = (reader.load().writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None
    return batches


def test_stream_available_now_twice_on_one_checkpoint(spark, kafka_address, tmp_path):
    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 3)
        producer = Producer(client)
        for i in range(30):
            producer.send(topic, b"first-%d" % i, partition=i % 3)
        producer.flush()
        first = _available_now(spark, kafka_address, tmp_path / "ck", subscribe=topic, startingOffsets="earliest")
        assert sorted(v for b in first for v in b) == sorted(b"first-%d" % i for i in range(30))
        for i in range(20):
            producer.send(topic, b"second-%d" % i, partition=i % 3)
        producer.flush()
    second = _available_now(spark, kafka_address, tmp_path / "ck", subscribe=topic, startingOffsets="earliest")
    assert sorted(v for b in second for v in b) == sorted(b"second-%d" % i for i in range(20))
    assert _available_now(spark, kafka_address, tmp_path / "ck", subscribe=topic) == []


def test_max_records_per_trigger_splits_the_backlog(spark, kafka_address, tmp_path):
    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 2)
        producer = Producer(client)
        for i in range(35):
            producer.send(topic, b"r%d" % i, partition=0 if i < 20 else 1)
        producer.flush()
    batches = _available_now(spark, kafka_address, tmp_path / "ck", subscribe=topic, startingOffsets="earliest",
                             maxRecordsPerTrigger=10)
    assert [len(b) for b in batches] == [10, 10, 10, 5]
    assert sorted(v for b in batches for v in b) == sorted(b"r%d" % i for i in range(35))


def test_new_topics_matching_the_pattern_are_picked_up(spark, kafka_address, tmp_path):
    prefix = new_topic("pat")
    with client_for(kafka_address) as client:
        client.create_topic(prefix + "-a", 1)
        client.produce(prefix + "-a", 0, encode_batch([Record(b"a1")], default_timestamp=BASE_MS))
        options = dict(subscribePattern=prefix.replace("-", "[-]") + "-.*", startingOffsets="earliest")
        assert _available_now(spark, kafka_address, tmp_path / "ck", **options) == [[b"a1"]]
        client.create_topic(prefix + "-b", 2)
        client.produce(prefix + "-b", 1, encode_batch([Record(b"b1"), Record(b"b2")], default_timestamp=BASE_MS))
        client.produce(prefix + "-a", 0, encode_batch([Record(b"a2")], default_timestamp=BASE_MS))
    later = _available_now(spark, kafka_address, tmp_path / "ck", **options)
    assert sorted(v for b in later for v in b) == [b"a2", b"b1", b"b2"]


# ================================================================================================= Spark: writes

def test_write_then_read_back(spark, kafka_address):
    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 3)
    stamp = dt.datetime.fromtimestamp((BASE_MS + 5) / 1000)
    data = [(b"k%d" % i if i % 4 else None, b"value-%d" % i, i % 3,
             [("h", b"%d" % i)] if i % 5 == 0 else [], stamp) for i in range(60)]
    df = spark.createDataFrame(data, "key binary, value binary, partition int, "
                                     "headers array<struct<key string, value binary>>, timestamp timestamp")
    df.write.format("logway").option("gateway", kafka_address).option("topic", topic).mode("append").save()
    rows = read_rows(spark, kafka_address, subscribe=topic)
    assert sorted((r.partition, r.value, r.key, [(h.key, h.value) for h in r.headers], ms(r.timestamp))
                  for r in rows) == sorted((p, v, k, h, BASE_MS + 5) for k, v, p, h, _ in data)
    offsets = [r.offset for r in rows if r.partition == 0]  # increasing, with a gap for each transaction marker
    assert len(offsets) == 20 and offsets == sorted(set(offsets)) and offsets[-1] < 20 + 2  # 2 write tasks

    other = new_topic()
    strings = spark.createDataFrame([("a", "1", other), ("b", "2", other), (None, "3", other)],
                                    "key string, value string, topic string")
    strings.write.format("logway").option("gateway", kafka_address).mode("append").save()
    assert sorted(r.value for r in read_rows(spark, kafka_address, subscribe=other)) == [b"1", b"2", b"3"]


@pytest.fixture(scope="module")
def secured_gateway(tmp_path_factory):
    """A second gateway with TLS and SASL (PLAIN and SCRAM) on its Kafka listener, ACLs on: the user `spark` holds
    only the ACLs docs/spark.md lists for a Spark job, granted by the super user `root` over the native protocol."""
    from logway.bench.launcher import GatewayProcess
    from logway.codecs import native as nv

    from ..certs import self_signed

    d = tmp_path_factory.mktemp("secured-pipeline")
    cert, key = self_signed(d, "server")
    with GatewayProcess(str(d / "data"), "listeners.kafka.tls=true", f"tls.cert_file={cert}",
                        f"tls.key_file={key}", "auth.kafka_sasl_plain=true", "auth.kafka_sasl_scram=true",
                        "auth.native_login=true", "auth.users.spark=spark-pw", "auth.users.root=root-pw",
                        "auth.super_users=User:root", "log_level=WARNING",
                        "kafka.auto_create_topics=true") as gw:  # (its write creates the topic)
        grants = [("Topic", "secure-", op) for op in ("Create", "Write", "Read", "Describe")]
        grants += [("TransactionalId", "logway-spark-", op) for op in ("Write", "Describe")]
        grants += [("Group", "logway-spark-", "Read")]
        with NativeClient(*gw.native) as root:
            root.login("root", "root-pw")
            root.create_acls([nv.AclEntry(rtype, name, "PREFIXED", "User:spark", "*", op, "Allow")
                              for rtype, name, op in grants])
        host, port = gw.addresses["kafka"]
        yield f"{host}:{port}", cert


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_write_and_read_over_tls_and_sasl(spark, secured_gateway, mechanism):
    address, cafile = secured_gateway
    security = {"security.protocol": "SASL_SSL", "ssl.cafile": cafile, "sasl.username": "spark",
                "sasl.password": "spark-pw", "sasl.mechanism": mechanism}
    topic = new_topic("secure")
    df = spark.createDataFrame([(b"v%d" % i,) for i in range(25)], "value binary")
    writer = df.write.format("logway").option("gateway", address).option("topic", topic).options(**security)
    writer.mode("append").save()
    rows = read_rows(spark, address, subscribe=topic, **security)
    assert sorted(r.value for r in rows) == sorted(b"v%d" % i for i in range(25))
    with pytest.raises(Exception, match=r"SASL_AUTHENTICATION_FAILED"):
        read_rows(spark, address, subscribe=topic, **{**security, "sasl.password": "wrong"})


def test_a_spark_job_without_the_acls_it_needs_fails_with_the_gateways_refusal(spark, secured_gateway):
    address, cafile = secured_gateway
    security = {"security.protocol": "SASL_SSL", "ssl.cafile": cafile, "sasl.username": "spark",
                "sasl.password": "spark-pw"}
    df = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(Exception, match=r"TOPIC_AUTHORIZATION_FAILED \(29\)"):
        df.write.format("logway").option("gateway", address).option("topic", new_topic("other")).options(
            **security).mode("append").save()


def test_write_errors_surface_as_task_failures_with_the_gateway_error(spark, kafka_address):
    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 1)
    df = spark.createDataFrame([(b"x", 5)], "value binary, partition int")
    with pytest.raises(Exception, match=r"UNKNOWN_TOPIC_OR_PARTITION \(3\)") as err:
        df.write.format("logway").option("gateway", kafka_address).option("topic", topic).mode("append").save()
    assert f"{topic}-5" in str(err.value)
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.createDataFrame([(1,)], "v int").write.format("logway").option("gateway", kafka_address).option(
            "topic", topic).mode("append").save()


def test_streaming_topic_a_to_topic_b_delivers_every_record_once(spark, kafka_address, tmp_path):
    source, sink = new_topic("a"), new_topic("b")
    with client_for(kafka_address) as client:
        client.create_topic(source, 3)
        client.create_topic(sink, 2)
        producer = Producer(client)
        for i in range(100):
            producer.send(source, b"event-%d" % i, key=b"user-%d" % (i % 9))
        producer.flush()

    def copy():
        query = (spark.readStream.format("logway").option("gateway", kafka_address).option("subscribe", source)
                 .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", 30).load()
                 .selectExpr("key", "value", "headers")
                 .writeStream.format("logway").option("gateway", kafka_address).option("topic", sink)
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        assert query.awaitTermination(120)
        assert query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    assert sum(copy()) == 100
    with client_for(kafka_address) as client:
        producer = Producer(client)
        for i in range(100, 110):
            producer.send(source, b"event-%d" % i, key=b"user-%d" % (i % 9))
        producer.flush()
    assert copy() == [10]
    rows = read_rows(spark, kafka_address, subscribe=sink)
    assert sorted(r.value for r in rows) == sorted(b"event-%d" % i for i in range(110))
    by_key = {}
    for r in rows:  # keyed records were partitioned by key: every key sits in one partition of the sink
        by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values())


def _write_read_and_stream(spark, first: str, second: str, source: str, sink: str, tmp_path) -> None:
    """80 records written (transactionally) to `source`'s 4 partitions through broker `second`, read back through
    each broker, and copied to `sink` by a stream reading from `first` and writing through `second`."""
    data = [(b"value-%d" % i, i % 4) for i in range(80)]
    spark.createDataFrame(data, "value binary, partition int").write.format("logway").option(
        "gateway", second).option("topic", source).mode("append").save()
    for address in (first, second):
        rows = read_rows(spark, address, subscribe=source)
        assert sorted((r.partition, r.value) for r in rows) == sorted((p, v) for v, p in data)
    query = (spark.readStream.format("logway").option("gateway", first).option("subscribe", source)
             .option("startingOffsets", "earliest").load().selectExpr("value", "partition")
             .writeStream.format("logway").option("gateway", second).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    rows = read_rows(spark, first, subscribe=sink)
    assert sorted((r.partition, r.value) for r in rows) == sorted((p, v) for v, p in data)


@pytest.fixture(scope="module")
def workers_gateway(tmp_path_factory):
    """A `workers: 2` gateway: two brokers on one host, each leading about half of every topic's partitions."""
    from logway.bench.launcher import GatewayProcess

    d = tmp_path_factory.mktemp("workers-pipeline")
    with GatewayProcess(str(d / "data"), "workers=2", "storage.flush=none", "log_level=WARNING") as gw:
        yield gw


def test_spark_writes_reads_and_streams_every_partition_of_a_workers_gateway(spark, workers_gateway, tmp_path):
    """The data source on a `workers: 2` gateway: writes (transactional, over both brokers' partitions), batch
    reads and a streaming copy reach every partition at its leader, whichever broker the option names."""
    gw = workers_gateway
    first, second = ("%s:%d" % gw.addresses[k] for k in ("kafka", "kafka.1"))
    source, sink = new_topic("w"), new_topic("w")
    with client_for(first) as client:
        client.create_topic(source, 4)
        client.create_topic(sink, 4)
        leaders = {client.for_partition(source, p).config.port for p in range(4)}
    assert leaders == {gw.addresses["kafka"][1], gw.addresses["kafka.1"][1]}  # both brokers lead some
    _write_read_and_stream(spark, first, second, source, sink, tmp_path)


@pytest.fixture(scope="module")
def cluster_gateways(tmp_path_factory, pg_server):
    """Two gateways sharing one PostgreSQL database (`storage.postgres.cluster`), each leading about half of every
    topic's partitions."""
    from ..pg_cluster import GatewayPair

    database = pg_server.create_database()
    try:
        with GatewayPair(tmp_path_factory.mktemp("pg-cluster-pipeline"), pg_server, database) as pair:
            yield pair
    finally:
        pg_server.drop_database(database)


def test_spark_writes_reads_and_streams_every_partition_of_two_gateways_over_postgres(spark, cluster_gateways,
                                                                                      tmp_path):
    """The data source on two gateways over one database: transactional writes over both gateways' partitions,
    batch reads and a streaming copy, whichever gateway the option names."""
    from ..pg_cluster import settled

    pair = cluster_gateways
    first, second = ("%s:%d" % gw.addresses["kafka"] for gw in (pair.first, pair.second))
    source, sink = new_topic("c"), new_topic("c")
    with client_for(first) as client:
        client.create_topic(source, 4)
        client.create_topic(sink, 4)
    assert set(settled(pair.first, pair.second, source, 4)) == {0, 1}  # both gateways lead some
    settled(pair.first, pair.second, sink, 4)
    _write_read_and_stream(spark, first, second, source, sink, tmp_path)


def test_data_loss_is_reported(kafka_address):
    """A planned range whose offsets are gone fails with DataLossError (or is skipped when allowed)."""
    pytest.importorskip("pyarrow")
    from logway.pipeline.fetcher import read_range
    from logway.pipeline.ranges import OffsetRange

    topic = new_topic()
    with client_for(kafka_address) as client:
        client.create_topic(topic, 1)
        _filling(client, topic, 1, 10)
        with pytest.raises(DataLossError, match="failOnDataLoss=false"):
            list(read_range(client, OffsetRange(topic, 0, 5, 30), max_bytes=1 << 20))
        rows = [r for b in read_range(client, OffsetRange(topic, 0, 5, 30), max_bytes=1 << 20,
                                      fail_on_data_loss=False) for r in b.to_pylist()]
        assert [r["offset"] for r in rows] == list(range(5, 10))


def _native_values(gateway, topic: str, partitions: int) -> list[bytes]:
    """Every record value a native client reads (committed records only), all partitions."""
    values = []
    with NativeClient(*gateway.native) as native:
        for p in range(partitions):
            offset = 0
            while True:
                answer = native.fetch(topic, p, offset, 1 << 20)
                values += [r.value for r in answer.records]
                if answer.next_offset <= offset or not answer.records:
                    break
                offset = answer.next_offset
    return values


def _uncommitted_count(client, topic: str, partitions: int) -> int:
    """Data records a Kafka read_uncommitted reader sees (aborted ones included, markers left out)."""
    count = 0
    for p in range(partitions):
        offset, end = 0, client.list_offsets({(topic, p): -1})[(topic, p)]
        while offset < end:
            for batch in iter_batches(client.fetch(topic, p, offset, 1 << 20).records):
                header, records = decode_batch(batch)
                count += sum(1 for r in records if r.offset >= offset)
                offset = max(offset, header.base_offset + header.last_offset_delta + 1)
    return count


def test_transactional_producer_commit_abort_offsets_and_fencing(logway_gateway, kafka_address):
    """The pipeline's transactional Producer on the client's transaction calls: aborted records are invisible to
    committed readers (the data source's fetcher and native clients), committed ones and their offsets appear at
    commit, and a newer producer of the transactional id fences the older one (aborting its open transaction)."""
    pytest.importorskip("pyarrow")
    from logway.clients.kafka import READ_COMMITTED
    from logway.pipeline.fetcher import read_range
    from logway.pipeline.ranges import OffsetRange

    topic, tid, group = new_topic("txn"), new_topic("tid"), new_topic("group")
    with client_for(kafka_address) as client:
        client.create_topic(topic, 2)
        producer = Producer(client, batch_bytes=64, transactional_id=tid)
        with pytest.raises(Exception, match="begin"):
            producer.send(topic, b"outside")
        producer.begin()
        for i in range(20):
            producer.send(topic, b"aborted-%d" % i, partition=i % 2)
        producer.flush()
        assert client.list_offsets({(topic, 0): -1}, isolation_level=READ_COMMITTED) == {(topic, 0): 0}  # open
        producer.abort()
        producer.begin()
        for i in range(10):
            producer.send(topic, b"committed-%d" % i, partition=i % 2)
        producer.send_offsets(group, {(topic, 0): 7, (topic, 1): 3})
        assert client.offset_fetch(group) == {}  # offsets take effect at commit
        producer.commit()
        assert client.offset_fetch(group) == {(topic, 0): 7, (topic, 1): 3}
        assert client.offset_fetch(group, [(topic, 1)]) == {(topic, 1): 3}

        ends = client.list_offsets({(topic, p): -1 for p in range(2)}, isolation_level=READ_COMMITTED)
        rows = [r for p in range(2) for b in read_range(client, OffsetRange(topic, p, 0, ends[(topic, p)]),
                                                        max_bytes=1 << 20) for r in b.to_pylist()]
        expected = sorted(b"committed-%d" % i for i in range(10))
        assert sorted(r["value"] for r in rows) == expected
        assert sorted(_native_values(logway_gateway, topic, 2)) == expected
        assert _uncommitted_count(client, topic, 2) == 30  # read_uncommitted Kafka readers see the aborted ones

        producer.begin()  # a transaction left open by a producer that is then replaced
        producer.send(topic, b"zombie", partition=0)
        producer.flush()
        newer = Producer(client, transactional_id=tid)
        newer.begin()
        assert newer.producer_id == producer.producer_id and newer.producer_epoch > producer.producer_epoch
        newer.send(topic, b"newer", partition=0)
        newer.commit()
        producer.send(topic, b"too late", partition=0)
        with pytest.raises(KafkaError, match="FENCED|INVALID_PRODUCER_EPOCH"):
            producer.flush()
        with pytest.raises(KafkaError, match="FENCED|INVALID_PRODUCER_EPOCH"):
            producer.commit()
    assert sorted(_native_values(logway_gateway, topic, 2)) == sorted(expected + [b"newer"])


def test_arrow_walk_drops_aborted_transactions():
    pytest.importorskip("pyarrow")
    from logway.codecs.kafka.records import encode_control_batch
    from logway.pipeline.arrow import decode_fetch

    def batch(offset, values, pid=-1, txn=False):
        return encode_batch([Record(v) for v in values], base_offset=offset, default_timestamp=BASE_MS,
                            producer_id=pid, producer_epoch=0, base_sequence=0 if pid >= 0 else -1,
                            transactional=txn)

    def marker(offset, pid, committed):
        data = bytearray(encode_control_batch(pid, 0, committed=committed, timestamp_ms=BASE_MS))
        data[:8] = struct.pack(">q", offset)
        return bytes(data)

    data = b"".join([
        batch(0, [b"a0", b"a1"], pid=7, txn=True),  # aborted (pid 7, from offset 0)
        batch(2, [b"c2"], pid=8, txn=True),  # committed
        batch(3, [b"p3"]),  # plain
        marker(4, 7, False),
        marker(5, 8, True),
        batch(6, [b"a6"], pid=8, txn=True),  # aborted (pid 8, from offset 6)
        batch(7, [b"c7"], pid=7, txn=True),  # pid 7 again, a later transaction: committed
        marker(8, 8, False),
        marker(9, 7, True),
        batch(10, [b"p10"]),
    ])
    decoded = decode_fetch(data, "t", 0, 0, 100, aborted=((7, 0), (8, 6)))
    assert decoded.batch.column(1).to_pylist() == [b"c2", b"p3", b"c7", b"p10"]
    assert decoded.batch.column(4).to_pylist() == [2, 3, 7, 10]
    assert decoded.next_offset == 11
    everything = decode_fetch(data, "t", 0, 0, 100)  # no aborted list: only the markers are left out
    assert everything.batch.num_rows == 7
    assert decode_fetch(data, "t", 0, 5, 100, aborted=((7, 0), (8, 6))).batch.column(4).to_pylist() == [7, 10]


def test_a_retried_write_task_is_written_once(spark, logway_gateway, kafka_address):
    """A write task's body run as Spark runs attempts of one task (same transactional id): an attempt that dies
    mid-way (its transaction left open), or fails (it aborts), then the retry: committed readers see each row once;
    an attempt that committed, re-run: nothing is appended; another task (another id) appends again."""
    import pyarrow as pa

    from logway.clients.kafka import READ_COMMITTED
    from logway.pipeline.options import WriteOptions
    from logway.pipeline.writer import TaskTransaction, write_batches

    topic = new_topic("retry")
    with client_for(kafka_address) as client:
        client.create_topic(topic, 3)
    opts = WriteOptions(KafkaConfig.parse(kafka_address), topic, 0, 4096)  # small batches: many of them
    n = 2000
    values = [b"row-%04d" % i for i in range(n)]

    def rows(fail_after: int | None = None):
        for start in range(0, n, 500):
            if fail_after is not None and start >= fail_after:
                raise RuntimeError("the task failed mid-way")
            keys = [None if i % 3 else b"k%d" % i for i in range(start, start + 500)]
            yield pa.RecordBatch.from_pydict({"value": values[start:start + 500], "key": keys})

    def committed_ends(client):
        return client.list_offsets({(topic, p): -1 for p in range(3)}, isolation_level=READ_COMMITTED)

    task = TaskTransaction(f"logway-spark-{new_topic('w')}-7-1")
    with client_for(kafka_address) as client:
        dead = Producer(client, batch_bytes=4096, transactional_id=task.transactional_id)
        dead.begin()  # attempt 0 is killed mid-write: its records are sent, its transaction stays open
        for v in values[:700]:
            dead.send(topic, v)
        dead.flush()
        assert sum(committed_ends(client).values()) == 0  # committed readers wait for the open transaction
        with pytest.raises(RuntimeError, match="mid-way"):  # attempt 1 fails: it aborts its own transaction
            write_batches(opts, rows(fail_after=1000), txn=task)
        first = write_batches(opts, rows(), txn=task)  # attempt 2 (fenced 0 and 1's leftovers)
        assert (first.records, first.skipped) == (n, False) and first.batches > 5
        ends = committed_ends(client)
        in_log = _uncommitted_count(client, topic, 3)  # the aborted attempts' records stay in the log
        assert 700 + n < in_log <= 700 + 1000 + n  # (attempt 1 had sent its full batches only)
        again = write_batches(opts, rows(), txn=task)  # attempt 3 of a task already committed
        assert (again.records, again.skipped) == (0, True)
        assert committed_ends(client) == ends and _uncommitted_count(client, topic, 3) == in_log
        with pytest.raises(KafkaError, match="FENCED|INVALID_PRODUCER_EPOCH"):
            dead.send(topic, b"zombie")
            dead.commit()
    spark_values = [r.value for r in read_rows(spark, kafka_address, subscribe=topic)]
    assert sorted(spark_values) == values
    assert sorted(_native_values(logway_gateway, topic, 3)) == values
    other = write_batches(opts, rows(), txn=TaskTransaction(f"logway-spark-{new_topic('w')}-8-1"))
    assert other.records == n  # another task: new records
    assert len(read_rows(spark, kafka_address, subscribe=topic)) == 2 * n


def _copy_stream(spark, address: str, source: str, sink: str, checkpoint, **options):
    """Copy `source` to `sink` with a Trigger.AvailableNow query (20 records per micro-batch); the input row
    counts of its micro-batches, by batch id."""
    writer = (spark.readStream.format("logway").option("gateway", address).option("subscribe", source)
              .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", 20).load()
              .selectExpr("key", "value").writeStream.format("logway").option("gateway", address)
              .option("topic", sink).option("checkpointLocation", str(checkpoint)))
    for key, value in options.items():
        writer = writer.option(key, str(value))
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None
    return {p["batchId"]: p["numInputRows"] for p in query.recentProgress if p["numInputRows"]}


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_micro_batch_rerun_after_a_restart_is_written_once_with_exactly_once(
        spark, logway_gateway, kafka_address, tmp_path, exactly_once):
    """A query stops after a micro-batch's tasks committed but before Spark's checkpoint recorded the batch's
    commit (simulated by deleting the checkpoint's last commits/<id> file); restarted, Spark re-runs that
    micro-batch. With exactlyOnce its rows are not appended again; without, they are (the option matters)."""
    source, sink = new_topic("eo-src"), new_topic("eo-sink")
    values = [b"event-%02d" % i for i in range(60)]
    with client_for(kafka_address) as client:
        client.create_topic(source, 3)
        client.create_topic(sink, 2)
        producer = Producer(client)
        for i, v in enumerate(values):
            producer.send(source, v, partition=i % 3)
        producer.flush()
    options = {"exactlyOnce": "true"} if exactly_once else {}
    checkpoint = tmp_path / "ck"
    assert _copy_stream(spark, kafka_address, source, sink, checkpoint, **options) == {0: 20, 1: 20, 2: 20}
    for name in ("2", ".2.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    rerun = _copy_stream(spark, kafka_address, source, sink, checkpoint, **options)
    assert rerun == {2: 20}  # Spark re-ran the last micro-batch
    got = sorted(r.value for r in read_rows(spark, kafka_address, subscribe=sink))
    native = sorted(_native_values(logway_gateway, sink, 2))
    if exactly_once:
        assert got == native == values
    else:
        assert len(got) == len(native) == 80 and sorted(set(got)) == values


def test_spark_writes_and_reads_a_gateway_on_postgres(spark, tmp_path, pg_server, pg_database):
    """The data source against a gateway whose log is in PostgreSQL (storage.backend postgres): transactional writes
    (one per task) committed in the database, read back exactly once, and the rows stored there."""
    import psycopg

    from logway.bench.launcher import GatewayProcess

    with GatewayProcess(str(tmp_path / "data"), "storage.backend=postgres", f"storage.postgres.dsn={pg_database}",
                        "log_level=WARNING") as gw:
        address = "%s:%d" % gw.addresses["kafka"]
        topic = new_topic("pg")
        with client_for(address) as client:
            client.create_topic(topic, 3)
        df = spark.createDataFrame([(b"k%d" % (i % 7), b"v%d" % i) for i in range(300)], "key binary, value binary")
        df.repartition(4).write.format("logway").option("gateway", address).option("topic", topic).mode(
            "append").save()
        rows = read_rows(spark, address, subscribe=topic)
        assert sorted(r.value for r in rows) == sorted(b"v%d" % i for i in range(300))
        with NativeClient(*gw.native) as c:  # (every protocol reads what Spark wrote)
            ends = [p.log_end_offset for p in c.describe_topic(topic).partitions]
    with psycopg.connect(pg_database) as conn:  # what the database holds: the batches, the tasks' markers among them
        stored = conn.execute("SELECT max(b.end_offset) FROM logway.batches b JOIN logway.partitions p USING "
                              "(partition_id) JOIN logway.topics t USING (topic_id) WHERE t.name = %s "
                              "GROUP BY p.partition ORDER BY p.partition", (topic,)).fetchall()
    assert [end for (end,) in stored] == ends and sum(ends) > 300  # (300 records and the commit markers)
