"""`logway bench kafka-failover`, tiny: two cluster gateways with a short lease, a slow producer, one kill -9. What
must hold at any speed is checked — the survivor leads every partition again, acknowledgements resume on the dead
gateway's partitions, nothing lost or duplicated (the benchmark raises otherwise) — never a timing figure
(BENCHMARKS.md has those)."""

from __future__ import annotations

import pytest

from logway.bench.failover import bench_failover

pytestmark = pytest.mark.slow
pytest.importorskip("confluent_kafka")


def test_failover_measures_leaders_and_acknowledgements_again(pg_database):
    r = bench_failover(partitions=4, rate=2000, lease_ms=1000, warmup=1.0, after=0.5, timeout=30,
                       settings=("storage.backend=postgres", f"storage.postgres.dsn={pg_database}"))
    assert r["led"] and len(r["led"]) < 4  # the dead gateway led some of the partitions, not all
    assert 0 < r["leaders"] < 30 and 0 < r["first_ack"] <= r["all_acked"] < 30
    assert r["records"] > r["before"] > 0  # acknowledged before the kill, and after it
