"""`logway bench kafka-produce`: Kafka produce throughput with librdkafka (confluent-kafka), an idempotent producer
next to a transactional one (issue 12; figures in BENCHMARKS.md, never in tests).

Both produce `--records` records of `--record-bytes` bytes to one partition with acks=all, linger 5 ms and
librdkafka's default batching; the transactional producer commits a transaction every `--txn-records` records
(begin, produce, commit_transaction — which waits for every record's acknowledgement and the coordinator's
markers). The clock runs from the first produce() to the last acknowledgement (idempotent: flush(); transactional:
the last commit). A read_committed consumer then reads the topic back, checking the count (no aborted or lost
record), untimed. Each run starts its own gateway (`GatewayProcess`) with a fresh data directory on 127.0.0.1.

confluent-kafka is a test dependency (`pip install -e .[test]`), imported only when the benchmark runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_produce"]


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000, help="records per producer")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--txn-records", type=int, default=1000, help="records per transaction")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--mode", default="both", choices=("both", "idempotent", "transactional"),
                        help="which producer(s) to measure")


def bench_produce(records: int, record_bytes: int, txn_records: int, flush: str, mode: str) -> dict:
    """{mode: (seconds, records/s, MB/s)} for the producers asked for."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from .launcher import GatewayProcess

    results = {}
    payload = os.urandom(record_bytes)
    with tempfile.TemporaryDirectory(prefix="logway-bench-kafka-") as tmp:
        gw = GatewayProcess(os.path.join(tmp, "data"), f"storage.flush={flush}", "log_level=WARNING")
        try:
            bootstrap = "%s:%d" % gw.addresses["kafka"]
            modes = ("idempotent", "transactional") if mode == "both" else (mode,)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for m in modes:
                admin.create_topics([NewTopic(m, 1, 1)])[m].result(10)
            for m in modes:
                conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 21}
                if m == "transactional":
                    conf["transactional.id"] = "bench-" + os.urandom(4).hex()
                producer = Producer(conf)
                if m == "transactional":
                    producer.init_transactions(30)
                start = time.perf_counter()
                if m == "idempotent":
                    for i in range(records):
                        _produce(producer, m, payload)
                    producer.flush(120)
                else:
                    for first in range(0, records, txn_records):
                        producer.begin_transaction()
                        for i in range(first, min(first + txn_records, records)):
                            _produce(producer, m, payload)
                        producer.commit_transaction(120)
                seconds = time.perf_counter() - start
                results[m] = (seconds, records / seconds, records * record_bytes / seconds / 1e6)
            for m in modes:  # read back (untimed): every record once, nothing aborted
                consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit":
                                     False, "isolation.level": "read_committed", "fetch.queue.backoff.ms": 10})
                consumer.assign([TopicPartition(m, 0, 0)])
                count, deadline = 0, time.monotonic() + 120
                while count < records and time.monotonic() < deadline:
                    for msg in consumer.consume(10000, 0.5):
                        if not msg.error():
                            count += 1
                consumer.close()
                if count != records:
                    raise RuntimeError(f"{m}: read back {count} of {records} records")
        finally:
            gw.stop()
    return results


def _produce(producer, topic: str, payload: bytes) -> None:
    while True:
        try:
            producer.produce(topic, payload, partition=0)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.05)


def run(args: argparse.Namespace) -> int:
    results = bench_produce(args.records, args.record_bytes, args.txn_records, args.flush, args.mode)
    print(f"kafka-produce: {args.records:,} records x {args.record_bytes} B, one partition, acks=all, "
          f"flush={args.flush}, librdkafka (confluent-kafka)")
    for mode, (seconds, rate, mbps) in results.items():
        extra = f" (transactions of {args.txn_records:,})" if mode == "transactional" else ""
        print(f"  {mode:<13} {seconds:7.2f} s  {rate:12,.0f} records/s  {mbps:7.1f} MB/s{extra}")
    return 0


BENCHMARKS = [Benchmark("kafka-produce", "Kafka produce throughput, idempotent vs transactional (librdkafka)",
                        arguments, run)]
