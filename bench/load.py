"""`logway bench load`: many concurrent connections of every protocol against one gateway (issue 6).

One gateway (`GatewayProcess`, a subprocess, fresh temporary data directory, 127.0.0.1 only) and, in this
process, one epoll loop driving `--connections` non-blocking TCP connections (default 1,000) spread evenly over
the native, Kafka and TANK listeners. Each connection speaks its protocol one request at a time through the lean
wire of `bench/requests.py` — request frames encoded once by the codecs' client sides with the changing fields
(offsets, correlation and request ids) patched in, answers read where they lie for the fields the checks need
(error codes, the next offset or high-water mark, record counts from batch or bundle headers) — so the load
generator costs a fraction of what the gateway does per request and can drive it from one core. It loops for
`--seconds` (default 30) over three kinds of request:

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

`--kinds` picks the kinds drawn from (default the three above); it may also name `ping`, each protocol's cheapest
request — native Ping, Kafka ApiVersions, TANK DiscoverPartitions of the connection's partition (TANK has no Ping a
client sends) — so `--kinds ping` measures what a request costs the gateway before it does any work of the kind.
`--protocols` picks the connections' protocols (default all three, in turn; without TANK, `load-tank` is created
through Kafka); `--workers N` runs the gateway with `workers: N` (docs/scaling.md): each Kafka connection goes to
its partition's broker, as a Kafka client routes, native and TANK connections to the shared port (every worker
serves it, hands a connection over to the worker that owns its partition and relays what it cannot; the report
counts the connections handed over and the requests relayed; `--set worker_handover=false` relays every request
for another worker's partition, as before hand-overs) — or, with `--at-owner`, to their partition owner's own
listener (`native.i`, `tank.i`): neither hand-over nor relay, as a client that routed itself would be served
(docs/scaling.md, "Handing connections over"). CPU and memory are summed over the supervisor and its workers,
the gateway's counters (transcoded reads, function calls, relayed requests, hand-overs) over the workers (the
supervisor's admin listener).
`--backend postgres` stores the log in PostgreSQL (a throwaway server of its own, or `--dsn`; the report adds
its CPU), and `--gateways N` runs N gateway processes over that one database (`storage.postgres.cluster`): each
Kafka connection goes to its partition's leader as Metadata names it, native and TANK connections are spread over
the gateways in turn (as a TCP load balancer would: a request for another gateway's partition is relayed to it),
and CPU, memory and counters are summed over the gateways; the probe asks the first gateway.
The report also gives the transcoded reads of the load and how many were shared entirely (`transcoded.py`), and
with `--count-calls` the gateway's function calls per request (`count_calls: true`; the figure a noisy machine
does not move, where CPU seconds move by tens of percent from one run to the next).

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
sample since the kernel updates VmHWM lazily, at the end, after the connections closed), gateway and load
generator CPU (seconds, and µs per request answered; the gateway's also split off its kernel part, system time
from /proc), probe p50/p99/max, and ERROR lines in the gateway's log. The exit status is non-zero when anything
went wrong: an error, a connection that failed or did not do every kind of request, a probe that went unanswered,
or an error logged by the gateway.

Everything is bounded in time: connects (10 s each), requests (15 s beyond their wait), the whole run (a hard
deadline of `--seconds` + 60 s stops whatever is left and counts it as a timeout), the probe (5 s per answer).
The client raises its RLIMIT_NOFILE soft limit to what the connections need.
"""

from __future__ import annotations

import argparse
import errno
import heapq
import multiprocessing
import os
import random
import socket
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .proc import gateway_processes, proc_cpu_times, raise_fd_limit, summed_mib
from .registry import Benchmark
from .requests import CALLS, AnswerError, WireProtocolError, metric_readings

__all__ = ["BENCHMARKS", "LoadSettings", "LoadReport", "run_load", "PROTOCOLS", "KINDS", "ALL_KINDS"]

KiB = 1024
MiB = 1024 * 1024
PROTOCOLS = ("native", "kafka", "tank")
KINDS = ("produce", "fetch", "long-poll")  # the default mix
#: `--kinds` may also name `ping`: each protocol's cheapest request (native Ping, Kafka ApiVersions, TANK
#: DiscoverPartitions of the connection's partition: TANK has no Ping a client sends).
ALL_KINDS = KINDS + ("ping",)
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
    parser.add_argument("--workers", type=int, default=1,
                        help="the gateway's `workers` (docs/scaling.md): Kafka connections go to their partition's "
                             "broker, native and TANK ones to the shared port (every worker hands connections over "
                             "to their partition's owner, or relays)")
    parser.add_argument("--at-owner", action="store_true",
                        help="with --workers > 1: native and TANK connections go to their partition owner's own "
                             "listener instead of the shared port (neither hand-overs nor relays)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS),
                        help="comma-separated protocols of the load connections (in turn), e.g. native,kafka")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated kinds of request the connections draw from (default the three of the "
                             f"load; any of {', '.join(ALL_KINDS)}), e.g. ping: what a request costs before any work")
    parser.add_argument("--set", dest="gateway_settings", action="append", default=[], metavar="KEY=VALUE",
                        help="a gateway configuration override, as `logway serve --set` takes it (repeatable), "
                             "e.g. limits.data_requests_per_pass=0")
    parser.add_argument("--backend", default="local", choices=("local", "postgres"),
                        help="the gateway's storage.backend (postgres: a throwaway PostgreSQL server of its own, "
                             "or --dsn)")
    parser.add_argument("--gateways", type=int, default=1,
                        help="with the postgres backend, gateway processes over the one database (2 or more: "
                             "storage.postgres.cluster; each Kafka connection to its partition's leader, native and "
                             "TANK ones spread over the gateways, which relay)")
    parser.add_argument("--dsn", default="",
                        help="with the postgres backend, a database to use (a fresh schema, dropped after)")
    parser.add_argument("--count-calls", action="store_true",
                        help="the gateway counts its function calls (count_calls: true, several times slower: its CPU "
                             "figures then say nothing) and the report gives them per request of the load (one "
                             "worker only)")


