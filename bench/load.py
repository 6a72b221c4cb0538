"""`logway bench load`: many concurrent connections of every protocol against one gateway (issue 6).

One gateway (`GatewayProcess`, a subprocess, fresh temporary data directory, 127.0.0.1 only) and, in this
process, one trio run driving `--connections` TCP connections (default 1,000) spread evenly over the native,
Kafka and TANK listeners. Each connection speaks its protocol through the trio clients of `logway.clients`
(`AsyncNativeClient`, `AsyncKafkaClient`, `AsyncTankClient`), one request at a time, and loops for `--seconds`
(default 30) over three kinds of request:

- `produce`: 10 records of 100 bytes (native JSON records, a prebuilt Kafka RecordBatch, a prebuilt TANK bundle);
- `fetch`: a read from the connection's own cursor, which walks its partition from offset 0 (native 4 KiB,
  Kafka and TANK 16 KiB);
- `long-poll`: a fetch at the log end as this process last saw it, with a 1 s wait and min_bytes 1 (native
  FetchRequest with max_wait_ms, Kafka Fetch with max_wait_ms, TANK Consume with max_wait_ms): it parks in the
  gateway until an append to the partition (from any protocol) wakes it, or answers empty when the timer expires.

Two topics of 8 partitions are created first, `load-kafka` (stored as Kafka batches) and `load-tank` (stored as
TANK bundles). Native and Kafka connections use `load-kafka`, TANK connections `load-tank`, except every fourth
connection of each protocol, which uses the other topic, so a quarter of the traffic is transcoded. Each
request's kind is drawn at random with equal odds (a fixed rotation made the connections of a partition fall
into step: all long-polling while nobody produced). After `--seconds` a connection finishes its request in
flight and, if it has not yet done every kind, one request of each missing kind; then it closes.

A probe measures the gateway's responsiveness under that load: every ~50 ms it sends a cheap request, native
Ping and Kafka ApiVersions in turn, on connections of its own, and times the answer; every 20th time it opens
a new connection instead and times connect + Ping (a client arriving during the load). It runs in a separate
process with the blocking clients, so the time it measures is the gateway's, not the wait for this process's
busy event loop. Every load connection (and the probe's) is answered once before the load starts — a Ping, an
ApiVersions, TANK's greeting — so the load begins with every connection accepted by the gateway. With
`--storm N` the probe also opens N native connections at once a third into the load (clients reconnecting
together) and times each one's first Ping: how long arriving clients wait to be accepted while the gateway is
busy.

Reported: connections established (and failed), requests and client-observed latency per protocol and kind,
records produced and fetched, long-polls answered empty by their timer, errors (an error answer, an unexpected
close, a protocol error or a timeout: each request has 15 s beyond its own wait), gateway RSS (at start, with
every connection open, sampled through the run, the peak = VmHWM of the gateway process or a higher VmRSS
sample since the kernel updates VmHWM lazily, at the end, after the connections closed), gateway and client
CPU, probe p50/p99/max, and ERROR lines in the gateway's log. The exit
status is non-zero when anything went wrong: an error, a connection that failed or did not do every kind of
request, a probe that went unanswered, or an error logged by the gateway.

Everything is bounded in time: connects (10 s each), requests (15 s beyond their wait), the whole run (a hard
deadline of `--seconds` + 60 s cancels whatever is left and counts it as a timeout), the probe (5 s per answer).
The client raises its RLIMIT_NOFILE soft limit to what the connections need.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from logway.clients.errors import ClientError, KafkaError, NativeError, TankError
from logway.codecs.errors import RemoteProtocolError

from .proc import proc_cpu_seconds, proc_status_mib, raise_fd_limit
from .registry import Benchmark

__all__ = ["BENCHMARKS", "LoadSettings", "LoadReport", "run_load", "PROTOCOLS", "KINDS"]

KiB = 1024
MiB = 1024 * 1024
PROTOCOLS = ("native", "kafka", "tank")
KINDS = ("produce", "fetch", "long-poll")
TOPICS = {"kafka": "load-kafka", "tank": "load-tank"}  # storage format -> topic
#: The topic a connection of each protocol uses, and the one every fourth connection uses instead.
HOME_FORMAT = {"native": "kafka", "kafka": "kafka", "tank": "tank"}
OTHER_FORMAT = {"native": "tank", "kafka": "tank", "tank": "kafka"}
RECORDS_PER_PRODUCE = 10
#: Bytes asked per fetch: ~40 native / ~150 Kafka or TANK records of 100 bytes. Kept small because a quarter of
#: the connections read the other format, and a transcoded 64 KiB answer is milliseconds of one event-loop step.
#: (This is a load test of connections and request mix, not of bandwidth: see the other benchmarks for that.)
FETCH_BYTES = {"native": 4 * KiB, "kafka": 16 * KiB, "tank": 16 * KiB}
#: Each request must be answered within its own wait plus this; later counts as a timeout error.
REQUEST_TIMEOUT = 15.0
CONNECT_TIMEOUT = 10.0
#: Connects in flight at once while opening the connections (the listen backlog is far larger).
CONNECT_CONCURRENCY = 64
#: The whole run is cancelled this long after `--seconds`; what is still running counts as a timeout.
HARD_DEADLINE_MARGIN = 60.0
PROBE_TIMEOUT = 5.0
#: Every this many probe ticks the probe opens a new connection instead and times connect + Ping: how long a
#: client arriving during the load waits to be accepted and served.
PROBE_CONNECT_EVERY = 20
PROBE_NEW_CONNECTION = "new native connection + Ping"
#: A storm connection not answered within this many seconds of the storm's start is an error.
STORM_TIMEOUT = 30.0
#: Descriptors the client needs beyond one per connection (probe, gateway pipes, topics set-up, ...).
FD_MARGIN = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connections", type=int, default=1000, help="concurrent connections")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the load")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of each topic")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each produced record")
    parser.add_argument("--long-poll-ms", type=int, default=1000, help="max_wait_ms of the long-polls")
    parser.add_argument("--think-ms", type=float, default=0.0,
                        help="pause of each connection between requests, uniform in [0, 2x] (0: closed loop)")
    parser.add_argument("--probe-interval-ms", type=float, default=50.0,
                        help="how often the probe times a cheap request")
    parser.add_argument("--flush", default="interval", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush (interval is the gateway's default)")
    parser.add_argument("--storm", type=int, default=0,
                        help="a third into the load, the probe opens this many new native connections at once and "
                             "times each one's first Ping (clients reconnecting together); 0 = none")


def run(args: argparse.Namespace) -> int:
    settings = LoadSettings(connections=args.connections, seconds=args.seconds, partitions=args.partitions,
                            record_bytes=args.record_bytes, long_poll_ms=args.long_poll_ms,
                            think_ms=args.think_ms, probe_interval_ms=args.probe_interval_ms, flush=args.flush,
                            storm=args.storm)
    report = run_load(settings)
    print(report.format())
    return 1 if report.problems() else 0


BENCHMARKS = [Benchmark("load", "1,000 connections mixing produce, fetch and long-poll over the three protocols; "
                                "errors, peak RSS, probe p99", add_arguments, run)]


@dataclass
class LoadSettings:
    connections: int = 1000
    seconds: float = 30.0
    partitions: int = 8
    record_bytes: int = 100
    long_poll_ms: int = 1000
    think_ms: float = 0.0
    probe_interval_ms: float = 50.0
    flush: str = "interval"
    storm: int = 0  # new connections the probe opens at once a third into the load (0 = none)


@dataclass
class LoadReport:
    settings: LoadSettings
    connections_by_protocol: Counter = field(default_factory=Counter)  # established
    connect_failures: Counter = field(default_factory=Counter)
    requests: Counter = field(default_factory=Counter)  # (protocol, kind) -> answered requests
    latencies: dict = field(default_factory=lambda: defaultdict(list))  # (protocol, kind) -> [ms]
    records_produced: Counter = field(default_factory=Counter)  # protocol -> records
    records_fetched: Counter = field(default_factory=Counter)  # protocol -> records (fetch and long-poll)
    empty_long_polls: Counter = field(default_factory=Counter)  # protocol -> answered empty by the timer
    errors: Counter = field(default_factory=Counter)  # (protocol, kind, what) -> count
    error_samples: list = field(default_factory=list)  # the first few error messages
    per_connection: list = field(default_factory=list)  # [Counter(kind -> requests)] of established connections
    connect_latencies: list = field(default_factory=list)  # ms from connect() to the first answer, per connection
    elapsed: float = 0.0  # seconds from the start of the load to the last connection's end
    rss_start: float = 0.0  # MiB, before the connections
    rss_connected: float = 0.0  # with every connection open
    rss_samples: list = field(default_factory=list)  # [(seconds into the load, MiB)]
    rss_end: float = 0.0  # when the load stopped, connections still open
    rss_closed: float = 0.0  # after the connections closed
    peak_rss: float = 0.0  # the gateway's peak: VmHWM, or a higher VmRSS sample (VmHWM is updated lazily)
    gateway_cpu: float = 0.0  # CPU seconds the gateway used during the load
    client_cpu: float = 0.0
    probe_latencies: dict = field(default_factory=dict)  # kind -> [ms]
    probe_errors: list = field(default_factory=list)
    storm_latencies: list = field(default_factory=list)  # ms from the storm's start to each connection's Pong
    storm_errors: list = field(default_factory=list)
    gateway_log_errors: list = field(default_factory=list)  # ERROR/CRITICAL/Traceback lines of its stderr
    gateway_log_warnings: int = 0
    gateway_exit: int | None = None

    # -- derived figures ---------------------------------------------------------------------------------------
    @property
    def connections(self) -> int:
        return sum(self.connections_by_protocol.values())

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def incomplete_connections(self) -> int:
        """Established connections that did not complete a request of every kind."""
        return sum(1 for c in self.per_connection if any(c[k] == 0 for k in KINDS))

    def probe_all(self) -> list[float]:
        """The probe's request latencies on its open connections (Ping and ApiVersions), sorted."""
        return sorted(x for k, v in self.probe_latencies.items() if k != PROBE_NEW_CONNECTION for x in v)

    def problems(self) -> list[str]:
        """What went wrong; empty when the run is clean (the exit status is 0 only then)."""
        out = []
        if self.connect_failures:
            out.append(f"{sum(self.connect_failures.values())} connection(s) could not be opened")
        if self.error_count:
            out.append(f"{self.error_count} error(s)")
        if self.incomplete_connections():
            out.append(f"{self.incomplete_connections()} connection(s) did not complete every kind of request")
        if self.probe_errors:
            out.append(f"{len(self.probe_errors)} probe error(s)")
        if self.storm_errors:
            out.append(f"{len(self.storm_errors)} connection(s) of the storm not answered")
        if not self.probe_all():
            out.append("the probe got no answer")
        if self.gateway_log_errors:
            out.append(f"{len(self.gateway_log_errors)} ERROR line(s) in the gateway's log")
        if self.gateway_exit not in (0, None):
            out.append(f"the gateway exited with status {self.gateway_exit}")
        return out

    def format(self) -> str:
        s = self.settings
        total = sum(self.requests.values())
        lines = [f"load (flush: {s.flush}): {s.connections:,} connections over native, kafka and tank, each "
                 f"looping over produce ({RECORDS_PER_PRODUCE} x {s.record_bytes} B), fetch and long-poll "
                 f"({s.long_poll_ms} ms) for {s.seconds:g} s; {s.partitions} partitions per topic; think time "
                 f"{s.think_ms:g} ms",
                 f"  connections established: {self.connections:,} "
                 f"({', '.join(f'{p} {self.connections_by_protocol[p]}' for p in PROTOCOLS)}); "
                 f"failed: {sum(self.connect_failures.values())}; connect to first answer (before the load): "
                 f"p50 {_pct(sorted(self.connect_latencies), .5):.1f} ms, max "
                 f"{max(self.connect_latencies, default=float('nan')):.1f} ms",
                 f"  requests answered: {total:,} in {self.elapsed:.1f} s ({total / max(self.elapsed, 1e-9):,.0f}/s); "
                 f"latencies as the load generator saw them (its own busy event loop included)"]
        for proto in PROTOCOLS:
            parts = []
            for kind in KINDS:
                lat = sorted(self.latencies.get((proto, kind), ()))
                n = self.requests[(proto, kind)]
                parts.append(f"{kind} {n:,}" + (f" (p50 {_pct(lat, .5):.1f} / p99 {_pct(lat, .99):.1f} ms)"
                                                 if lat else ""))
            lines.append(f"    {proto:6s}: " + ", ".join(parts) + f"; long-polls answered empty by the timer: "
                         f"{self.empty_long_polls[proto]:,}")
        lines.append(f"  records produced: {sum(self.records_produced.values()):,} "
                     f"({', '.join(f'{p} {self.records_produced[p]:,}' for p in PROTOCOLS)}); "
                     f"fetched: {sum(self.records_fetched.values()):,} "
                     f"({', '.join(f'{p} {self.records_fetched[p]:,}' for p in PROTOCOLS)})")
        lines.append(f"  errors: {self.error_count}" + (": " + ", ".join(
            f"{p}/{k} {what} x{n}" for (p, k, what), n in sorted(self.errors.items())) if self.errors else ""))
        for msg in self.error_samples:
            lines.append(f"    e.g. {msg}")
        lines.append(f"  connections that did not complete every kind of request: {self.incomplete_connections()}")
        probe = self.probe_all()
        if probe:
            per = " + ".join(f"{len(v)} {k}" for k, v in self.probe_latencies.items() if k != PROBE_NEW_CONNECTION)
            lines.append(f"  probe ({per}, at most one every {s.probe_interval_ms:g} ms, on open connections): "
                         f"p50 {_pct(probe, .5):.2f} ms, p99 {_pct(probe, .99):.2f} ms, max {probe[-1]:.2f} ms; "
                         f"errors: {len(self.probe_errors)}")
        else:
            lines.append(f"  probe: no answer; errors: {len(self.probe_errors)}")
        fresh = sorted(self.probe_latencies.get(PROBE_NEW_CONNECTION, ()))
        if fresh:
            lines.append(f"  probe, {PROBE_NEW_CONNECTION} (one every {PROBE_CONNECT_EVERY} ticks): {len(fresh)}: "
                         f"p50 {_pct(fresh, .5):.2f} ms, p99 {_pct(fresh, .99):.2f} ms, max {fresh[-1]:.2f} ms")
        for msg in self.probe_errors[:5]:
            lines.append(f"    probe error: {msg}")
        if s.storm:
            st = sorted(self.storm_latencies)
            lines.append(f"  storm: {s.storm} new native connections opened at once {s.seconds / 3:.0f} s into the "
                         f"load: {len(st)} answered (connect to Pong: p50 {_pct(st, .5):.0f} ms, p99 "
                         f"{_pct(st, .99):.0f} ms, last {max(st, default=float('nan')):.0f} ms), "
                         f"{len(self.storm_errors)} not answered")
            for msg in self.storm_errors[:3]:
                lines.append(f"    storm error: {msg}")
        samples = ", ".join(f"{t:.0f}s {m:.1f}" for t, m in _thin(self.rss_samples, 12))
        lines.append(f"  gateway RSS: {self.rss_start:.1f} MiB at start, {self.rss_connected:.1f} MiB with every "
                     f"connection open, peak {self.peak_rss:.1f} MiB (VmHWM), {self.rss_end:.1f} MiB at the end of the "
                     f"load, {self.rss_closed:.1f} MiB after the connections closed")
        lines.append(f"    during the load (s into it: MiB): {samples}")
        lines.append(f"  CPU during the load: gateway {self.gateway_cpu:.1f} s "
                     f"({100 * self.gateway_cpu / max(self.elapsed, 1e-9):.0f} % of one core), load generator "
                     f"{self.client_cpu:.1f} s")
        lines.append(f"  gateway log: {len(self.gateway_log_errors)} ERROR line(s), {self.gateway_log_warnings} "
                     f"WARNING line(s); exit status {self.gateway_exit}")
        for line in self.gateway_log_errors[:5]:
            lines.append(f"    {line}")
        problems = self.problems()
        lines.append("  result: " + ("OK" if not problems else "FAILED: " + "; ".join(problems)))
        return "\n".join(lines)


