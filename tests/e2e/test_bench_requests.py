"""`logway bench requests` (bench/requests.py), short, and the lean wire it shares with `logway bench load`.

- Every row runs with a few requests and reports a positive gateway CPU and round trip, and the gateway's GC
  figures (read from its /metrics, which exports Python's GC statistics); no timing is asserted. With
  `--count-calls` the rows also report the gateway's function calls per request.
- The lean readers agree with the codecs' full decoders (the clients of `logway.clients`) on the gateway's real
  answers: record counts, next offsets and high-water marks, for each protocol and storage format, from the start
  of a partition and from the middle of a batch or bundle.
"""

from __future__ import annotations

import os

import pytest

from logway.bench.launcher import GatewayProcess
from logway.bench.requests import (ROWS, TOPICS, AnswerError, KafkaWire, LeanConnection, NativeWire, RequestsSettings,
                                   TankWire, bench_requests, format_results, metric_readings, prepare_topics)
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.kafka.records import encode_batch, iter_batches, parse_header
from logway.codecs.records import Record
from logway.codecs.tank import count_messages, encode_bundle

pytestmark = pytest.mark.slow


def test_every_row_reports_cpu_round_trip_and_gc():
    settings = RequestsSettings(requests=50, warmup=5)
    results = bench_requests(settings)
    print(format_results(results, settings))  # shown with -s or on failure
    assert [(r.protocol, r.request) for r in results] == ROWS
    for r in results:
        assert r.requests == 50
        assert r.cpu_us > 0, r
        assert 0 < r.rtt_p50_us <= r.rtt_p99_us, r
        assert len(r.gc_per_1k) == 3 and all(x >= 0 for x in r.gc_per_1k), r
        assert r.allocs_per_request is not None and r.garbage_per_request is not None, r
        assert r.calls_per_request is None, r  # counted only with count_calls (next test)
        if "Produce" in r.request or "wake-up" in r.request:
            assert r.records == 50 * 10, r
        elif r.request not in ("Ping", "ApiVersions", "Metadata (1 topic)"):
            assert r.records > 50, r  # fetches of a filled partition: many records each


def test_count_calls_reports_the_gateways_function_calls_per_request():
    """`--count-calls`: the gateway counts its event loop's function calls (`count_calls: true`,
    logway_python_calls_total) and each row reports them per request — more for a request that does more."""
    settings = RequestsSettings(requests=40, warmup=5, only=("native Ping", "native Produce 10 x 100 B"),
                                count_calls=True)
    ping, produce = bench_requests(settings)
    print(format_results([ping, produce], settings))
    assert ping.calls_per_request is not None and produce.calls_per_request is not None
    assert 10 < ping.calls_per_request < produce.calls_per_request < 10_000, (ping, produce)
    assert "calls" in format_results([ping, produce], settings).splitlines()[1]


def test_only_selects_protocols_and_rows():
    results = bench_requests(RequestsSettings(requests=5, warmup=0, only=("tank", "kafka ApiVersions")))
    assert [(r.protocol, r.request) for r in results] == [
        row for row in ROWS if row[0] == "tank" or row == ("kafka", "ApiVersions")]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lean")
    with GatewayProcess(str(tmp / "data"), "storage.flush=none", "log_level=WARNING",
                        "listeners.tank.enabled=true") as gw:
        prepare_topics(gw)  # 400 records in partition 0 of req-kafka (Kafka batches) and req-tank (TANK bundles)
        yield gw


def test_metrics_export_python_gc_statistics(gateway):
    stats = metric_readings(gateway.addresses["admin"])
    for name in ("python_gc_collections_total", "python_gc_objects_collected_total", "python_gc_count",
                 "python_gc_threshold"):
        assert name in stats and len(stats[name]) == 3, (name, stats)
    assert stats["python_gc_threshold"][0] > 0


@pytest.mark.parametrize("fmt", ["kafka", "tank"])
@pytest.mark.parametrize("offset", [0, 5, 137])
def test_lean_readers_agree_with_the_clients(gateway, fmt, offset):
    topic = TOPICS[fmt]
    # native: records and next_offset as NativeClient decodes them
    with NativeClient(*gateway.native, timeout=30) as client:
        full = client.fetch(topic, 0, offset, 4096)
    conn = LeanConnection(gateway.native, NativeWire)
    try:
        wire = NativeWire(topic, 0, fetch_bytes=4096)
        s, e = conn.exchange(wire.fetch_frame(offset))
        assert wire.fetch_answer(conn.buf, s, e) == (len(full.records), full.next_offset)
    finally:
        conn.close()
    # Kafka: records at or after the offset in the whole batches, the next offset, the high-water mark
    with KafkaClient(KafkaConfig(*gateway.addresses["kafka"], retries=0)) as kafka:
        result = kafka.fetch(topic, 0, offset, 16384)
    count, next_offset = 0, offset
    for batch in iter_batches(result.records):
        h = parse_header(batch)
        last = h.base_offset + h.last_offset_delta
        count += max(0, last + 1 - max(h.base_offset, offset))
        next_offset = max(next_offset, last + 1)
    conn = LeanConnection(gateway.addresses["kafka"], KafkaWire)
    try:
        wire = KafkaWire(topic, 0, fetch_bytes=16384)
        s, e = conn.exchange(wire.fetch_frame(offset))
        assert wire.fetch_answer(conn.buf, s, e, offset) == (count, next_offset, result.high_watermark)
        assert count > 0
    finally:
        conn.close()
    # TANK: messages at or after the seq, the seq to ask next, the high-water mark (count_messages, the codec's)
    with TankClient(*gateway.addresses["tank"], timeout=30) as tank:
        resp = tank.consume({topic: [(0, offset + 1, 16384)]})
    p = resp.topics[0].partitions[0]
    counted = count_messages(bytes(p.chunk), p.base_seqnum, min_seq=offset + 1, max_seq=p.high_water_mark)
    conn = LeanConnection(gateway.addresses["tank"], TankWire)
    try:
        s, e = conn.receive()  # the greeting
        TankWire.hello_answer(conn.buf, s, e)
        wire = TankWire(topic, 0, fetch_bytes=16384)
        s, e = conn.exchange(wire.consume_frame(offset + 1))
        assert wire.consume_answer(conn.buf, s, e, offset + 1) == (counted.messages, counted.next_seq,
                                                                   p.high_water_mark)
        assert counted.messages > 0
    finally:
        conn.close()