def run(args: argparse.Namespace) -> int:
    settings = LoadSettings(connections=args.connections, seconds=args.seconds, partitions=args.partitions,
                            record_bytes=args.record_bytes, long_poll_ms=args.long_poll_ms,
                            think_ms=args.think_ms, probe_interval_ms=args.probe_interval_ms, flush=args.flush,
                            storm=args.storm, gateway_settings=tuple(args.gateway_settings), workers=args.workers,
                            protocols=tuple(p.strip() for p in args.protocols.split(",") if p.strip()),
                            kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
                            count_calls=args.count_calls, at_owner=args.at_owner, backend=args.backend,
                            gateways=args.gateways, dsn=args.dsn)
    if settings.count_calls and (settings.workers != 1 or settings.gateways != 1):
        raise SystemExit("logway bench load: --count-calls counts one event loop: use it with one worker and one "
                         "gateway")
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
    gateway_settings: tuple[str, ...] = ()  # KEY=VALUE overrides of the gateway's configuration
    workers: int = 1  # the gateway's `workers`
    protocols: tuple[str, ...] = PROTOCOLS  # of the load connections, in turn
    kinds: tuple[str, ...] = KINDS  # of the requests, drawn at random with equal odds
    count_calls: bool = False  # the gateway counts its function calls (`--count-calls`)
    at_owner: bool = False  # (workers > 1) native and TANK connections to their partition owner's own listener
    backend: str = "local"  # the gateway's storage.backend: local or postgres
    gateways: int = 1  # (postgres) gateways over the one database; 2 or more: cluster mode
    dsn: str = ""  # (postgres) a database to use; empty: a throwaway PostgreSQL server of its own


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
    gateway_cpu: float = 0.0  # CPU seconds the gateway used during the load (its gateways': summed)
    database_cpu: float | None = None  # CPU seconds PostgreSQL used during the load (None: unknown, or none)
    gateway_system_cpu: float = 0.0  # of which in the kernel (system time: socket and file syscalls, ...)
    client_cpu: float = 0.0
    probe_latencies: dict = field(default_factory=dict)  # kind -> [ms]
    probe_errors: list = field(default_factory=list)
    storm_latencies: list = field(default_factory=list)  # ms from the storm's start to each connection's Pong
    storm_errors: list = field(default_factory=list)
    gateway_log_errors: list = field(default_factory=list)  # ERROR/CRITICAL/Traceback lines of its stderr
    gateway_log_warnings: int = 0
    gateway_exit: int | None = None
    #: The gateway's metrics read as the load started and as it ended (`requests.metric_readings`; with workers:
    #: N the supervisor's, summed over the workers).
    metrics_start: dict = field(default_factory=dict)
    metrics_end: dict = field(default_factory=dict)

    # -- derived figures ---------------------------------------------------------------------------------------
    @property
    def connections(self) -> int:
        return sum(self.connections_by_protocol.values())

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def incomplete_connections(self) -> int:
        """Established connections that did not complete a request of every kind."""
        kinds = self.settings.kinds
        return sum(1 for c in self.per_connection if any(c[k] == 0 for k in kinds))

    def probe_all(self) -> list[float]:
        """The probe's request latencies on its open connections (Ping and ApiVersions), sorted."""
        return sorted(x for k, v in self.probe_latencies.items() if k != PROBE_NEW_CONNECTION for x in v)

    def delta(self, name: str) -> float | None:
        """How much the gateway's counter `name` (a key of `requests.metric_readings`) grew during the load; None
        when the gateway does not report it."""
        if name not in self.metrics_start or name not in self.metrics_end:
            return None
        return self.metrics_end[name][0] - self.metrics_start[name][0]

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
        described = {"produce": f"produce ({RECORDS_PER_PRODUCE} x {s.record_bytes} B)", "fetch": "fetch",
                     "long-poll": f"long-poll ({s.long_poll_ms} ms)", "ping": "ping"}
        workers = f", workers: {s.workers}{' (every connection at its owner)' if s.at_owner else ''}"
        backend = f", storage.backend={s.backend}" if s.backend != "local" else ""
        if s.gateways > 1:
            backend += (f", {s.gateways} gateways (storage.postgres.cluster; each Kafka connection at its leader, the "
                        f"others spread over the gateways)")
        lines = [f"load (flush: {s.flush}{workers if s.workers > 1 else ''}{backend}): "
                 f"{s.connections:,} connections over {_and(s.protocols)}, each looping over "
                 f"{_and([described[k] for k in s.kinds])} for {s.seconds:g} s; {s.partitions} partitions per topic; "
                 f"think time {s.think_ms:g} ms" + "".join(f"; {item}" for item in s.gateway_settings),
                 f"  connections established: {self.connections:,} "
                 f"({', '.join(f'{p} {self.connections_by_protocol[p]}' for p in s.protocols)}); "
                 f"failed: {sum(self.connect_failures.values())}; connect to first answer (before the load): "
                 f"p50 {_pct(sorted(self.connect_latencies), .5):.1f} ms, max "
                 f"{max(self.connect_latencies, default=float('nan')):.1f} ms",
                 f"  requests answered: {total:,} in {self.elapsed:.1f} s ({total / max(self.elapsed, 1e-9):,.0f}/s); "
                 f"latencies as the load generator saw them (its own busy event loop included)"]
        for proto in s.protocols:
            parts = []
            for kind in s.kinds:
                lat = sorted(self.latencies.get((proto, kind), ()))
                n = self.requests[(proto, kind)]
                parts.append(f"{kind} {n:,}" + (f" (p50 {_pct(lat, .5):.1f} / p99 {_pct(lat, .99):.1f} ms)"
                                                 if lat else ""))
            lines.append(f"    {proto:6s}: " + ", ".join(parts) + f"; long-polls answered empty by the timer: "
                         f"{self.empty_long_polls[proto]:,}")
        lines.append(f"  records produced: {sum(self.records_produced.values()):,} "
                     f"({', '.join(f'{p} {self.records_produced[p]:,}' for p in s.protocols)}); "
                     f"fetched: {sum(self.records_fetched.values()):,} "
                     f"({', '.join(f'{p} {self.records_fetched[p]:,}' for p in s.protocols)})")
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
        per = 1e6 / max(total, 1)
        lines.append(f"  CPU during the load: gateway {self.gateway_cpu:.1f} s "
                     f"({100 * self.gateway_cpu / max(self.elapsed, 1e-9):.0f} % of one core, "
                     f"{self.gateway_cpu * per:.0f} µs per request, of which {self.gateway_system_cpu * per:.0f} µs "
                     f"in the kernel)" + (f" summed over {s.gateways} gateways" if s.gateways > 1 else "")
                     + ("" if self.database_cpu is None else
                        f", PostgreSQL {self.database_cpu:.1f} s ({self.database_cpu * per:.0f} µs per request)")
                     + f", load generator {self.client_cpu:.1f} s "
                     f"({100 * self.client_cpu / max(self.elapsed, 1e-9):.0f} % of one core, "
                     f"{self.client_cpu * per:.0f} µs per request)")
        delta = {k: self.delta(k) for k in self.metrics_end if k in self.metrics_start}
        if "transcoded_reads" in delta:
            decoded, shared = delta["transcoded_reads"], delta.get("transcoded_reads_shared", 0.0)
            lines.append(f"  transcoded reads: {decoded + shared:,.0f}, of which {shared:,.0f} "
                         f"({100 * shared / max(decoded + shared, 1):.0f} %) shared entirely (every batch transcoded "
                         f"for another reader), {decoded:,.0f} decoded at least one batch")
            decoded, shared = delta.get("transcoded_batches", 0.0), delta.get("transcoded_batches_shared", 0.0)
            lines.append(f"    their stored batches: {decoded + shared:,.0f}, of which {shared:,.0f} "
                         f"({100 * shared / max(decoded + shared, 1):.0f} %) shared (reads found whole not counted)")
        if "relayed_requests" in delta:
            lines.append(f"  requests relayed between workers: {delta['relayed_requests']:,.0f} "
                         f"({100 * delta['relayed_requests'] / max(total, 1):.0f} % of the load's)")
        if "handed_over_out" in delta:
            shared = sum(n for p, n in self.connections_by_protocol.items() if p != "kafka")
            lines.append(f"  connections handed over between workers: {delta['handed_over_out']:,.0f} "
                         f"({100 * delta['handed_over_out'] / max(shared, 1):.0f} % of the native and TANK ones); "
                         f"not taken (relayed instead): {delta.get('handed_over_refused', 0.0):,.0f}")
        if CALLS in delta:
            lines.append(f"  function calls of the gateway's event loop: {delta[CALLS] * per / 1e6:.1f} per request "
                         f"(count_calls: true, the probe's included; the CPU figures above say nothing then)")
        lines.append(f"  gateway log: {len(self.gateway_log_errors)} ERROR line(s), {self.gateway_log_warnings} "
                     f"WARNING line(s); exit status {self.gateway_exit}")
        for line in self.gateway_log_errors[:5]:
            lines.append(f"    {line}")
        problems = self.problems()
        lines.append("  result: " + ("OK" if not problems else "FAILED: " + "; ".join(problems)))
        return "\n".join(lines)