def _pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] if sorted_values else float("nan")


def _thin(samples: list, n: int) -> list:
    if len(samples) <= n:
        return samples
    step = (len(samples) - 1) / (n - 1)
    return [samples[round(i * step)] for i in range(n)]


# -- the run ---------------------------------------------------------------------------------------------------

def run_load(settings: LoadSettings) -> LoadReport:
    """Start a gateway, load it as described in the module docstring, stop it; the figures."""
    from .launcher import GatewayProcess

    if settings.connections < 1 or settings.seconds <= 0:
        raise SystemExit("logway bench load: --connections and --seconds must be positive")
    raise_fd_limit(settings.connections + FD_MARGIN, "logway bench load")  # the storm's sockets are the probe process's
    report = LoadReport(settings)
    with tempfile.TemporaryDirectory(prefix="logway-load-") as tmp:
        log_path = os.path.join(tmp, "gateway.log")
        limit = settings.connections + settings.storm + 16  # + the probe's and the set-up's connections
        with open(log_path, "wb") as log_file:
            gw = GatewayProcess(os.path.join(tmp, "data"), f"storage.flush={settings.flush}", "log_level=WARNING",
                                f"limits.max_connections={limit}", f"limits.max_connections_per_ip={limit}",
                                "listeners.tank.enabled=true", stderr=log_file)
            try:
                for proto in PROTOCOLS:
                    if proto not in gw.addresses:
                        raise SystemExit(f"logway bench load: the gateway has no {proto} listener")
                _create_topics(gw, settings.partitions)
                report.rss_start = proc_status_mib(gw.pid, "VmRSS")
                probe = _Probe(gw.addresses["native"], gw.addresses["kafka"], settings.probe_interval_ms / 1000,
                               settings.storm, settings.seconds / 3)
                try:
                    import trio

                    trio.run(_load, gw, settings, report, probe)
                finally:
                    probe.finish(report)
                # The kernel updates VmHWM lazily (when memory is unmapped), so it can lag a sample of VmRSS.
                report.peak_rss = max([proc_status_mib(gw.pid, "VmHWM"), report.peak_rss, report.rss_end]
                                      + [m for _, m in report.rss_samples])
            finally:
                report.gateway_exit = gw.stop()
        with open(log_path, "rb") as f:
            for raw in f.read().decode(errors="replace").splitlines():
                if " ERROR " in raw or " CRITICAL " in raw or raw.startswith("Traceback"):
                    report.gateway_log_errors.append(raw)
                elif " WARNING " in raw:
                    report.gateway_log_warnings += 1
    return report


