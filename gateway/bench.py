"""`logway bench …`: benchmarks that print their figures (targets live in BENCHMARKS.md, never in tests).

- `storage-append`: in-process appends of prebuilt 16 KiB Kafka RecordBatches (flush: none) → GB/s, RSS.
- `native-produce`: a gateway in a subprocess, one client producing 100-byte records, 1,000 per request.
- `native-fetch`: the same gateway, the records read back with 1 MiB fetches.
- `tank-produce`, `tank-consume`, `tank-tail`: the TANK protocol (see `bench_tank`).
- `spark-read`: the PySpark data source reading a topic end to end (see `logway.pipeline.bench`).
- `chaos`: the crash-restart checker: SIGKILL at random moments, 50 cycles, every check after each restart
  (see `bench_chaos`); exits non-zero on a violation.
- `load`: 1,000 concurrent connections of every protocol mixing produce, fetch and long-poll (see `bench_load`).
- `powerloss`: the same checker with each kill followed by a power cut on a file system that drops what was never
  synced (see `logway.bench.powerloss`); exits non-zero on a violation.
Every run uses a fresh temporary data directory and 127.0.0.1 only, and stops by itself.
"""

from __future__ import annotations

import os
import tempfile
import time

MiB = 1024 * 1024


def add_bench_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="bench", required=True)
    sa = sub.add_parser("storage-append", help="append prebuilt 16 KiB Kafka batches in process (flush: none)")
    sa.add_argument("--total-mib", type=int, default=4096, help="MiB to append (default 4096)")
    sa.add_argument("--batch-kib", type=int, default=16)
    sa.add_argument("--segment-mib", type=int, default=256)
    for name in ("native-produce", "native-fetch", "native"):
        p = sub.add_parser(name, help="native protocol over a socket (gateway in a subprocess)")
        p.add_argument("--records", type=int, default=1_000_000)
        p.add_argument("--record-bytes", type=int, default=100)
        p.add_argument("--per-request", type=int, default=1000)
        p.add_argument("--flush", default="none", choices=("none", "interval", "always"))
    from .bench_tank import add_tank_arguments

    add_tank_arguments(sub)  # tank-produce, tank-consume, tank-tail
    from logway.pipeline import bench as spark_bench  # the pipeline is a client of the gateway: only the CLI meets it

    spark_bench.add_arguments(sub.add_parser("spark-read", help="read 5,000,000 records into Spark (local[2])"))
    from .bench_load import add_load_arguments

    add_load_arguments(sub.add_parser("load", help="1,000 connections mixing produce, fetch and long-poll over "
                                                   "the three protocols; errors, peak RSS, probe p99"))
    from .bench_chaos import add_chaos_arguments

    add_chaos_arguments(sub.add_parser("chaos", help="kill -9 the gateway at random moments under producers of "
                                                     "every protocol and a consumer group; check after restarts"))
    from logway.bench.powerloss import add_powerloss_arguments

    add_powerloss_arguments(sub.add_parser("powerloss", help="the chaos checker with a power cut after each kill, "
                                                             "on a FUSE file system that drops unsynced data"))


def run_bench(args) -> int:
    if args.bench == "spark-read":
        from logway.pipeline import bench as spark_bench

        return spark_bench.run(args)
    if args.bench == "chaos":
        from .bench_chaos import run_chaos_bench

        return run_chaos_bench(args)
    if args.bench == "powerloss":
        from logway.bench.powerloss import run_powerloss_bench

        return run_powerloss_bench(args)
    if args.bench == "load":
        from .bench_load import run_load_bench

        return run_load_bench(args)
    if args.bench.startswith("tank-"):
        from .bench_tank import run_tank_bench

        return run_tank_bench(args)
    if args.bench == "storage-append":
        bench_storage_append(args.total_mib, args.batch_kib, args.segment_mib)
    else:
        bench_native(args.records, args.record_bytes, args.per_request, args.flush,
                     produce=args.bench in ("native-produce", "native"),
                     fetch=args.bench in ("native-fetch", "native"))
    return 0


def rss_mib(pid: int | None = None) -> float:
    """Current resident set size in MiB (Linux /proc)."""
    with open(f"/proc/{pid or 'self'}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _make_batches(batch_bytes: int, count: int = 64) -> list[bytes]:
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

    batches = _make_batches(batch_kib * 1024)
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


def bench_native(records: int, record_bytes: int, per_request: int, flush: str, *, produce: bool,
                 fetch: bool) -> None:
    from .client import NativeClient
    from .launcher import GatewayProcess

    with tempfile.TemporaryDirectory(prefix="logway-bench-") as tmp:
        with GatewayProcess(os.path.join(tmp, "data"), f"storage.flush={flush}", "log_level=WARNING") as gw:
            pid = gw.pid
            with NativeClient(*gw.native, timeout=60) as client:
                client.create_topic("bench", 1)
                payloads = [os.urandom(record_bytes) for _ in range(per_request)]
                requests = max(records // per_request, 1)
                rss0 = rss_mib(pid)
                t0 = time.perf_counter()
                samples = []
                for i in range(requests):
                    client.produce("bench", 0, payloads)
                    if i % max(requests // 4, 1) == 0:
                        samples.append(round(rss_mib(pid), 1))
                elapsed = time.perf_counter() - t0
                total = requests * per_request
                if produce:
                    print(f"native-produce (flush: {flush}): {total:,} records of {record_bytes} bytes, "
                          f"{per_request} per request, in {elapsed:.2f} s")
                    print(f"  throughput: {total / elapsed:,.0f} records/s "
                          f"({total * record_bytes / elapsed / MiB:.1f} MiB/s of payload)")
                    print(f"  gateway RSS: {rss0:.1f} MiB at start, during the run: {samples} MiB")
                if fetch:
                    t0 = time.perf_counter()
                    offset = got = 0
                    while got < total:
                        resp = client.fetch("bench", 0, offset, 1024 * 1024)
                        got += len(resp.records)
                        offset = resp.next_offset
                    elapsed = time.perf_counter() - t0
                    print(f"native-fetch: {got:,} records read back with 1 MiB fetches in {elapsed:.2f} s")
                    print(f"  throughput: {got / elapsed:,.0f} records/s; gateway RSS after: {rss_mib(pid):.1f} MiB")