def _and(items) -> str:
    """'a, b and c'."""
    items = list(items)
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]


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
    from .gateways import Database, Gateways, postgres_server

    if settings.connections < 1 or settings.seconds <= 0:
        raise SystemExit("logway bench load: --connections and --seconds must be positive")
    if not settings.protocols or set(settings.protocols) - set(PROTOCOLS):
        raise SystemExit(f"logway bench load: --protocols takes some of {', '.join(PROTOCOLS)}")
    if not settings.kinds or set(settings.kinds) - set(ALL_KINDS):
        raise SystemExit(f"logway bench load: --kinds takes some of {', '.join(ALL_KINDS)}")
    if settings.at_owner and settings.workers < 2:
        raise SystemExit("logway bench load: --at-owner needs --workers 2 or more (one worker owns everything)")
    if settings.gateways < 1 or (settings.gateways > 1 and settings.backend != "postgres"):
        raise SystemExit("logway bench load: several gateways need --backend postgres")
    raise_fd_limit(settings.connections + FD_MARGIN, "logway bench load")  # the storm's sockets are the probe process's
    report = LoadReport(settings)
    postgres = settings.backend == "postgres"
    with tempfile.TemporaryDirectory(prefix="logway-load-") as tmp, postgres_server(postgres and not settings.dsn) \
            as server, Database(settings.backend, settings.dsn, server, 0) as (storage, database_cpu):
        log_path = os.path.join(tmp, "gateway.log")
        limit = settings.connections + settings.storm + 16  # + the probe's and the set-up's connections
        with open(log_path, "wb") as log_file:
            tank = ("listeners.tank.enabled=true",) if "tank" in settings.protocols else ()
            gws = Gateways(tmp, settings.gateways, f"storage.flush={settings.flush}", "log_level=WARNING",
                           f"limits.max_connections={limit}", f"limits.max_connections_per_ip={limit}",
                           *((f"workers={settings.workers}",) if settings.workers != 1 else ()), *tank, *storage,
                           *settings.gateway_settings,
                           *(("count_calls=true",) if settings.count_calls else ()), stderr=log_file)
            gw = gws.members[0]
            try:
                for proto in settings.protocols:
                    if proto not in gw.addresses:
                        raise SystemExit(f"logway bench load: the gateway has no {proto} listener")
                _create_topics(gw, settings.partitions, tank="tank" in settings.protocols)
                routes = None  # one gateway: every connection to it (or, with workers, to the owning worker)
                if settings.gateways > 1:
                    routes = {(topic, p): address for topic in TOPICS.values()
                              for p, address in gws.routes(topic, settings.partitions).items()}
                pids = [pid for m in gws.members for pid in gateway_processes(m.pid).values()]
                report.rss_start = summed_mib(pids, "VmRSS")
                probe = _Probe(gw.addresses["native"], gw.addresses["kafka"], settings.probe_interval_ms / 1000,
                               settings.storm, settings.seconds / 3)
                try:
                    _drive(gw.addresses, pids, gws.admins, routes, database_cpu, settings, report, probe,
                           [m.addresses for m in gws.members])
                finally:
                    probe.finish(report)
                # The kernel updates VmHWM lazily (when memory is unmapped), so it can lag a sample of VmRSS.
                report.peak_rss = max([summed_mib(pids, "VmHWM"), report.peak_rss, report.rss_end]
                                      + [m for _, m in report.rss_samples])
            finally:
                report.gateway_exit = gws.stop()
        with open(log_path, "rb") as f:
            for raw in f.read().decode(errors="replace").splitlines():
                if " ERROR " in raw or " CRITICAL " in raw or raw.startswith("Traceback"):
                    report.gateway_log_errors.append(raw)
                elif " WARNING " in raw:
                    report.gateway_log_warnings += 1
    return report