def _create_topics(gw, partitions: int) -> None:
    """`load-kafka` through the native protocol (Kafka format, the default), `load-tank` through TANK."""
    from logway.clients.native import NativeClient
    from logway.clients.tank import TankClient

    with NativeClient(*gw.native, timeout=30) as client:
        client.create_topic(TOPICS["kafka"], partitions)
    with TankClient(*gw.addresses["tank"], timeout=30) as tank:
        err = tank.create_topic(TOPICS["tank"], partitions)
        if err:
            raise SystemExit(f"logway bench load: TANK CreateTopic answered error {err}")


class _Run:
    """What the workers share: the settings, the report they fill, the log ends they have seen."""

    def __init__(self, settings: LoadSettings, report: LoadReport) -> None:
        import trio

        from logway.codecs.kafka.records import encode_batch
        from logway.codecs.records import Record
        from logway.codecs.tank import encode_bundle

        self.settings = settings
        self.report = report
        self.go = trio.Event()
        self.all_arrived = trio.Event()
        self.pending_connects = settings.connections
        self.connect_limiter = trio.CapacityLimiter(CONNECT_CONCURRENCY)
        self.stop_at = float("inf")
        self.ends: dict[tuple[str, int], int] = {}  # (topic, partition) -> highest log end offset seen
        self.live = 0
        self.all_done = trio.Event()
        now = int(time.time() * 1000)
        value = os.urandom(settings.record_bytes)
        self.records = [Record(value) for _ in range(RECORDS_PER_PRODUCE)]
        self.kafka_batch = encode_batch(self.records, default_timestamp=now)
        self.tank_bundle = encode_bundle(self.records, codec=0, default_timestamp=now)

    def arrived(self) -> None:
        self.pending_connects -= 1
        if not self.pending_connects:
            self.all_arrived.set()

    def seen_end(self, key: tuple[str, int], end: int) -> None:
        if end > self.ends.get(key, 0):
            self.ends[key] = end

    def error(self, proto: str, kind: str, what: str, message: str) -> None:
        self.report.errors[(proto, kind, what)] += 1
        if len(self.report.error_samples) < 10:
            self.report.error_samples.append(f"{proto}/{kind}: {what}: {message}")


