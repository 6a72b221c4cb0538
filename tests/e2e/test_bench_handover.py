"""`logway bench handover`, tiny: the same code as the benchmark with a few connections. What must hold at any
speed is checked — every request answered and timed, each connection to the other worker's partition handed over
once (or, with `worker_handover: false`, both its requests relayed), none of the own partition's — never a timing
figure (BENCHMARKS.md has those)."""

from __future__ import annotations

import pytest

from logway.bench.handover import PROTOCOLS, bench_handover
from logway.cli.main import main

pytestmark = pytest.mark.slow


def test_handover_counts_one_hand_over_per_connection_or_two_relays():
    report = bench_handover(connections=5)
    assert report.handed_over == {"handover": 10, "relay": 0}  # 5 native + 5 TANK connections, once each
    assert report.relayed == {"handover": 0, "relay": 20}  # their two requests each
    for setting in ("handover", "relay"):
        for protocol in PROTOCOLS:
            for where in ("own", "other"):
                for request in (1, 2):
                    values = report.latencies[(setting, protocol, where, request)]
                    assert len(values) == 5 and all(v > 0 for v in values) and values == sorted(values)
    assert "10 connections handed over, 0 requests relayed" in report.format()


def test_the_cli_refuses_an_unknown_protocol_and_prints_the_report(capsys):
    with pytest.raises(SystemExit, match="--protocols takes native, tank"):
        main(["bench", "handover", "--protocols", "kafka"])
    assert main(["bench", "handover", "--connections", "2", "--protocols", "tank"]) == 0
    out = capsys.readouterr().out
    assert "tank   other worker's partition: first request" in out and "native" not in out.split("\n", 1)[1]