def _cpu_times(pids: list[int]) -> tuple[float, float]:
    """(user, system) CPU seconds summed over the gateway's processes."""
    times = [proc_cpu_times(pid) for pid in pids]
    return sum(t[0] for t in times), sum(t[1] for t in times)


def _create_topics(gw, partitions: int, tank: bool = True) -> None:
    """`load-kafka` through the native protocol (Kafka format, the default), `load-tank` through TANK (or, when the
    load has no TANK connection, through Kafka CreateTopics with the topic config format=tank)."""
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.clients.native import NativeClient
    from logway.clients.tank import TankClient

    with NativeClient(*gw.native, timeout=30) as client:
        client.create_topic(TOPICS["kafka"], partitions)
    if not tank:
        with KafkaClient(KafkaConfig(*gw.addresses["kafka"], timeout=30)) as kafka:
            kafka.create_topic(TOPICS["tank"], partitions, configs={"format": "tank"})
        return
    with TankClient(*gw.addresses["tank"], timeout=30) as tank:
        err = tank.create_topic(TOPICS["tank"], partitions)
        if err:
            raise SystemExit(f"logway bench load: TANK CreateTopic answered error {err}")


class _Run:
    """What the connections share: the settings, the report they fill, the log ends they have seen, the frames."""

    def __init__(self, settings: LoadSettings, report: LoadReport) -> None:
        from logway.codecs.kafka.records import encode_batch
        from logway.codecs.records import Record
        from logway.codecs.tank import encode_bundle

        self.settings = settings
        self.report = report
        self.ends: dict[tuple[str, int], int] = {}  # (topic, partition) -> highest log end offset seen
        self.live = 0  # connections still looping
        self.stop_at = float("inf")  # perf_counter() of the end of the load
        now = int(time.time() * 1000)
        value = os.urandom(settings.record_bytes)
        self.records = [Record(value) for _ in range(RECORDS_PER_PRODUCE)]
        self.kafka_batch = encode_batch(self.records, default_timestamp=now)
        self.tank_bundle = encode_bundle(self.records, codec=0, default_timestamp=now)

    def seen_end(self, key: tuple[str, int], end: int) -> None:
        if end > self.ends.get(key, 0):
            self.ends[key] = end

    def error(self, proto: str, kind: str, what: str, message: str) -> None:
        self.report.errors[(proto, kind, what)] += 1
        if len(self.report.error_samples) < 10:
            self.report.error_samples.append(f"{proto}/{kind}: {what}: {message}")


