"""`logway bench tank-tail`, tiny: the same code as the benchmark with a few dozen samples — one worker, and two
workers with both connections at the worker that does not own the partition, handed over to the owner or (with
`worker_handover: false`) relayed; two gateways over one PostgreSQL, the consumer's long-poll relayed from the
gateway that does not lead the partition. What must hold at any speed is checked — every sample answered with its one
message, nothing missed, the hand-overs and relays counted — never a timing figure (BENCHMARKS.md has those)."""

from __future__ import annotations

import pytest

from logway.bench.tank import bench_tail
from logway.cli.main import main

pytestmark = pytest.mark.slow


def test_tail_over_one_gateway_answers_every_sample():
    report = bench_tail(samples=30, warmup=5, message_bytes=11, gap_ms=1.0, flush="none")
    assert len(report.latencies) == 30 and report.missed == 0
    assert all(ms > 0 for ms in report.latencies) and report.latencies == sorted(report.latencies)
    assert report.handed_over is None and "workers" not in report.format()
    assert report.rss_after > 0


@pytest.mark.parametrize("handover", [True, False], ids=["handover", "relay"])
def test_tail_over_two_workers_hands_both_connections_over_or_relays_every_request(handover):
    report = bench_tail(samples=30, warmup=5, message_bytes=11, gap_ms=1.0, flush="none", workers=2,
                        settings=() if handover else ("worker_handover=false",))
    assert len(report.latencies) == 30 and report.missed == 0
    if handover:  # the producer's and the consumer's: every request then served at the owner
        assert (report.handed_over, report.relayed) == (2, 0), report.format()
    else:  # each sample's produce and consume, relayed
        assert report.handed_over == 0 and report.relayed >= 2 * 35, report.format()
    assert "both connections to a worker that does not own the partition" in report.format()


def test_tail_over_two_gateways_on_postgres_relays_the_consumers_long_poll_to_the_leader(pg_database):
    report = bench_tail(samples=30, warmup=5, message_bytes=11, gap_ms=1.0, flush="none", backend="postgres",
                        gateways=2, dsn=pg_database)
    assert len(report.latencies) == 30 and report.missed == 0
    assert "2 gateways in cluster mode" in report.format() and "(the 2 gateways)" in report.format()


def test_the_cli_prints_the_report(capsys):
    assert main(["bench", "tank-tail", "--samples", "10", "--warmup", "2", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "produce→consume latency: p50" in out and "connections handed over to the partition's owner: 2" in out
