"""`logway bench native-produce | native-fetch | native`: the native protocol over a socket.

A gateway in a subprocess (`GatewayProcess`, a fresh temporary data directory, 127.0.0.1), one blocking
`NativeClient` producing `--records` records of `--record-bytes` bytes, `--per-request` per request (the records
are built before timing), then (`native-fetch`, `native`) reading them back with 1 MiB fetches; records/s, MiB/s
and the gateway's RSS. `native-produce` and `native-fetch` print one half each, `native` both.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from .proc import rss_mib
from .registry import Benchmark

__all__ = ["BENCHMARKS", "bench_native"]

MiB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--per-request", type=int, default=1000, help="records per Produce request")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")


def run(args: argparse.Namespace) -> int:
    bench_native(args.records, args.record_bytes, args.per_request, args.flush,
                 produce=args.bench in ("native-produce", "native"), fetch=args.bench in ("native-fetch", "native"))
    return 0


_HELP = "native protocol over a socket (gateway in a subprocess): "
BENCHMARKS = [
    Benchmark("native-produce", _HELP + "produce, one client", add_arguments, run),
    Benchmark("native-fetch", _HELP + "read the produced records back with 1 MiB fetches", add_arguments, run),
    Benchmark("native", _HELP + "produce, then fetch", add_arguments, run),
]


def bench_native(records: int, record_bytes: int, per_request: int, flush: str, *, produce: bool,
                 fetch: bool) -> None:
    from logway.clients.native import NativeClient

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