# -- the connections: one request at a time, frames of the lean wire (bench/requests.py) --------------------------

_CONNECTING, _HELLO, _READY, _DONE = range(4)


class _Closed(Exception):
    """The gateway closed the connection (or reset it)."""


class _Conn:
    """One load connection: its socket, its request in flight, and what its protocol's requests need."""

    __slots__ = ("index", "proto", "topic", "partition", "key", "address", "sock", "fd", "state", "done",
                 "connected", "busy", "t0", "deadline", "pending", "out", "cursor", "asked", "rng", "wire",
                 "latencies", "counted", "frame_size", "header")

    def __init__(self, index: int, proto: str, topic: str, partition: int, address, run: _Run) -> None:
        self.index = index
        self.proto = proto
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)
        self.address = address
        self.sock = None
        self.fd = -1
        self.state = _CONNECTING
        self.done: Counter = Counter()
        self.connected = False
        self.busy: str | None = None  # the kind of the request in flight
        self.t0 = 0.0  # perf_counter() when it was sent (or when the connect started)
        self.deadline = 0.0
        self.pending: bytearray | None = None  # the start of an answer not yet whole
        self.out = b""  # what a short send left to write
        self.cursor = 0  # the plain fetches' next offset
        self.asked = 0  # the offset (TANK: seq) the fetch in flight asked for
        # Kinds are drawn at random: in a fixed rotation the connections of a partition fell into step (all
        # long-polling at once, nobody producing, every long-poll ending on its timer together).
        self.rng = random.Random(index)
        report = run.report
        self.latencies = {k: report.latencies[(proto, k)] for k in ALL_KINDS}
        self.counted = {k: (proto, k) for k in ALL_KINDS}
        self.wire = self.make_wire(run)
        self.frame_size = self.wire.frame_size
        self.header = self.wire.HEADER

    def hello(self):
        """The first request (answered once before the load: the gateway serves this connection); None when the
        gateway speaks first."""
        return self.wire.hello

    def hello_answer(self, buf, s: int, e: int) -> None:
        self.wire.hello_answer(buf, s, e)


class _NativeConn(_Conn):
    __slots__ = ()

    def make_wire(self, run: _Run):
        from .requests import NativeWire

        return NativeWire(self.topic, self.partition, run.records, FETCH_BYTES["native"], run.settings.long_poll_ms)

    def frame(self, kind: str, run: _Run):
        if kind == "produce":
            return self.wire.produce_frame()
        if kind == "fetch":
            return self.wire.fetch_frame(self.cursor)
        if kind == "ping":
            return self.wire.hello
        return self.wire.fetch_frame(run.ends.get(self.key, 0), True)

    def answer(self, kind: str, buf, s: int, e: int, run: _Run) -> int:
        if kind == "ping":
            self.wire.hello_answer(buf, s, e)
            return 0
        if kind == "produce":
            count, end = self.wire.produce_answer(buf, s, e)
            if count != RECORDS_PER_PRODUCE:
                raise AnswerError(f"{count} offsets for {RECORDS_PER_PRODUCE} records")
            run.seen_end(self.key, end)
            return count
        count, next_offset = self.wire.fetch_answer(buf, s, e)
        if kind == "fetch":
            self.cursor = next_offset
        elif count:
            run.seen_end(self.key, next_offset)
        return count


class _KafkaConn(_Conn):
    __slots__ = ()

    def make_wire(self, run: _Run):
        from .requests import KafkaWire

        return KafkaWire(self.topic, self.partition, run.kafka_batch, FETCH_BYTES["kafka"],
                         run.settings.long_poll_ms, client_id="logway-load")

    def hello(self):
        return self.wire.hello_frame()

    def frame(self, kind: str, run: _Run):
        if kind == "produce":
            return self.wire.produce_frame()
        if kind == "fetch":
            self.asked = self.cursor
            return self.wire.fetch_frame(self.cursor)
        if kind == "ping":
            return self.wire.hello_frame()
        self.asked = run.ends.get(self.key, 0)
        return self.wire.fetch_frame(self.asked, True)

    def answer(self, kind: str, buf, s: int, e: int, run: _Run) -> int:
        if kind == "ping":
            self.wire.hello_answer(buf, s, e)
            return 0
        if kind == "produce":
            run.seen_end(self.key, self.wire.produce_answer(buf, s, e) + RECORDS_PER_PRODUCE)
            return RECORDS_PER_PRODUCE
        count, next_offset, hwm = self.wire.fetch_answer(buf, s, e, self.asked)
        run.seen_end(self.key, hwm)
        if kind == "fetch":
            self.cursor = next_offset
        return count


class _TankConn(_Conn):
    __slots__ = ()

    def make_wire(self, run: _Run):
        from .requests import TankWire

        return TankWire(self.topic, self.partition, run.tank_bundle, FETCH_BYTES["tank"], run.settings.long_poll_ms,
                        client_id=b"logway-load")

    def frame(self, kind: str, run: _Run):
        if kind == "produce":
            return self.wire.produce_frame()
        if kind == "fetch":
            self.asked = self.cursor + 1  # TANK's seqs start at 1: seq = offset + 1
            return self.wire.consume_frame(self.asked)
        if kind == "ping":
            return self.wire.discover_frame()
        self.asked = run.ends.get(self.key, 0) + 1
        return self.wire.consume_frame(self.asked, True)

    def answer(self, kind: str, buf, s: int, e: int, run: _Run) -> int:
        if kind == "produce":
            self.wire.produce_answer(buf, s, e)
            return RECORDS_PER_PRODUCE
        if kind == "ping":
            run.seen_end(self.key, self.wire.discover_answer(buf, s, e)[1])
            return 0
        count, next_seq, hwm = self.wire.consume_answer(buf, s, e, self.asked)
        run.seen_end(self.key, hwm)  # TANK's last assigned seq = offset + 1 of the last message = log end
        if kind == "fetch":
            self.cursor = next_seq - 1
        return count