async def _load(gw, settings: LoadSettings, report: LoadReport, probe: "_Probe") -> None:
    import trio

    run = _Run(settings, report)
    pid = gw.pid
    hard_stop = trio.current_time() + settings.seconds + HARD_DEADLINE_MARGIN + CONNECT_TIMEOUT * (
        1 + settings.connections // CONNECT_CONCURRENCY)
    workers: list[_Worker] = []
    with trio.move_on_at(hard_stop):
        async with trio.open_nursery() as nursery:
            for i in range(settings.connections):
                proto = PROTOCOLS[i % 3]
                fmt = OTHER_FORMAT[proto] if (i // 3) % 4 == 3 else HOME_FORMAT[proto]
                w = _Worker(i, proto, TOPICS[fmt], (i // 3) % settings.partitions, gw.addresses[proto], run)
                workers.append(w)
                nursery.start_soon(w.run)
            await run.all_arrived.wait()
            await trio.to_thread.run_sync(probe.ready.wait, PROBE_TIMEOUT * 4)  # its connections answered once
            report.rss_connected = proc_status_mib(pid, "VmRSS")
            cpu0, client0 = proc_cpu_seconds(pid), time.process_time()
            t0 = trio.current_time()
            run.stop_at = t0 + settings.seconds
            probe.go.set()
            run.go.set()
            sampler = trio.CancelScope()
            nursery.start_soon(_sample_rss, pid, report, t0, sampler)
            if run.live:
                await run.all_done.wait()
            report.elapsed = trio.current_time() - t0
            report.gateway_cpu = proc_cpu_seconds(pid) - cpu0
            report.client_cpu = time.process_time() - client0
            report.rss_end = proc_status_mib(pid, "VmRSS")
            report.peak_rss = proc_status_mib(pid, "VmHWM")
            probe.stop.set()
            sampler.cancel()
            for w in workers:
                w.may_close.set()
    for w in workers:
        if w.busy is not None:  # cut off by the hard deadline
            run.error(w.proto, w.busy, "timeout", "still unanswered at the run's hard deadline")
        if w.connected:
            report.per_connection.append(w.done)
    report.elapsed = report.elapsed or (settings.seconds + HARD_DEADLINE_MARGIN)
    await trio.sleep(0.5)  # let the gateway notice the closes and release what they held
    report.rss_closed = proc_status_mib(pid, "VmRSS")


async def _sample_rss(pid: int, report: LoadReport, t0: float, scope) -> None:
    import trio

    with scope:
        while True:
            report.rss_samples.append((trio.current_time() - t0, proc_status_mib(pid, "VmRSS")))
            await trio.sleep(0.5)


class _AnswerError(Exception):
    """The gateway answered a request with something else than what was asked (the connection stays usable)."""


#: Answers that are errors: counted, and the connection goes on.
_ERROR_ANSWERS = (_AnswerError, NativeError, KafkaError, TankError)


class _Worker:
    """One load connection: connect, wait for the start, loop over the kinds until the stop, close."""

    def __init__(self, index: int, proto: str, topic: str, partition: int, address, run: _Run) -> None:
        import trio

        self.index = index
        self.proto = proto
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)
        self.address = address
        self.run_ = run
        self.done: Counter = Counter()
        self.connected = False
        self.busy: str | None = None
        self.may_close = trio.Event()
        self.cursor = 0  # the plain fetches' next offset

    async def run(self) -> None:
        import trio

        run = self.run_
        load = None
        try:
            async with run.connect_limiter:
                with trio.fail_after(CONNECT_TIMEOUT):
                    t0 = time.perf_counter()
                    # answered once: the gateway has accepted and serves this connection
                    load = await _LOADS[self.proto].open(self)
                    run.report.connect_latencies.append((time.perf_counter() - t0) * 1000)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError, ClientError, _AnswerError,
                RemoteProtocolError) as exc:
            run.report.connect_failures[self.proto] += 1
            run.error(self.proto, "connect", "connect failed", repr(exc))
            run.arrived()
            if load is not None:
                await load.close()
            return
        self.connected = True
        run.report.connections_by_protocol[self.proto] += 1
        run.live += 1
        run.arrived()
        try:
            await run.go.wait()
            await self._loop(load)
        finally:
            run.live -= 1
            if not run.live and run.go.is_set():
                run.all_done.set()
            try:
                await self.may_close.wait()  # every connection stays open until the load is over
            finally:
                await load.close()

    async def _loop(self, load: "_Load") -> None:
        import trio

        run = self.run_
        report = run.report
        think = run.settings.think_ms / 1000
        wait = run.settings.long_poll_ms / 1000
        # Kinds are drawn at random: in a fixed rotation the connections of a partition fell into step (all
        # long-polling at once, nobody producing, every long-poll ending on its timer together).
        rng = random.Random(self.index)
        proto = self.proto
        latencies = report.latencies
        while True:
            if trio.current_time() < run.stop_at:
                kind = rng.choice(KINDS)
            else:  # time is up: finish with a request of each kind not done yet
                missing = [k for k in KINDS if not self.done[k]]
                if not missing:
                    return
                kind = missing[0]
            self.busy = kind
            t0 = time.perf_counter()
            try:
                with trio.fail_after(REQUEST_TIMEOUT + (wait if kind != "produce" else 0) + 1):
                    records = await load.request(kind)
            except _ERROR_ANSWERS as exc:
                run.error(proto, kind, "error answer", str(exc))
                self.busy = None
                continue
            except trio.TooSlowError:
                run.error(proto, kind, "timeout", f"no answer in {REQUEST_TIMEOUT:g} s beyond the request's wait")
                self.busy = None
                return
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:  # ConnectionClosed too
                run.error(proto, kind, "connection closed", repr(exc))
                self.busy = None
                return
            except RemoteProtocolError as exc:
                run.error(proto, kind, "protocol error", str(exc))
                self.busy = None
                return
            self.busy = None
            latencies[(proto, kind)].append((time.perf_counter() - t0) * 1000)
            report.requests[(proto, kind)] += 1
            self.done[kind] += 1
            if kind == "produce":
                report.records_produced[proto] += records
            else:
                report.records_fetched[proto] += records
                if kind == "long-poll" and not records:
                    report.empty_long_polls[proto] += 1
            if think:
                await trio.sleep(rng.uniform(0, 2 * think))


# -- the three protocols' workloads, on the trio clients ------------------------------------------------------------

class _Load:
    """A connection's workload: `request(kind)` sends one request and returns the records it moved."""

    def __init__(self, client, worker: _Worker) -> None:
        self.client = client
        self.w = worker
        self.run_ = worker.run_
        self.long_poll_ms = self.run_.settings.long_poll_ms

    @classmethod
    async def open(cls, worker: _Worker) -> "_Load":
        """Connect and get one answer (the protocol's cheapest request, or TANK's greeting)."""
        import trio

        client = await cls.connect(worker)
        try:
            await cls.handshake(client)
        except BaseException:
            with trio.CancelScope(shield=True):
                await client.aclose()
            raise
        return cls(client, worker)

    async def close(self) -> None:
        import trio

        with trio.move_on_after(2) as cleanup:
            cleanup.shield = True
            await self.client.aclose()

    async def request(self, kind: str) -> int:
        if kind == "produce":
            return await self.produce()
        if kind == "fetch":
            return await self.fetch()
        return await self.long_poll()


class _NativeLoad(_Load):
    @staticmethod
    async def connect(worker: _Worker):
        from logway.clients.native import AsyncNativeClient

        return await AsyncNativeClient.connect(*worker.address, connect_timeout=None)

    @staticmethod
    async def handshake(client) -> None:
        await client.ping()

    async def produce(self) -> int:
        w = self.w
        offsets = await self.client.produce(w.topic, w.partition, self.run_.records)
        if len(offsets) != RECORDS_PER_PRODUCE:
            raise _AnswerError(f"{len(offsets)} offsets for {RECORDS_PER_PRODUCE} records")
        self.run_.seen_end(w.key, offsets[-1] + 1)
        return len(offsets)

    async def fetch(self) -> int:
        w = self.w
        resp = await self.client.fetch(w.topic, w.partition, w.cursor, FETCH_BYTES["native"])
        w.cursor = resp.next_offset
        return len(resp.records)

    async def long_poll(self) -> int:
        w = self.w
        offset = self.run_.ends.get(w.key, 0)
        resp = await self.client.fetch(w.topic, w.partition, offset, FETCH_BYTES["native"],
                                       max_wait_ms=self.long_poll_ms, min_bytes=1)
        if resp.records:
            self.run_.seen_end(w.key, resp.next_offset)
        return len(resp.records)


class _KafkaLoad(_Load):
    @staticmethod
    async def connect(worker: _Worker):
        from logway.clients.kafka import AsyncKafkaClient, KafkaConfig

        client = AsyncKafkaClient(KafkaConfig(*worker.address, client_id="logway-load", connect_timeout=None,
                                              timeout=None, retries=0))
        await client.connect()
        return client

    @staticmethod
    async def handshake(client) -> None:
        await client.api_versions()

    async def produce(self) -> int:
        w = self.w
        base = await self.client.produce(w.topic, w.partition, self.run_.kafka_batch, acks=1)
        self.run_.seen_end(w.key, base + RECORDS_PER_PRODUCE)
        return RECORDS_PER_PRODUCE

    async def _fetch(self, offset: int, max_wait_ms: int) -> tuple[int, int]:
        """(records at or after `offset`, the offset after the last whole batch, or `offset` when none)."""
        from logway.codecs.kafka.records import iter_batches, parse_header

        w = self.w
        result = await self.client.fetch(w.topic, w.partition, offset, FETCH_BYTES["kafka"],
                                         max_wait_ms=max_wait_ms)
        self.run_.seen_end(w.key, result.high_watermark)
        count, next_offset = 0, offset
        for batch in iter_batches(result.records):
            h = parse_header(batch)
            last = h.base_offset + h.last_offset_delta
            count += max(0, last + 1 - max(h.base_offset, offset))
            next_offset = max(next_offset, last + 1)
        return count, next_offset

    async def fetch(self) -> int:
        count, self.w.cursor = await self._fetch(self.w.cursor, 0)
        return count

    async def long_poll(self) -> int:
        count, _ = await self._fetch(self.run_.ends.get(self.w.key, 0), self.long_poll_ms)
        return count


class _TankLoad(_Load):
    @staticmethod
    async def connect(worker: _Worker):
        from logway.clients.tank import AsyncTankClient

        return await AsyncTankClient.connect(*worker.address, connect_timeout=None, client_id=b"logway-load",
                                             wait_ping=False)

    @staticmethod
    async def handshake(client) -> None:
        await client.await_ping()  # the broker's greeting, sent on accept

    async def produce(self) -> int:
        w = self.w
        errors = await self.client.produce_many([(w.topic, w.partition, self.run_.tank_bundle)])
        if len(errors) != 1 or any(errors):
            raise _AnswerError(f"Produce errors {errors}")
        return RECORDS_PER_PRODUCE

    async def _consume(self, seq: int, max_wait_ms: int) -> tuple[int, int]:
        """(messages at or after `seq`, the seq to ask for next)."""
        from logway.codecs.tank import ConsumeFlags, count_messages

        w = self.w
        resp = await self.client.consume({w.topic: [(w.partition, seq, FETCH_BYTES["tank"])]},
                                         max_wait_ms=max_wait_ms, min_bytes=1 if max_wait_ms else 0)
        t = resp.topics[0]
        if t.unknown:
            raise _AnswerError(f"unknown topic {w.topic}")
        p = t.partitions[0]
        if p.error not in (ConsumeFlags.OK, ConsumeFlags.SPARSE_FIRST):
            raise _AnswerError(f"Consume err_flags {p.error:#04x} at seq {seq}")
        hwm = p.high_water_mark
        self.run_.seen_end(w.key, hwm)  # TANK's last assigned seq = offset + 1 of the last message = log end
        if not len(p.chunk):
            return 0, seq
        counted = count_messages(p.chunk, p.base_seqnum, min_seq=seq, max_seq=hwm)
        return counted.messages, counted.next_seq if counted.next_seq is not None else seq

    async def fetch(self) -> int:
        count, next_seq = await self._consume(self.w.cursor + 1, 0)
        self.w.cursor = next_seq - 1
        return count

    async def long_poll(self) -> int:
        count, _ = await self._consume(self.run_.ends.get(self.w.key, 0) + 1, self.long_poll_ms)
        return count


_LOADS = {"native": _NativeLoad, "kafka": _KafkaLoad, "tank": _TankLoad}


# -- the probe: its own process, blocking sockets ----------------------------------------------------------------

class _Probe:
    """The probe process: started at once (it connects, then waits for `go`), stopped with `stop`."""

    def __init__(self, native_addr, kafka_addr, interval: float, storm: int = 0, storm_at: float = 0.0) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.ready = ctx.Event()
        self.go = ctx.Event()
        self.stop = ctx.Event()
        self._receiver, sender = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_probe_main, args=(tuple(native_addr), tuple(kafka_addr), interval,
                                                           self.ready, self.go, self.stop, sender, storm,
                                                           storm_at),
                                name="logway-load-probe", daemon=True)
        self.proc.start()
        sender.close()

    def finish(self, report: LoadReport) -> None:
        self.stop.set()
        self.go.set()  # a probe still waiting for the start ends at once
        try:
            if self._receiver.poll(PROBE_TIMEOUT * 2 + STORM_TIMEOUT + 5):
                result = self._receiver.recv()
                report.probe_latencies = result["latencies"]
                report.probe_errors.extend(result["errors"])
                report.storm_latencies = result["storm"]
                report.storm_errors.extend(result["storm_errors"])
            else:
                report.probe_errors.append("the probe process sent no results")
        except (EOFError, OSError) as exc:
            report.probe_errors.append(f"the probe process ended without results: {exc!r}")
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)


