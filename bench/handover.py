"""`logway bench handover`: what handing a connection over costs and buys (`workers: N`, docs/scaling.md).

A gateway with `workers: 2` is started (`GatewayProcess`, a subprocess, fresh temporary data directory, 127.0.0.1
only, `storage.flush: none`), twice: with hand-overs (the default) and with `worker_handover: false` (every request
for the other worker's partition relayed). On each, for every protocol of `--protocols` (native, TANK), `--connections`
new connections one after the other to worker 0's own listener, each making two produce requests of one small
record and closing: first to a partition of worker 0 (its own), then as many to a partition of worker 1 (the
other's: the first request hands the connection over, or is relayed, and so is the second's). Each request's
latency is timed on the client; the report gives the p50 and p90 of the first and of the second request, and the
connections handed over and requests relayed the workers counted (their supervisor's metrics).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass, field

from .registry import Benchmark

__all__ = ["BENCHMARKS", "HandOverReport", "bench_handover"]

PROTOCOLS = ("native", "tank")


@dataclass
class HandOverReport:
    """Latencies (µs, sorted) by (setting, protocol, partition's worker "own" | "other", request 1 | 2), and the
    workers' counts by setting."""

    connections: int
    latencies: dict = field(default_factory=dict)
    handed_over: dict = field(default_factory=dict)
    relayed: dict = field(default_factory=dict)

    def pct(self, key: tuple, q: float) -> float:
        values = self.latencies[key]
        return values[min(len(values) - 1, int(q * len(values)))]

    def format(self) -> str:
        lines = [f"handover (workers: 2, flush: none): {self.connections} new connections per row to worker 0's own "
                 f"listener, two produce requests each; latency p50 / p90 in µs"]
        for setting in ("handover", "relay"):
            lines.append(f"  {'hand-overs' if setting == 'handover' else 'worker_handover: false'}: "
                         f"{self.handed_over[setting]:.0f} connections handed over, {self.relayed[setting]:,.0f} "
                         f"requests relayed")
            for protocol in PROTOCOLS:
                for where in ("own", "other"):
                    first, second = (setting, protocol, where, 1), (setting, protocol, where, 2)
                    if first in self.latencies:
                        lines.append(f"    {protocol:6} {where:5} worker's partition: first request "
                                     f"{self.pct(first, 0.5):.0f} / {self.pct(first, 0.9):.0f}, second "
                                     f"{self.pct(second, 0.5):.0f} / {self.pct(second, 0.9):.0f}")
        return "\n".join(lines)


def _produce(protocol: str, address, topic: str, partition: int) -> tuple[float, float]:
    """One new connection's two produce requests: their latencies in µs."""
    if protocol == "native":
        from logway.clients.native import NativeClient as Client
    else:
        from logway.clients.tank import TankClient as Client
    times = []
    with Client(*address, timeout=30) as client:
        for value in (b"first", b"second"):
            t0 = time.perf_counter()
            client.produce(topic, partition, [value])
            times.append((time.perf_counter() - t0) * 1e6)
    return times[0], times[1]


def bench_handover(connections: int = 300, protocols: tuple[str, ...] = PROTOCOLS) -> HandOverReport:
    from logway.clients.native import NativeClient
    from logway.gateway.cluster.ownership import partition_leader

    from .launcher import GatewayProcess
    from .requests import metric_readings

    report = HandOverReport(connections)
    for setting, extra in (("handover", ()), ("relay", ("worker_handover=false",))):
        with tempfile.TemporaryDirectory(prefix="logway-bench-") as tmp:
            gw = GatewayProcess(os.path.join(tmp, "data"), "workers=2", "storage.flush=none", "log_level=WARNING",
                                "listeners.tank.enabled=true", *extra)
            try:
                for protocol in protocols:
                    topic = f"handover-{protocol}"
                    with NativeClient(*gw.addresses["native.0"]) as admin:
                        admin.create_topic(topic, 4)
                    owners = [partition_leader(topic, p, 2) for p in range(4)]
                    for where, partition in (("own", owners.index(0)), ("other", owners.index(1))):
                        runs = [_produce(protocol, gw.addresses[f"{protocol}.0"], topic, partition)
                                for _ in range(connections)]
                        for i in (1, 2):
                            report.latencies[(setting, protocol, where, i)] = sorted(r[i - 1] for r in runs)
                readings = metric_readings(gw.addresses["admin"])
                report.handed_over[setting] = readings.get("handed_over_out", [0.0])[0]
                report.relayed[setting] = readings.get("relayed_requests", [0.0])[0]
            finally:
                gw.stop()
    return report


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connections", type=int, default=300, help="new connections per protocol and partition")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="comma-separated: native, tank")


def run(args: argparse.Namespace) -> int:
    protocols = tuple(p for p in args.protocols.split(",") if p)
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown or not protocols:
        raise SystemExit(f"logway bench handover: --protocols takes {', '.join(PROTOCOLS)}")
    print(bench_handover(args.connections, protocols).format())
    return 0


BENCHMARKS = [Benchmark("handover", "the first and second request of new native and TANK connections through a worker "
                                    "that does not own the partition: handed over vs relayed (workers: 2)",
                        arguments, run)]
