"""`logway bench spark-read`: read a topic into Spark through the `logway` data source, end to end.

A gateway starts in a subprocess (fresh temporary data directory, 127.0.0.1, flush: none), a topic of
`--partitions` partitions is filled with `--records` records of `--record-bytes` bytes (RecordBatches of
`--batch-records` records, as a batching producer sends them), then Spark (`--master`, default local[2]) reads the
whole topic once to warm up (Python workers started, JVM code compiled; not counted) and `--runs` more times.
Each run is `df.write.format("noop")`, which makes Spark materialise every column of every row; rows/s = records
/ wall-clock seconds of the Spark job. `--vary` draws value sizes uniformly from 50 %..150 % of `--record-bytes`
instead of a fixed size.

Needs the `logway[spark]` extra and Java 17+ (imported when it runs, not when `logway bench` builds its parser).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time

from .registry import Benchmark

__all__ = ["BENCHMARKS", "add_arguments", "run"]

TOPIC = "spark-bench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=5_000_000, help="records to read")
    parser.add_argument("--record-bytes", type=int, default=100, help="value size in bytes")
    parser.add_argument("--partitions", type=int, default=4, help="topic partitions")
    parser.add_argument("--batch-records", type=int, default=1000, help="records per produced RecordBatch")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--runs", type=int, default=3, help="timed reads after the warm-up")
    parser.add_argument("--vary", action="store_true", help="value sizes from 50%% to 150%% of --record-bytes")
    parser.add_argument("--fetch-max-bytes", type=int, default=None,
                        help="the reader's fetchMaxBytes option (None: the data source's default)")


def _fill(client, partitions: int, records: int, record_bytes: int, batch_records: int, vary: bool) -> None:
    """Produce `records` records round-robin over the partitions, reusing a few prebuilt batches."""
    from logway.codecs.kafka.records import encode_batch
    from logway.codecs.records import Record

    rng = random.Random(7)
    now = int(time.time() * 1000)

    def value(i: int) -> bytes:
        size = rng.randint(record_bytes // 2, record_bytes * 3 // 2) if vary else record_bytes
        return (b"%010d" % i).ljust(size, b"x")[:size]

    templates = [encode_batch([Record(value(j)) for j in range(batch_records)], default_timestamp=now + t)
                 for t in range(8)]
    per_partition = [records // partitions + (1 if p < records % partitions else 0) for p in range(partitions)]
    for p, count in enumerate(per_partition):
        sent = 0
        while sent < count:
            n = min(batch_records, count - sent)
            batch = templates[(sent // batch_records) % len(templates)]
            if n < batch_records:
                batch = encode_batch([Record(value(j)) for j in range(n)], default_timestamp=now)
            client.produce(TOPIC, p, batch, acks=1)
            sent += n


def run(args: argparse.Namespace) -> int:
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.pipeline.session import spark_session

    from .launcher import GatewayProcess

    tmp = tempfile.mkdtemp(prefix="logway-spark-bench-")
    gateway = GatewayProcess(os.path.join(tmp, "data"), "storage.flush=none", "log_level=WARNING",
                             stderr=subprocess.DEVNULL)
    try:
        host, port = gateway.addresses["kafka"]
        address = f"{host}:{port}"
        with KafkaClient(KafkaConfig(host, port)) as client:
            client.create_topic(TOPIC, args.partitions)
            t0 = time.perf_counter()
            _fill(client, args.partitions, args.records, args.record_bytes, args.batch_records, args.vary)
            produced = time.perf_counter() - t0
        size = "50-150 % of " if args.vary else ""
        print(f"produced {args.records:,} records of {size}{args.record_bytes} bytes into {args.partitions} "
              f"partitions in {produced:.1f} s")

        t0 = time.perf_counter()
        spark = spark_session(args.master, "logway-bench", conf={"spark.sql.shuffle.partitions": "4"})
        print(f"SparkSession ({args.master}) ready in {time.perf_counter() - t0:.1f} s")
        reader = spark.read.format("logway").option("gateway", address).option("subscribe", TOPIC)
        if args.fetch_max_bytes:
            reader = reader.option("fetchMaxBytes", str(args.fetch_max_bytes))
        t0 = time.perf_counter()
        reader.load().write.format("noop").mode("overwrite").save()  # starts the Python workers, warms the JIT
        print(f"warm-up read (not counted) in {time.perf_counter() - t0:.1f} s")

        rates = []
        for i in range(args.runs):
            df = reader.load()  # a fresh DataFrame per run: each run plans its offsets again
            t0 = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            seconds = time.perf_counter() - t0
            rates.append(args.records / seconds)
            print(f"run {i + 1}: {args.records:,} rows in {seconds:.2f} s = {rates[-1]:,.0f} rows/s")
        t0 = time.perf_counter()
        counted = reader.load().count()
        seconds = time.perf_counter() - t0
        print(f"count(): {counted:,} rows in {seconds:.2f} s = {counted / seconds:,.0f} rows/s")
        if rates:
            print(f"spark-read: median {statistics.median(rates):,.0f} rows/s, best {max(rates):,.0f} rows/s "
                  f"({args.master}, {args.partitions} partitions, {args.record_bytes}-byte values)")
        spark.stop()
        return 0 if counted == args.records else 1
    finally:
        gateway.stop()
        shutil.rmtree(tmp, ignore_errors=True)


BENCHMARKS = [Benchmark("spark-read", "read 5,000,000 records into Spark (local[2])", add_arguments, run)]
