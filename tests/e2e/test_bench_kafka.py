"""`logway bench kafka-throughput` and `kafka-tail`, tiny: the same code as the benchmarks with a few thousand
records and a few dozen latency samples, through librdkafka (and kafka-python for the tail). What must hold at any
speed is checked — every record produced and consumed back, no error, positive latencies, nothing missed — never a
timing figure (those are printed by the benchmarks; figures in BENCHMARKS.md)."""

from __future__ import annotations

import pytest

from logway.bench import kafka
from logway.cli.main import main

pytestmark = pytest.mark.slow
pytest.importorskip("confluent_kafka")


def _sane_phase(phase: dict, records: int) -> None:
    assert phase["records"] > 0 and phase["seconds"] > 0 and phase["rate"] > 0 and phase["mbps"] > 0
    assert phase["gateway_cpu"] >= 0 and phase["client_cpu"] >= 0
    assert phase["rss"] > 0 and phase["peak_rss"] >= phase["rss"]


def test_throughput_produces_and_consumes_every_record():
    r = kafka.bench_throughput(records=5000, record_bytes=100, timeout=60)
    _sane_phase(r["produce"], 5000)
    _sane_phase(r["consume"], 5000)
    assert r["produce"]["records"] == 5000 and r["produce"]["high_watermark"] == 5000
    assert r["consume"]["records_total"] == 5000 and r["consume"]["records"] <= 5000
    assert r["produce"]["counters"].get("Produce", 0) >= 1  # the gateway's metrics were read
    assert r["producer"]["acks"] == "1" and r["consumer"]["fetch.queue.backoff.ms"] == 10


def test_throughput_with_producer_processes_and_partitions():
    r = kafka.bench_throughput(records=4001, record_bytes=50, partitions=2, producers=2, timeout=60)
    assert r["produce"]["high_watermark"] == 4001 and r["consume"]["records_total"] == 4001
    assert r["produce"]["client_cpu"] > 0  # the producer processes' CPU, reported back


def test_throughput_command_prints_both_phases_and_the_target(capsys):
    assert main(["bench", "kafka-throughput", "--records", "3000", "--consume-batch", "700",
                 "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert "fetch.queue.backoff.ms=10" in out and "storage.backend=local" in out
    assert "targets (local: produce ≥ 1,000,000, consume ≥ 1,000,000 records/s)" in out
    lines = out.splitlines()
    for phase in ("produce", "consume"):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"  {phase} "))
        assert "records/s" in lines[at] and "MB/s" in lines[at]
        assert "gateway CPU" in lines[at + 1] and "RSS" in lines[at + 1] and "client CPU" in lines[at + 2]


def test_throughput_on_both_backends_and_two_gateways_side_by_side(capsys, pg_server):
    """Local files, postgres with one gateway and with two in cluster mode, each leading one of the 2 partitions.
    (pg_server: only to skip, or fail under REQUIRE_POSTGRES, where PostgreSQL is missing — the benchmark starts a
    throwaway server of its own.)"""
    assert main(["bench", "kafka-throughput", "--backend", "both", "--gateways", "1,2", "--partitions", "2",
                 "--records", "2000", "--consume-batch", "500", "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())  # (headers are wrapped)
    assert "storage.backend=local, flush=none" in text
    assert "storage.backend=postgres (acknowledged once committed), librdkafka" in text
    assert ("storage.backend=postgres (acknowledged once committed), 2 gateways (storage.postgres.cluster; "
            "partitions led: member 0 1, member 1 1)") in text
    lines = out.splitlines()
    produces = [i for i, line in enumerate(lines) if line.startswith("  produce ")]
    assert len(produces) == 3
    assert not lines[produces[0] + 2].strip().startswith("PostgreSQL CPU")  # (local files: no database)
    assert lines[produces[1] + 2].strip().startswith("PostgreSQL CPU")
    assert "gateway CPU (summed over 2 gateways)" in lines[produces[2] + 1]
    assert "postgres: produce ≥ 500,000, consume ≥ 1,000,000 records/s, one gateway" in text
    assert "postgres, 2 gateways vs 1 (records/s, best run): produce " in text


def test_throughput_refuses_more_gateways_than_partitions():
    with pytest.raises(SystemExit, match="--gateways 2 needs --partitions 2 or more"):
        main(["bench", "kafka-throughput", "--backend", "postgres", "--gateways", "1,2"])
    with pytest.raises(SystemExit, match="several gateways need the postgres backend"):
        main(["bench", "kafka-throughput", "--gateways", "2", "--partitions", "2"])


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_tail_latencies_are_positive_and_nothing_is_missed(client):
    if client == "kafka-python":
        pytest.importorskip("kafka")
    r = kafka.bench_tail(samples=50, warmup=5, client=client, fetch_wait_ms=500, timeout=5.0)
    lat = r["latencies_ms"]
    assert len(lat) == 50 and lat == sorted(lat) and lat[0] > 0
    assert r["missed"] == 0 and r["stale"] == 0
    assert r["counters"].get("Produce", 0) >= 50 and r["counters"].get("Fetch", 0) >= 50


def test_tail_command_prints_percentiles(capsys):
    assert main(["bench", "kafka-tail", "--samples", "30", "--warmup", "3", "--gap-ms", "0"]) == 0
    out = capsys.readouterr().out
    assert "p50" in out and "p99" in out and "missed (not received within 5 s): 0" in out


def test_profile_summary_counts_self_and_inclusive_time(tmp_path):
    raw = tmp_path / "p.txt"
    raw.write_text("main (a/b/cli.py:1);serve (g/pump.py:10);send (trio/_socket.py:5) 3\n"
                   "main (a/b/cli.py:1);serve (g/pump.py:12) 1\n")
    text = kafka.profile_summary(str(raw), top=3)
    assert "4 samples" in text
    assert "75.0%  send (trio/_socket.py)" in text and "100.0%  serve (g/pump.py)" in text
