"""`logway bench tank-produce | tank-consume | tank-tail`: the TANK protocol (issue 4; targets in BENCHMARKS.md,
never in tests).

- `tank-produce`: 1,000,000 messages of 100 bytes in bundles of 8,196 (uncompressed, one partition), every
  Produce frame built before timing, then sent back to back on one connection (pipelined); the clock runs from
  the first send to the last acknowledgement. Target ≤ 0.25 s.
- `tank-consume`: the same messages produced (untimed), then read back from seq 1 with a large fetch size,
  counting messages from bundle headers (`count_messages`, as the C++ client's fast path). Target ≥ 5,000,000
  messages/s. The default fetch size is TANK's 64 MiB clamp; the Python client then pays for fresh memory on
  every response (glibc maps allocations over 32 MiB anew each time), so `--fetch-size 16777216` shows what the
  gateway itself sustains.
- `tank-tail`: a tailing consumer long-polls the tail (seq = next) on one connection while a producer sends one
  small message at a time on another; each sample is the time from the produce's send to the consumer holding the
  answer's frame (parsed and checked after the clock stops, as `tank-cli bm p2c` times it; the producer's
  acknowledgement is read after that). `--message-bytes 11` is `tank-cli bm p2c -s 11 -c 1`. Target p50 ≤ 0.25 ms
  (issue 14; TANK 4.0 itself: 0.117 ms with tank-cli on this VM class). A long poll the timer answers empty although
  its message was produced (a missed wake-up) is counted and reported, and its sample keeps the whole delay.
  `--workers N` runs the gateway with `workers: N` and connects both clients to a worker that does not own the
  partition (its own TANK listener, `tank.i`): each connection is handed over to the owner (docs/scaling.md) — or,
  with `--set worker_handover=false`, each request relayed — and the report counts which.

Each run starts its own gateway (`GatewayProcess`, a subprocess) with a fresh temporary data directory, 127.0.0.1
only, and stops it at the end; all socket waits are bounded by timeouts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass

from .proc import gateway_processes, rss_mib, summed_mib
from .registry import Benchmark

__all__ = ["BENCHMARKS", "TailReport", "bench_produce_consume", "bench_tail"]

MiB = 1024 * 1024
TOPIC = "bench"


def add_produce_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of tank-produce (and, with --fetch-size, tank-consume)."""
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages to produce")
    parser.add_argument("--message-bytes", type=int, default=100, help="bytes of each message's value")
    parser.add_argument("--bundle-messages", type=int, default=8196, help="messages per bundle")
    parser.add_argument("--bundles-per-request", type=int, default=1,
                        help="Produce entries (bundles of the same partition) per request")
    parser.add_argument("--codec", type=int, default=0, choices=(0, 1), help="bundle codec: 0 none, 1 snappy")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--runs", type=int, default=1, help="repeat on fresh gateways and report each run")


def add_consume_arguments(parser: argparse.ArgumentParser) -> None:
    add_produce_arguments(parser)
    parser.add_argument("--fetch-size", type=int, default=64 * MiB,
                        help="fetch_size per Consume request in bytes (64 MiB: TANK's clamp)")


def add_tail_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=2000, help="produce→consume samples counted")
    parser.add_argument("--warmup", type=int, default=100, help="samples taken first and not counted")
    parser.add_argument("--message-bytes", type=int, default=32, help="bytes of each message's value")
    parser.add_argument("--gap-ms", type=float, default=1.0,
                        help="pause between the consumer's long-poll and the produce, so the poll is parked")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--workers", type=int, default=1,
                        help="the gateway's `workers`; with more than 1 both clients connect to a worker that does not "
                             "own the partition (handed over to the owner, or relayed)")
    parser.add_argument("--set", dest="gateway_settings", action="append", default=[], metavar="KEY=VALUE",
                        help="a gateway configuration override, as `logway serve --set` takes it (repeatable), "
                             "e.g. worker_handover=false")
    parser.add_argument("--backend", default="local", choices=("local", "postgres"),
                        help="the gateway's storage.backend (postgres: a throwaway PostgreSQL server of its own)")
    parser.add_argument("--gateways", type=int, default=1,
                        help="with the postgres backend, gateways over the one database (storage.postgres.cluster): "
                             "the producer at the partition's leader, the consumer at another gateway, which relays "
                             "its long-poll to the leader")