_CONNS = {"native": _NativeConn, "kafka": _KafkaConn, "tank": _TankConn}

#: Bytes one read may take: more than any answer of the load (a TANK long-poll answers every bundle appended
#: since it parked, whatever its fetch size).
_RECEIVE_BYTES = 4 * MiB


class _Driver:
    """Every load connection in one epoll loop: non-blocking sockets, one request in flight per connection, the
    next one sent as soon as an answer is whole (or after the think time). No event-loop library and no client
    objects: per request, one send, one or a few reads into a shared buffer, and the answer read where it lies."""

    def __init__(self, addresses: dict, pids: list[int], routes: dict | None, settings: LoadSettings,
                 report: LoadReport, probe: "_Probe", members: list[dict] | None = None) -> None:
        """`addresses`: the gateway's listeners (the first one's, with several); `pids`: the gateway processes;
        `routes`: with several gateways, the Kafka address of each (topic, partition)'s leader, and `members` each
        gateway's listeners (native and TANK connections go to each in turn)."""
        import select

        self.pids = pids
        self.settings = settings
        self.report = report
        self.probe = probe
        self.run = _Run(settings, report)
        self.conns: list[_Conn] = []
        from logway.gateway.cluster.ownership import leaders
        from logway.storage.engine import Share

        protocols = settings.protocols
        share = Share(settings.workers, leaders(settings.workers)) if settings.workers > 1 else None
        for i in range(settings.connections):
            proto, turn = protocols[i % len(protocols)], i // len(protocols)
            topic = TOPICS[OTHER_FORMAT[proto] if turn % 4 == 3 else HOME_FORMAT[proto]]
            partition = turn % settings.partitions
            if routes is None:
                address = addresses[proto]
            elif proto == "kafka":
                address = routes[(topic, partition)]
            else:  # any gateway, as a TCP load balancer spreads them: it relays what another leads
                address = members[i % len(members)][proto]
            if share is not None and (proto == "kafka" or settings.at_owner):
                # To the partition's leader, as a Kafka client routes; `at_owner`: native and TANK ones too, to the
                # owner's own listener (worker 0's Kafka listener is "kafka" in the ready file, its others "name.0").
                owner = share.owner(topic, partition)
                address = addresses["kafka" if proto == "kafka" and not owner else f"{proto}.{owner}"]
            self.conns.append(_CONNS[proto](i, proto, topic, partition, address, self.run))
        self.epoll = select.epoll(settings.connections + 16)
        self.by_fd: dict[int, _Conn] = {}
        self.buf = bytearray(_RECEIVE_BYTES)
        self.view = memoryview(self.buf)
        self.think = settings.think_ms / 1000
        self.wait = settings.long_poll_ms / 1000
        self.timers: list = []  # heap of (perf_counter, index, conn): connections thinking

    # -- reading and writing ------------------------------------------------------------------------------------
    def _read(self, c: _Conn):
        """(buffer, start, end) of the answer once whole, else None. Raises _Closed or WireProtocolError."""
        try:
            n = c.sock.recv_into(self.view)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:  # a reset
            raise _Closed(repr(exc)) from None
        if not n:
            raise _Closed("the gateway closed the connection")
        pending = c.pending
        if pending is None:
            buf = self.buf
            if n >= c.header:
                size = c.frame_size(buf, 0)
                if n == size:
                    return buf, 0, n
                if n > size:
                    raise WireProtocolError(f"{n - size} bytes beyond the answer")
            c.pending = bytearray(self.view[:n])
            return None
        pending += self.view[:n]
        if len(pending) < c.header:
            return None
        size = c.frame_size(pending, 0)
        if len(pending) < size:
            return None
        if len(pending) > size:
            raise WireProtocolError(f"{len(pending) - size} bytes beyond the answer")
        c.pending = None
        return pending, 0, size

    def _send(self, c: _Conn, frame) -> None:
        try:
            n = c.sock.send(frame)
        except (BlockingIOError, InterruptedError):
            n = 0
        if n < len(frame):  # the socket buffer is full: the rest when it drains
            c.out = bytes(frame[n:])
            self.epoll.modify(c.fd, _EPOLLIN | _EPOLLOUT)

    def _flush(self, c: _Conn) -> None:
        n = c.sock.send(c.out)
        c.out = c.out[n:]
        if not c.out:
            self.epoll.modify(c.fd, _EPOLLIN)

    # -- connecting ---------------------------------------------------------------------------------------------
    def connect_all(self, hard_stop: float) -> None:
        """Open every connection, CONNECT_CONCURRENCY at a time, each answered once (or failed)."""
        report, run = self.report, self.run
        queue = list(reversed(self.conns))
        opening: set[_Conn] = set()
        while queue or opening:
            while queue and len(opening) < CONNECT_CONCURRENCY:
                c = queue.pop()
                opening.add(c)
                self._start_connect(c)
                if c.state == _DONE:
                    opening.discard(c)
            now = time.perf_counter()
            for fd, ev in self.epoll.poll(0.05):
                c = self.by_fd.get(fd)
                if c is None:
                    continue
                try:
                    if c.state == _CONNECTING:
                        err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            raise OSError(err, os.strerror(err))
                        self.epoll.modify(fd, _EPOLLIN)
                        c.state = _HELLO
                        hello = c.hello()
                        if hello is not None:
                            self._send(c, hello)
                    elif c.state == _HELLO:
                        if ev & _EPOLLOUT and c.out:
                            self._flush(c)
                        got = self._read(c)
                        if got is not None:
                            c.hello_answer(*got)
                            c.state = _READY
                            c.connected = True
                            report.connect_latencies.append((time.perf_counter() - c.t0) * 1000)
                            report.connections_by_protocol[c.proto] += 1
                            opening.discard(c)
                except (OSError, _Closed, WireProtocolError, AnswerError) as exc:
                    self._connect_failed(c, exc)
                    opening.discard(c)
            late = [c for c in opening if now > c.deadline or now > hard_stop]
            for c in late:
                self._connect_failed(c, TimeoutError(f"not answered within {CONNECT_TIMEOUT:g} s"))
                opening.discard(c)
            if now > hard_stop:
                for c in queue:
                    self._connect_failed(c, TimeoutError("not opened before the run's hard deadline"))
                queue.clear()
        run.live = sum(1 for c in self.conns if c.connected)

    def _start_connect(self, c: _Conn) -> None:
        c.t0 = time.perf_counter()
        c.deadline = c.t0 + CONNECT_TIMEOUT
        try:
            family = socket.AF_INET6 if ":" in c.address[0] else socket.AF_INET
            sock = c.sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = sock.connect_ex(c.address)
            if err not in (0, errno.EINPROGRESS):
                raise OSError(err, os.strerror(err))
            c.fd = sock.fileno()
            self.by_fd[c.fd] = c
            self.epoll.register(c.fd, _EPOLLOUT)
        except OSError as exc:
            self._connect_failed(c, exc)

    def _connect_failed(self, c: _Conn, exc: BaseException) -> None:
        self.report.connect_failures[c.proto] += 1
        self.run.error(c.proto, "connect", "connect failed", repr(exc))
        c.state = _DONE
        self._close(c)

    def _close(self, c: _Conn) -> None:
        if c.sock is not None:
            if c.fd in self.by_fd:
                del self.by_fd[c.fd]
                try:
                    self.epoll.unregister(c.fd)
                except (OSError, ValueError):
                    pass
            c.sock.close()
            c.sock = None

    # -- the load -----------------------------------------------------------------------------------------------
    def _next(self, c: _Conn, now: float) -> None:
        """Send the connection's next request; after `--seconds`, one of each kind it has not done yet, then stop."""
        run = self.run
        kinds = self.settings.kinds
        if now < run.stop_at:
            kind = c.rng.choice(kinds)
        else:  # time is up: finish with a request of each kind not done yet
            done = c.done
            kind = next((k for k in kinds if not done[k]), None)
            if kind is None:
                self._finish(c)
                return
        c.busy = kind
        c.deadline = now + REQUEST_TIMEOUT + (self.wait if kind == "long-poll" else 0) + 1
        frame = c.frame(kind, run)
        c.t0 = time.perf_counter()
        try:
            self._send(c, frame)
        except OSError as exc:
            self._failed(c, "connection closed", repr(exc))

    def _finish(self, c: _Conn) -> None:
        """The connection stops looping (it stays open until the load is over)."""
        if c.state != _DONE:
            c.state = _DONE
            self.run.live -= 1
            if c.fd in self.by_fd:
                del self.by_fd[c.fd]
                self.epoll.unregister(c.fd)

    def _failed(self, c: _Conn, what: str, message: str) -> None:
        self.run.error(c.proto, c.busy or "between requests", what, message)
        c.busy = None
        self._finish(c)

    def _answered(self, c: _Conn, buf, s: int, e: int, now: float) -> None:
        kind = c.busy
        if kind is None:
            raise WireProtocolError("an answer to no request")
        report = self.report
        try:
            records = c.answer(kind, buf, s, e, self.run)
        except AnswerError as exc:  # counted; the connection goes on
            self.run.error(c.proto, kind, "error answer", str(exc))
            c.busy = None
            self._next(c, now)
            return
        c.busy = None
        c.latencies[kind].append((now - c.t0) * 1000)
        report.requests[c.counted[kind]] += 1
        c.done[kind] += 1
        if kind == "produce":
            report.records_produced[c.proto] += records
        elif kind != "ping":
            report.records_fetched[c.proto] += records
            if kind == "long-poll" and not records:
                report.empty_long_polls[c.proto] += 1
        if self.think:
            heapq.heappush(self.timers, (now + c.rng.uniform(0, 2 * self.think), c.index, c))
        else:
            self._next(c, now)

    def load(self, hard_stop: float) -> float:
        """Loop until every connection stopped (or the hard deadline); the perf_counter() of the end."""
        run, report, pids = self.run, self.report, self.pids
        t0 = time.perf_counter()
        run.stop_at = t0 + self.settings.seconds
        for c in self.conns:
            if c.connected:
                self._next(c, t0)
        next_sample = t0
        poll, by_fd, read, answered = self.epoll.poll, self.by_fd, self._read, self._answered
        timers = self.timers
        coalesce = not self.think
        few = False
        now = t0
        while run.live:
            if now >= next_sample:  # every 0.5 s: the gateway's RSS, and the requests past their time
                report.rss_samples.append((now - t0, summed_mib(pids, "VmRSS")))
                next_sample = now + 0.5
                for c in self.conns:
                    if c.busy is not None and c.state == _READY and now > c.deadline:
                        self._failed(c, "timeout", f"no answer in {REQUEST_TIMEOUT:g} s beyond the request's wait")
                if now > hard_stop:
                    break
            wake = min(next_sample, timers[0][0]) if timers else next_sample
            if few and coalesce and run.live > _COALESCE_OUTSTANDING:
                time.sleep(_COALESCE_WAIT)  # let answers gather: one wake-up for several
                now = time.perf_counter()
            events = poll(max(wake - now, 0))
            few = len(events) < _COALESCE_EVENTS
            for fd, ev in events:
                c = by_fd.get(fd)
                if c is None:
                    continue
                try:
                    if ev & _EPOLLOUT and c.out:
                        self._flush(c)
                    got = read(c)
                    if got is not None:
                        answered(c, got[0], got[1], got[2], time.perf_counter())
                except _Closed as exc:
                    self._failed(c, "connection closed", str(exc))
                except OSError as exc:
                    self._failed(c, "connection closed", repr(exc))
                except WireProtocolError as exc:
                    self._failed(c, "protocol error", str(exc))
            now = time.perf_counter()
            while timers and timers[0][0] <= now:
                c = heapq.heappop(timers)[2]
                if c.state == _READY:
                    self._next(c, now)
        return now

    def close_all(self) -> None:
        for c in self.conns:
            self._close(c)
        self.epoll.close()