def test_lean_produce_answers_and_errors(gateway):
    records = [Record(os.urandom(100)) for _ in range(10)]
    # native: the offsets a produce got
    conn = LeanConnection(gateway.native, NativeWire)
    try:
        wire = NativeWire(TOPICS["kafka"], 1, records)
        s, e = conn.exchange(wire.produce_frame())
        count, end = wire.produce_answer(conn.buf, s, e)
        assert count == 10
        with NativeClient(*gateway.native, timeout=30) as client:
            assert client.fetch(TOPICS["kafka"], 1, 0, 1 << 20).next_offset == end
        missing = NativeWire("no-such-topic", 0)
        s, e = conn.exchange(missing.fetch_frame(0))
        with pytest.raises(AnswerError):
            missing.fetch_answer(conn.buf, s, e)
    finally:
        conn.close()
    # Kafka: the base offset; an error code raises AnswerError
    conn = LeanConnection(gateway.addresses["kafka"], KafkaWire)
    try:
        wire = KafkaWire(TOPICS["kafka"], 1, encode_batch(records, default_timestamp=1))
        s, e = conn.exchange(wire.produce_frame())
        assert wire.produce_answer(conn.buf, s, e) == end
        missing = KafkaWire(TOPICS["kafka"], 99)
        s, e = conn.exchange(missing.fetch_frame(0))
        with pytest.raises(AnswerError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            missing.fetch_answer(conn.buf, s, e, 0)
    finally:
        conn.close()
    # TANK: error byte 0, then an unknown partition
    conn = LeanConnection(gateway.addresses["tank"], TankWire)
    try:
        conn.receive()  # the greeting
        wire = TankWire(TOPICS["tank"], 1, encode_bundle(records, codec=0, default_timestamp=1))
        s, e = conn.exchange(wire.produce_frame())
        wire.produce_answer(conn.buf, s, e)
        missing = TankWire(TOPICS["tank"], 99, encode_bundle(records, codec=0, default_timestamp=1))
        s, e = conn.exchange(missing.produce_frame())
        with pytest.raises(AnswerError):
            missing.produce_answer(conn.buf, s, e)
    finally:
        conn.close()


def test_lean_discover_partitions_agrees_with_the_tank_client(gateway):
    """TankWire's DiscoverPartitions (the `ping` kind of `bench load` over TANK: its request id sits right after the
    frame header, not after a client version) reads the bounds the TankClient reads; an unknown topic raises."""
    conn = LeanConnection(gateway.addresses["tank"], TankWire)
    try:
        conn.receive()  # the greeting
        with TankClient(*gateway.addresses["tank"], timeout=30) as tank:
            for fmt in ("kafka", "tank"):
                for partition in (0, 1):
                    wire = TankWire(TOPICS[fmt], partition)
                    for _ in range(2):  # a second request id patched into the same frame
                        s, e = conn.exchange(wire.discover_frame())
                        (bounds,) = tank.discover_partitions(TOPICS[fmt], [partition])
                        got = wire.discover_answer(conn.buf, s, e)
                        assert got == (bounds.first_available, bounds.high_water_mark)
                        if partition == 0:
                            assert got[1] >= 400  # prepare_topics' records
                    assert wire.rid == 2
        missing = TankWire("no-such-topic", 0)
        s, e = conn.exchange(missing.discover_frame())
        with pytest.raises(AnswerError, match="0: unknown topic"):
            missing.discover_answer(conn.buf, s, e)
    finally:
        conn.close()


def test_every_row_runs_under_acls():
    """`--acls`: nothing is open without an ACL; the rows' clients are given what they need among ACL_NOISE other
    bindings, so every request is authorized (a refused one would be an AnswerError)."""
    settings = RequestsSettings(requests=20, warmup=2, acls=True)
    results = bench_requests(settings)
    assert [(r.protocol, r.request) for r in results] == ROWS
    assert "ACLs: on" in format_results(results, settings)