def run(args: argparse.Namespace) -> int:
    if args.bench == "tank-tail":
        if args.gateways > 1 and args.backend != "postgres":
            raise SystemExit("logway bench tank-tail: several gateways need --backend postgres")
        print(bench_tail(args.samples, args.warmup, args.message_bytes, args.gap_ms, args.flush, workers=args.workers,
                         settings=tuple(args.gateway_settings), backend=args.backend,
                         gateways=args.gateways).format())
        return 0
    for _ in range(args.runs):
        bench_produce_consume(args.messages, args.message_bytes, args.bundle_messages, args.bundles_per_request,
                              args.codec, args.flush, consume_fetch_size=getattr(args, "fetch_size", None))
    return 0


_GATEWAY = " (gateway in a subprocess)"
BENCHMARKS = [
    Benchmark("tank-produce", "TANK produce: prebuilt uncompressed bundles, pipelined, one partition" + _GATEWAY,
              add_produce_arguments, run),
    Benchmark("tank-consume", "TANK consume: read the produced messages back from seq 1" + _GATEWAY,
              add_consume_arguments, run),
    Benchmark("tank-tail", "TANK tailing consumer: produce→consume latency of a long-poll" + _GATEWAY,
              add_tail_arguments, run),
]


# -- helpers ---------------------------------------------------------------------------------------------------

class _Gateway:
    """A gateway subprocess with the TANK listener on an ephemeral port, in a temporary directory (`settings`:
    more `--set` overrides)."""

    def __init__(self, flush: str, settings: tuple[str, ...] = ()) -> None:
        self.flush = flush
        self.settings = settings

    def __enter__(self):
        from .launcher import GatewayProcess

        self._tmp = tempfile.TemporaryDirectory(prefix="logway-bench-")
        try:
            self.gw = GatewayProcess(os.path.join(self._tmp.name, "data"), f"storage.flush={self.flush}",
                                     "log_level=WARNING", "listeners.tank.enabled=true", *self.settings)
        except BaseException:
            self._tmp.cleanup()
            raise
        if "tank" not in self.gw.addresses:
            self.__exit__(None, None, None)
            raise SystemExit("logway bench: this gateway has no TANK listener")
        return self.gw

    def __exit__(self, *exc) -> None:
        try:
            self.gw.stop()
        finally:
            self._tmp.cleanup()


def _client(gw, timeout: float = 60.0, listener: str = "tank"):
    from logway.clients.tank import TankClient

    return TankClient(*gw.addresses[listener], timeout=timeout)