def _probe_main(native_addr, kafka_addr, interval: float, ready, go, stop, sender, storm: int = 0,
                storm_at: float = 0.0) -> None:
    """Every `interval` s one cheap request, native Ping and Kafka ApiVersions in turn, each timed; every
    `PROBE_CONNECT_EVERY` ticks a new connection + Ping instead."""
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.clients.native import NativeClient
    from logway.codecs import native as nv

    latencies: dict[str, list[float]] = {"native Ping": [], "Kafka ApiVersions": []}
    errors: list[str] = []

    def native_client():
        return NativeClient(*native_addr, timeout=PROBE_TIMEOUT, connect_timeout=PROBE_TIMEOUT)

    def kafka_client():
        client = KafkaClient(KafkaConfig(*kafka_addr, client_id="logway-probe", connect_timeout=PROBE_TIMEOUT,
                                         timeout=PROBE_TIMEOUT, retries=0))
        client.connect()
        return client

    class Endpoint:
        """A probe connection, opened again after an error."""

        def __init__(self, open_client) -> None:
            self.open_client = open_client
            self.client = None

        def connect(self) -> None:
            self.close()
            self.client = self.open_client()

        def close(self) -> None:
            if self.client is not None:
                self.client.close()
                self.client = None

    def ping(ep: Endpoint) -> None:
        ep.client.ping()

    def api_versions(ep: Endpoint) -> None:
        ep.client.api_versions()

    def connect_and_ping(ep: Endpoint) -> None:
        ep.connect()
        try:
            ping(ep)
        finally:
            ep.close()

    storm_latencies: list[float] = []
    storm_errors: list[str] = []
    if storm:
        raise_fd_limit(storm + FD_MARGIN, "logway bench load")

    def run_storm() -> None:
        """`storm` connections at once, a Ping on each, then each Pong read in turn (the probe pauses meanwhile)."""
        t0 = time.perf_counter()
        deadline = t0 + STORM_TIMEOUT
        eps = []
        try:
            for _ in range(storm):
                ep = Endpoint(native_client)
                ep.connect()
                eps.append(ep)
            for ep in eps:
                ep.client.send(nv.PingRequest())
            for ep in eps:
                try:
                    ping_answer = ep.client.receive(timeout=max(deadline - time.perf_counter(), 0.001))
                    if not isinstance(ping_answer, nv.PongResponse):
                        raise RuntimeError(f"Ping answered {ping_answer!r:.200}")
                    storm_latencies.append((time.perf_counter() - t0) * 1000)
                except Exception as exc:
                    storm_errors.append(f"{exc!r} after {(time.perf_counter() - t0) * 1000:.0f} ms")
        except Exception as exc:
            storm_errors.append(f"opening the storm's connections failed after {len(eps)}: {exc!r}")
        finally:
            for ep in eps:
                ep.close()

    latencies[PROBE_NEW_CONNECTION] = []
    probes = [("native Ping", Endpoint(native_client), ping),
              ("Kafka ApiVersions", Endpoint(kafka_client), api_versions)]
    fresh = (PROBE_NEW_CONNECTION, Endpoint(native_client), connect_and_ping)
    try:
        for _, ep, call in probes:
            ep.connect()
            call(ep)  # answered once (untimed): the gateway has accepted the connection before the load
        ready.set()
        if go.wait(600) and not stop.is_set():
            tick = started = time.perf_counter()
            i = 0
            while not stop.is_set():
                if storm and time.perf_counter() - started >= storm_at:
                    run_storm()
                    storm = 0
                    tick = time.perf_counter()
                name, ep, call = fresh if i % PROBE_CONNECT_EVERY == PROBE_CONNECT_EVERY - 1 else probes[i % 2]
                i += 1
                t0 = time.perf_counter()
                try:
                    if ep.client is None and call is not connect_and_ping:
                        ep.connect()
                    call(ep)
                    latencies[name].append((time.perf_counter() - t0) * 1000)
                except Exception as exc:  # a timeout, a close, a bad answer: counted, then a fresh connection
                    errors.append(f"{name}: {exc!r} after {(time.perf_counter() - t0) * 1000:.0f} ms")
                    ep.close()
                tick += interval
                delay = tick - time.perf_counter()
                if delay > 0:
                    stop.wait(delay)
                else:
                    tick = time.perf_counter()  # late: no burst to catch up
    except Exception as exc:
        errors.append(f"probe failed: {exc!r}")
    finally:
        for _, ep, _ in probes + [fresh]:
            ep.close()
        sender.send({"latencies": latencies, "errors": errors, "storm": storm_latencies,
                     "storm_errors": storm_errors})
        sender.close()