_EPOLLIN, _EPOLLOUT = 0x001, 0x004  # select.EPOLLIN, select.EPOLLOUT
#: When a poll finds fewer than `_COALESCE_EVENTS` answers while more than `_COALESCE_OUTSTANDING` requests are in
#: flight, the loop waits `_COALESCE_WAIT` s before the next poll, so that one wake-up (a syscall and a context
#: switch, the largest share of this process's cost per request) serves several answers: ~10 % less CPU per
#: request. The gateway does not wait meanwhile: it still holds more requests than it answers in that time. Not
#: with a think time (the pauses are the load's own).
_COALESCE_EVENTS = 16
_COALESCE_OUTSTANDING = 64
_COALESCE_WAIT = 0.001


def _drive(addresses: dict, pids: list[int], admins: list, routes: dict | None, database_cpu,
           settings: LoadSettings, report: LoadReport, probe: "_Probe", members: list[dict] | None = None) -> None:
    """The load on the gateway processes `pids` (their admin listeners `admins`: with workers: N the supervisor's,
    summing every worker's), each connection to its protocol's listener of `addresses` or, with `routes` (several
    gateways, `members` their listeners), a Kafka one to its partition's leader and the others spread over them;
    `database_cpu`: a function giving PostgreSQL's CPU seconds (None: no database)."""
    hard_stop = time.perf_counter() + settings.seconds + HARD_DEADLINE_MARGIN + CONNECT_TIMEOUT * (
        1 + settings.connections // CONNECT_CONCURRENCY)
    driver = _Driver(addresses, pids, routes, settings, report, probe, members)
    try:
        driver.connect_all(hard_stop)
        probe.ready.wait(PROBE_TIMEOUT * 4)  # its connections answered once
        report.rss_connected = summed_mib(pids, "VmRSS")
        report.metrics_start = _readings(admins)
        database0 = database_cpu() if database_cpu is not None else None
        cpu0, client0 = _cpu_times(pids), time.process_time()
        t0 = time.perf_counter()
        probe.go.set()
        end = driver.load(hard_stop)
        report.elapsed = end - t0 if not driver.run.live else 0.0
        user, system = (after - before for after, before in zip(_cpu_times(pids), cpu0))
        report.gateway_cpu, report.gateway_system_cpu = user + system, system
        report.client_cpu = time.process_time() - client0
        if database_cpu is not None:
            report.database_cpu = database_cpu() - database0
        report.metrics_end = _readings(admins)
        report.rss_end = summed_mib(pids, "VmRSS")
        report.peak_rss = summed_mib(pids, "VmHWM")
        probe.stop.set()
        for c in driver.conns:
            if c.busy is not None and c.state == _READY:  # cut off by the hard deadline
                driver.run.error(c.proto, c.busy, "timeout", "still unanswered at the run's hard deadline")
            if c.connected:
                report.per_connection.append(c.done)
    finally:
        driver.close_all()  # every connection stayed open until the load was over
    report.elapsed = report.elapsed or (settings.seconds + HARD_DEADLINE_MARGIN)
    time.sleep(0.5)  # let the gateway notice the closes and release what they held
    report.rss_closed = summed_mib(pids, "VmRSS")


def _readings(admins: list) -> dict[str, list[float]]:
    """`metric_readings` of every gateway's admin listener, summed (the GC thresholds: the largest)."""
    out: dict[str, list[float]] = {}
    for admin in admins:
        for name, values in metric_readings(admin).items():
            have = out.setdefault(name, [0.0] * len(values))
            for i, value in enumerate(values):
                have[i] = max(have[i], value) if name == "python_gc_threshold" else have[i] + value
    return out


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
