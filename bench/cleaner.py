"""`logway bench cleaner` and `logway bench cleaner-produce`: the log cleaner of compacted topics.

- `cleaner`: the storage engine in this process, no gateway. A compacted partition of `--total-mib` of 16 KiB Kafka
  batches (or TANK bundles with `--format tank`) whose records cover `--keys` keys, every segment synced; one cleaning
  of all of it, unthrottled, timed: MB/s of log cleaned (the bytes of the segments rewritten, per second), the bytes
  read (the keys are mapped, then every segment rewritten), what is left.
- `cleaner-produce`: a gateway process. A topic of `--total-mib` (cleanup.policy delete) is written through the Kafka
  protocol; then one native producer sends one 100-byte record per request, one request at a time, for
  `--seconds` to another topic (the baseline), and again while the gateway's cleaner cleans the first topic (switched
  to compact: its throttle is `--throttle`): produce latency p50/p99/max without and with the cleaner, and how long
  the cleaning took (from the gateway's `logway_cleaner_*` metrics). The cleaner runs in a worker thread and shares
  the interpreter with the event loop: this shows what that costs, and what the throttle buys back.

Fresh temporary data directories, removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import urllib.request

from .registry import Benchmark

__all__ = ["BENCHMARKS"]

MiB = 1024 * 1024
VALUE = b"x" * 100


def add_cleaner_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-mib", type=int, default=128, help="MiB of log to clean")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys the records cover")
    parser.add_argument("--format", choices=("kafka", "tank"), default="kafka", help="the topic's storage format")
    parser.add_argument("--segment-mib", type=int, default=64, help="segment size in MiB")


def add_produce_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-mib", type=int, default=64, help="MiB written to the topic the cleaner cleans")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys its records cover")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="how long the baseline producer runs (and at most how long it runs during cleaning)")
    parser.add_argument("--throttle", type=int, default=None,
                        help="storage.cleaner_io_bytes_per_second (default: the gateway's default; 0 = no limit)")


def _batches(fmt: str, keys: int, count: int, batch_bytes: int = 16 * 1024):
    """`count` 16 KiB batches (bundles) of keyed 100-byte records, keys cycling over `keys`."""
    from logway.codecs.kafka.records import encode_batch
    from logway.codecs.records import Record
    from logway.codecs.tank import encode_bundle, wrap

    per = batch_bytes // (len(VALUE) + 20)
    now = int(time.time() * 1000)
    n = 0
    for _ in range(count):
        recs = [Record(VALUE, key=b"key-%d" % ((n + j) % keys), timestamp=now) for j in range(per)]
        n += per
        yield encode_batch(recs, default_timestamp=now) if fmt == "kafka" else wrap(encode_bundle(recs, codec=0))


def run_cleaner(args: argparse.Namespace) -> int:
    from logway.codecs.kafka.records import KafkaFormat
    from logway.codecs.tank import TankFormat
    from logway.storage import CleanerSettings, LogEngine, Throttle, TopicConfig

    with tempfile.TemporaryDirectory(prefix="logway-bench-") as tmp:
        eng = LogEngine(tmp, {"kafka": KafkaFormat(), "tank": TankFormat()},
                        TopicConfig(segment_bytes=args.segment_mib * MiB))
        plog = eng.create_topic("bench", 1, {"format": args.format, "cleanup.policy": "compact"}).partitions[0]
        first = next(_batches(args.format, args.keys, 1))
        count = args.total_mib * MiB // len(first)
        for batch in _batches(args.format, args.keys, count):
            plog.append(batch)
        plog.roll()
        plog.sync()
        os.sync()
        [plan] = eng.cleaning_plans()
        started = time.perf_counter()
        stats = eng.clean(plan, Throttle(0), CleanerSettings(dedupe_buffer_bytes=256 * MiB))
        elapsed = time.perf_counter() - started
        print(f"cleaner ({args.format}): {stats.segments_before} segment(s), {plan.cleanable_bytes / MiB:.0f} MiB, "
              f"{plog.log_end_offset:,} records over {args.keys:,} keys, cleaned in {elapsed:.2f} s")
        print(f"  throughput: {plan.cleanable_bytes / elapsed / 1e6:.1f} MB/s of log cleaned "
              f"({stats.bytes_read / elapsed / 1e6:.1f} MB/s read: the keys mapped, then every segment rewritten)")
        print(f"  left: {stats.segments_after} segment(s), {stats.bytes_after / MiB:.1f} MiB; "
              f"{stats.records_removed:,} records removed")
        eng.close()
    return 0


def _metric(admin: tuple[str, int], name: str) -> float:
    with urllib.request.urlopen(f"http://{admin[0]}:{admin[1]}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    return 0.0


def _latencies(native, seconds: float, stop: threading.Event | None = None) -> list[float]:
    """Produce one record per request to topic `lat` for `seconds` (or until `stop`); each round trip in ms."""
    from logway.codecs.records import Record

    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        t0 = time.perf_counter()
        native.produce("lat", 0, [Record(VALUE, key=b"k")])
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _summary(ms: list[float]) -> str:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{len(ms):,} produces, p50 {statistics.median(ms):.3f} ms, p99 {p99:.3f} ms, max {ms[-1]:.1f} ms"


def run_cleaner_produce(args: argparse.Namespace) -> int:
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.clients.native import NativeClient

    from .launcher import GatewayProcess

    overrides = ["log_level=WARNING", "storage.cleaner_check_interval_ms=200", "storage.segment_bytes=67108864"]
    if args.throttle is not None:
        overrides.append(f"storage.cleaner_io_bytes_per_second={args.throttle}")
    with tempfile.TemporaryDirectory(prefix="logway-bench-") as tmp, \
            GatewayProcess(os.path.join(tmp, "data"), *overrides) as gw:
        admin = gw.addresses["admin"]
        with NativeClient(*gw.native) as native:
            native.create_topic("backlog", 1)
            native.create_topic("lat", 1)
            first = next(_batches("kafka", args.keys, 1))
            count = args.total_mib * MiB // len(first)
            with KafkaClient(KafkaConfig(*gw.addresses["kafka"])) as kafka:
                for batch in _batches("kafka", args.keys, count):
                    kafka.produce("backlog", 0, batch)
            size = native.describe_topic("backlog", details=True).partitions[0].size_bytes
            baseline = _latencies(native, args.seconds)
            native.alter_topic_config("backlog", {"cleanup.policy": "compact", "segment.bytes": 4 * MiB})
            # New segments of 4 MiB from here: a few more appends roll the 64 MiB one, so all of it is cleanable.
            with KafkaClient(KafkaConfig(*gw.addresses["kafka"])) as kafka:
                for batch in _batches("kafka", args.keys, 2):
                    kafka.produce("backlog", 0, batch)
            before = _metric(admin, "logway_cleaner_cleanings_total")
            started = time.monotonic()  # (the cleaner starts within its 200 ms check interval)
            during: list[float] = []
            while _metric(admin, "logway_cleaner_cleanings_total") == before and time.monotonic() - started < 600:
                during += _latencies(native, 0.5)
            took = time.monotonic() - started
            cleaned = _metric(admin, "logway_cleaner_cleaned_bytes_total")
        throttle = "the gateway's default" if args.throttle is None else (args.throttle or "no limit")
        print(f"cleaner-produce: a {size / MiB:.0f} MiB backlog over {args.keys:,} keys cleaned in {took:.1f} s "
              f"({cleaned / max(took, 1e-9) / 1e6:.1f} MB/s of log; throttle {throttle})")
        print(f"  produce latency, cleaner idle:     {_summary(baseline)}")
        print(f"  produce latency, while it cleaned: {_summary(during)}")
    return 0


BENCHMARKS = [
    Benchmark("cleaner", "the log cleaner in process: MB/s of a compacted log cleaned", add_cleaner_arguments,
              run_cleaner),
    Benchmark("cleaner-produce", "produce latency of a gateway without and while its log cleaner runs",
              add_produce_arguments, run_cleaner_produce),
]
