"""`logway bench accept`, tiny: the same code as the benchmark with a few dozen connections per case. What must hold
at any speed is checked — every connection answered (the first answer parsed, the others the same bytes), every
p2c Consume answered with its one message and no wake-up missed, the gateway's cost counted — never a timing figure
(BENCHMARKS.md has those)."""

from __future__ import annotations

import pytest

from logway.bench.accept import CASES, bench_accept
from logway.cli.main import main

pytestmark = pytest.mark.slow


def test_every_case_answers_every_connection():
    report = bench_accept(list(CASES), connections=25, warmup=3, message_bytes=11, flush="none")
    assert [r.name for r in report.results] == list(CASES)
    for result in report.results:
        assert len(result.latencies_us) == 25 and result.latencies_us == sorted(result.latencies_us), result.name
        assert result.latencies_us[0] > 0 and result.cpu_us_per_connection > 0, result.name
        assert result.calls_per_connection is None and result.missed == 0, result.name
    assert "tank-p2c" in report.format() and "gateway CPU" in report.format()


def test_the_floor_servers_answer_the_same_client():
    report = bench_accept(["native-ping"], connections=20, warmup=2, message_bytes=11, flush="none", floor=True)
    assert [r.name for r in report.results] == ["native-ping", "floor (epoll): native-ping",
                                                "floor (trio): native-ping"]
    for result in report.results:
        assert len(result.latencies_us) == 20 and result.cpu_us_per_connection > 0, result.name
    assert "server CPU" in report.format()


def test_counting_calls_reports_them_per_connection():
    report = bench_accept(["native-ping", "tank-status"], connections=20, warmup=2, message_bytes=11, flush="none",
                          count_calls=True)
    for result in report.results:  # (at least the read, the handling and the answer of one request each)
        assert result.calls_per_connection is not None and result.calls_per_connection > 50, result.name
    assert "gateway calls" in report.format()


def test_the_cli_prints_the_report_and_refuses_an_unknown_case(capsys):
    assert main(["bench", "accept", "--connections", "10", "--warmup", "1", "--cases", "kafka-apiversions-v3"]) == 0
    assert "kafka-apiversions-v3  p50" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown case"):
        main(["bench", "accept", "--cases", "kafka-apiversions-v9"])