def _build_produce_frames(client, messages: int, message_bytes: int, bundle_messages: int,
                          bundles_per_request: int, codec: int) -> tuple[list[tuple[int, bytes]], int, int]:
    """Every Produce frame of the run, built before the clock starts: [(request_id, frame)], bundles, bytes."""
    from logway.codecs.records import Record
    from logway.codecs.tank import ProduceEntry, ProduceRequest, encode_bundle

    now = time.time_ns() // 1_000_000
    pool = [os.urandom(message_bytes) for _ in range(min(bundle_messages, messages))]
    full = encode_bundle([Record(v, None, now) for v in pool], codec=codec)
    sizes = [bundle_messages] * (messages // bundle_messages)
    if messages % bundle_messages:
        sizes.append(messages % bundle_messages)
    bundles = [full if n == bundle_messages else encode_bundle([Record(v, None, now) for v in pool[:n]],
                                                               codec=codec) for n in sizes]
    frames = []
    for i in range(0, len(bundles), bundles_per_request):
        entries = [ProduceEntry(TOPIC, 0, b) for b in bundles[i:i + bundles_per_request]]
        frames.append(client.prepare(ProduceRequest(0, entries)))
    return frames, len(bundles), sum(len(b) for b in bundles)


def _produce(client, frames: list[tuple[int, bytes]], timeout: float = 120.0) -> float:
    """Send every frame back to back (pipelined) while collecting the acknowledgements; the elapsed seconds
    from the first send to the last acknowledgement. Sending runs in a thread (sendall releases the GIL) so
    that many small requests cannot deadlock on acknowledgements nobody reads."""
    failure: list[BaseException] = []

    def send_all() -> None:
        try:
            for _, frame in frames:
                client.send_raw(frame)
        except BaseException as exc:  # reported by the receiving side
            failure.append(exc)

    sender = threading.Thread(target=send_all, name="tank-bench-sender", daemon=True)
    t0 = time.perf_counter()
    sender.start()
    try:
        for rid, _ in frames:
            resp = client.receive(rid, timeout=timeout)
            bad = [r.error for r in resp.results if r.error]
            if bad:
                raise SystemExit(f"logway bench: produce request {rid} failed with error(s) {bad}")
    finally:
        sender.join(timeout)
    if failure:
        raise SystemExit(f"logway bench: sending failed: {failure[0]}")
    return time.perf_counter() - t0


# -- tank-produce / tank-consume ---------------------------------------------------------------------------------

def bench_produce_consume(messages: int, message_bytes: int, bundle_messages: int, bundles_per_request: int,
                          codec: int, flush: str, *, consume_fetch_size: int | None) -> None:
    with _Gateway(flush) as gw, _client(gw) as client:
        err = client.create_topic(TOPIC, 1)
        if err:
            raise SystemExit(f"logway bench: CreateTopic answered error {err}")
        frames, nbundles, nbytes = _build_produce_frames(client, messages, message_bytes, bundle_messages,
                                                         bundles_per_request, codec)
        rss0 = rss_mib(gw.pid)
        elapsed = _produce(client, frames)
        rss1 = rss_mib(gw.pid)
        bounds = client.discover_partitions(TOPIC)
        hwm = bounds[0].high_water_mark if bounds else -1
        if hwm != messages:
            raise SystemExit(f"logway bench: high-water mark {hwm} after producing {messages} messages")
        if consume_fetch_size is None:
            print(f"tank-produce (flush: {flush}): {messages:,} messages of {message_bytes} bytes in {nbundles} "
                  f"bundles of {bundle_messages} (codec {codec}), {len(frames)} requests "
                  f"({nbytes / MiB:.1f} MiB of bundles), acknowledged in {elapsed:.3f} s")
            print(f"  throughput: {messages / elapsed:,.0f} msgs/s ({nbytes / elapsed / MiB:,.0f} MiB/s); "
                  f"high-water mark {hwm:,}")
            print(f"  gateway RSS: {rss0:.1f} MiB before, {rss1:.1f} MiB after")
            return
        _consume(client, gw, messages, consume_fetch_size, rss1)


def _consume(client, gw, messages: int, fetch_size: int, rss_before: float) -> None:
    from logway.codecs.tank import ConsumeFlags, count_messages

    seq = 1
    total = requests = received = 0
    t0 = time.perf_counter()
    while total < messages:
        resp = client.consume({TOPIC: [(0, seq, fetch_size)]})
        requests += 1
        p = resp.topics[0].partitions[0]
        if p.error not in (ConsumeFlags.OK, ConsumeFlags.SPARSE_FIRST):
            raise SystemExit(f"logway bench: consume at seq {seq} answered err_flags {p.error:#04x}")
        counted = count_messages(p.chunk, p.base_seqnum, min_seq=seq, max_seq=p.high_water_mark)
        if counted.next_seq is None:
            raise SystemExit(f"logway bench: consume at seq {seq} returned no whole bundle")
        total += counted.messages
        received += len(p.chunk)
        seq = counted.next_seq
    elapsed = time.perf_counter() - t0
    print(f"tank-consume: {total:,} messages ({received / MiB:.1f} MiB of chunks) read from seq 1 in "
          f"{requests} requests of fetch_size {fetch_size / MiB:g} MiB in {elapsed:.3f} s")
    print(f"  throughput: {total / elapsed:,.0f} msgs/s ({received / elapsed / MiB:,.0f} MiB/s)")
    print(f"  gateway RSS: {rss_before:.1f} MiB before, {rss_mib(gw.pid):.1f} MiB after")


# -- tank-tail ---------------------------------------------------------------------------------------------------

@dataclass
class TailReport:
    """What `bench_tail` measured: the latencies (ms, sorted), the missed wake-ups and the gateway's figures."""

    samples: int
    warmup: int
    message_bytes: int
    gap_ms: float
    flush: str
    workers: int
    settings: tuple[str, ...]
    latencies: list[float]
    missed: int
    max_wait_ms: int
    rss_before: float
    rss_after: float
    handed_over: float | None = None  # (workers > 1) connections handed over, requests relayed
    relayed: float | None = None
    backend: str = "local"
    gateways: int = 1  # (postgres) gateways over the one database: the consumer at one that does not lead

    def pct(self, q: float) -> float:
        return self.latencies[min(len(self.latencies) - 1, int(q * len(self.latencies)))]

    def format(self) -> str:
        lat = self.latencies
        where = ""
        if self.workers > 1:
            where = (f", workers: {self.workers}{''.join(f', {s}' for s in self.settings)}; both connections to a "
                     f"worker that does not own the partition")
        if self.backend != "local":
            where += f", storage.backend={self.backend}"
        if self.gateways > 1:
            where += (f", {self.gateways} gateways in cluster mode: the producer at the partition's leader, the "
                      f"consumer's long-poll relayed from another gateway")
        lines = [f"tank-tail (flush: {self.flush}{where}): {len(lat):,} samples (after {self.warmup} warm-up) of one "
                 f"{self.message_bytes}-byte message, the long-poll parked {self.gap_ms:g} ms before each produce",
                 f"  produce→consume latency: p50 {self.pct(0.50):.3f} ms, p90 {self.pct(0.90):.3f} ms, "
                 f"p99 {self.pct(0.99):.3f} ms, max {lat[-1]:.3f} ms, mean {statistics.fmean(lat):.3f} ms",
                 f"  long polls answered empty by the timer although the message had been produced (missed "
                 f"wake-ups, each costing up to {self.max_wait_ms / 1000:g} s): {self.missed}"]
        if self.workers > 1:
            lines.append(f"  connections handed over to the partition's owner: {self.handed_over or 0:.0f}; requests "
                         f"relayed to it: {self.relayed or 0:,.0f}")
        lines.append(f"  gateway RSS: {self.rss_before:.1f} MiB before, {self.rss_after:.1f} MiB after"
                     f"{' (the supervisor and its workers)' if self.workers > 1 else ''}"
                     f"{f' (the {self.gateways} gateways)' if self.gateways > 1 else ''}")
        return "\n".join(lines)


def _gateway_rss(*gws) -> float:
    return summed_mib([pid for gw in gws for pid in gateway_processes(gw.pid).values()])


@contextlib.contextmanager
def _tail_gateways(flush: str, overrides: tuple[str, ...], listener: str, backend: str, gateways: int, dsn: str):
    """The gateway(s) of a tank-tail run with the topic made: (every gateway, the producer's and the consumer's
    (gateway, TANK listener)) — one gateway (or a supervisor's workers: both at `listener`), or postgres gateways
    with the producer at the partition's leader and the consumer at another when there are several."""
    if backend == "local":
        with _Gateway(flush, overrides) as gw:
            with _client(gw, listener=listener) as admin:
                err = admin.create_topic(TOPIC, 1)
            if err:
                raise SystemExit(f"logway bench: CreateTopic answered error {err}")
            yield [gw], (gw, listener), (gw, listener)
        return
    from .gateways import Database, Gateways, kafka_address, postgres_server

    with postgres_server(not dsn) as server, Database("postgres", dsn, server, 0) as (storage, _), \
            tempfile.TemporaryDirectory(prefix="logway-bench-") as tmp:
        gws = Gateways(tmp, gateways, "log_level=WARNING", "listeners.tank.enabled=true", *storage, *overrides)
        try:
            with _client(gws.members[0]) as admin:
                err = admin.create_topic(TOPIC, 1)
            if err:
                raise SystemExit(f"logway bench: CreateTopic answered error {err}")
            leader = gws.routes(TOPIC, 1)[0]
            at = next(i for i, gw in enumerate(gws.members) if kafka_address(gw) == "%s:%d" % leader)
            other = gws.members[(at + 1) % gateways]
            yield gws.members, (gws.members[at], "tank"), (other, "tank")
        finally:
            gws.stop()


def bench_tail(samples: int, warmup: int, message_bytes: int, gap_ms: float, flush: str, *, workers: int = 1,
               settings: tuple[str, ...] = (), backend: str = "local", gateways: int = 1, dsn: str = "") -> TailReport:
    from logway.clients.tank import consume_request
    from logway.codecs.records import Record
    from logway.codecs.tank import ConsumeFlags, ProduceEntry, ProduceRequest, count_messages, encode_bundle
    from logway.gateway.cluster.ownership import partition_leader

    from .requests import metric_readings

    listener, overrides = "tank", settings
    if workers > 1:
        overrides = (f"workers={workers}", *settings)
        listener = f"tank.{(partition_leader(TOPIC, 0, workers) + 1) % workers}"  # not the partition's owner
    with _tail_gateways(flush, overrides, listener, backend, gateways, dsn) as (every, (pgw, plistener),
                                                                                (cgw, clistener)), \
            _client(pgw, listener=plistener) as producer, _client(cgw, listener=clistener) as consumer:
        gw = every[0]
        payload = os.urandom(message_bytes)
        rss0 = _gateway_rss(*every)
        latencies = []
        missed = 0
        max_wait_ms = 2_000  # a missed wake-up costs this much (and is reported)
        seq = 1  # lastAssigned + 1 of the empty partition: the tail
        gap = gap_ms / 1000
        for i in range(warmup + samples):
            bundle = encode_bundle([Record(payload, None, time.time_ns() // 1_000_000)], codec=0)
            prid, pframe = producer.prepare(ProduceRequest(0, [ProduceEntry(TOPIC, 0, bundle)]))
            request = consume_request({TOPIC: [(0, seq, 1 * MiB)]}, max_wait_ms=max_wait_ms)
            crid = consumer.send(request)
            if gap:
                time.sleep(gap)
            t0 = time.perf_counter()
            producer.send_raw(pframe)
            while True:
                frame = consumer.receive_frame(timeout=15)  # the clock stops when the answer is in, parsed after
                t1 = time.perf_counter()
                response = consumer.parse_frame(frame)
                if response.request_id != crid:
                    raise SystemExit(f"logway bench: unexpected answer to request {response.request_id}")
                p = response.topics[0].partitions[0]
                if p.error not in (ConsumeFlags.OK, ConsumeFlags.SPARSE_FIRST):
                    raise SystemExit(f"logway bench: tail consume at seq {seq} answered err_flags {p.error:#04x}")
                if len(p.chunk):
                    break
                # The timer ran out although the message was produced: a missed wake-up. Count it, and ask
                # again as a tailing consumer would; the sample keeps the whole delay.
                missed += 1
                crid = consumer.send(request)
            counted = count_messages(p.chunk, p.base_seqnum, min_seq=seq, max_seq=p.high_water_mark)
            if counted.messages != 1:
                raise SystemExit(f"logway bench: tail consume at seq {seq} delivered {counted.messages} messages")
            seq = counted.next_seq
            ack = producer.receive(prid, timeout=15)
            if ack.results[0].error:
                raise SystemExit(f"logway bench: produce answered error {ack.results[0].error}")
            if i >= warmup:
                latencies.append((t1 - t0) * 1000)
        latencies.sort()
        report = TailReport(samples, warmup, message_bytes, gap_ms, flush, workers, settings, latencies, missed,
                            max_wait_ms, rss0, _gateway_rss(*every), backend=backend, gateways=gateways)
        if workers > 1:  # (the supervisor's admin listener: every worker's counters)
            readings = metric_readings(gw.addresses["admin"])
            report.handed_over = readings.get("handed_over_out", [0.0])[0]
            report.relayed = readings.get("relayed_requests", [0.0])[0]
        return report
