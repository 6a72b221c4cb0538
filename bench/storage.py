"""`logway bench storage-append`: the storage engine's append path in this process, no gateway, no sockets.

Prebuilt 16 KiB Kafka RecordBatches (flush: none) appended to one partition with 256 MiB segments and 512 MiB
retained, so the page cache holds the log and the run measures the append path, not the disk's writeback speed;
GB/s and RSS. A fresh temporary data directory, removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from .proc import rss_mib
from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_storage_append", "make_batches"]

MiB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-mib", type=int, default=4096, help="MiB to append after the warm-up")
    parser.add_argument("--batch-kib", type=int, default=16, help="size of each prebuilt RecordBatch in KiB")
    parser.add_argument("--segment-mib", type=int, default=256,
                        help="segment size in MiB (two segments are retained)")


def run(args: argparse.Namespace) -> int:
    bench_storage_append(args.total_mib, args.batch_kib, args.segment_mib)
    return 0


BENCHMARKS = [Benchmark("storage-append", "append prebuilt 16 KiB Kafka batches in process (flush: none)",
                        add_arguments, run)]


def make_batches(batch_bytes: int, count: int = 64) -> list[bytes]:
    """`count` Kafka RecordBatches of about `batch_bytes` each (150-byte values with keys)."""
    from logway.codecs.kafka.records import encode_batch
    from logway.codecs.records import Record

    value = b"x" * 150
    per = max(1, batch_bytes // (len(value) + 10))
    now = int(time.time() * 1000)
    batches = []
    for i in range(count):
        recs = [Record(value, key=b"k%d" % j) for j in range(per)]
        batches.append(encode_batch(recs, default_timestamp=now + i))
    return batches


def bench_storage_append(total_mib: int, batch_kib: int, segment_mib: int) -> None:
    """Steady state of a broker with retention: 256 MiB segments, 512 MiB retained per partition, so the page
    cache holds the log and the run measures the append path, not the disk's writeback speed."""
    from logway.codecs.kafka.records import KafkaFormat
    from logway.storage import LogEngine, TopicConfig

    batches = make_batches(batch_kib * 1024)
    size = len(batches[0])
    n = total_mib * MiB // size
    warmup = min(n // 4, 256 * MiB // size)
    with tempfile.TemporaryDirectory(prefix="logway-bench-") as tmp:
        engine = LogEngine(tmp, {"kafka": KafkaFormat()},
                           TopicConfig(segment_bytes=segment_mib * MiB, retention_bytes=2 * segment_mib * MiB))
        engine.create_topic("bench", 1)
        plog = engine.partition("bench", 0)
        append = plog.append
        for i in range(warmup):
            append(batches[i & 63])
        os.sync()  # start with no dirty pages: earlier runs' writeback must not throttle this one
        rss0 = rss_mib()
        samples = []
        quarter = max(n // 4, 1)
        elapsed = 0.0
        segments_seen = len(plog.segments)
        t0 = time.perf_counter()
        for i in range(n):
            append(batches[i & 63])
            if len(plog.segments) != segments_seen:  # a roll: apply retention (timed, as a broker would)
                plog.enforce_retention()
                segments_seen = len(plog.segments)
            if i % quarter == quarter - 1:
                elapsed += time.perf_counter() - t0
                samples.append(round(rss_mib(), 1))
                t0 = time.perf_counter()
        elapsed += time.perf_counter() - t0
        total = n * size
        print(f"storage-append: {n} batches of {size} bytes ({total / MiB:.0f} MiB) in {elapsed:.2f} s "
              f"(after a {warmup * size / MiB:.0f} MiB warm-up; flush: none)")
        print(f"  throughput: {total / elapsed / 1e9:.2f} GB/s ({n / elapsed:,.0f} batches/s)")
        print(f"  log end offset {plog.log_end_offset:,}; {len(plog.segments)} segments kept by retention")
        print(f"  RSS: {rss0:.1f} MiB before, at each quarter of the run: {samples} MiB")
        engine.close()
