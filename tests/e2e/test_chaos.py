"""The crash-restart checker (`logway.bench.chaos`) against a real gateway killed with SIGKILL 22 times:
producers over the native, TANK and Kafka (idempotent) protocols and a two-member Kafka consumer group, every
check after every restart, then a graceful stop and a clean start. Also: the checker does fail when the log
breaks a promise (it is not vacuous)."""

from __future__ import annotations

import pytest

from logway.bench.chaos import (GROUP, PROTOCOLS, TOPICS, ChaosConfig, ChaosReport, ChaosRun, ChaosViolation,
                                 CycleSummary, Ledger, verify_partition)

CYCLES = 22


@pytest.fixture(scope="module")
def chaos(tmp_path_factory):
    """One checker run shared by the tests below (a run costs ~1 s per cycle on 2 cores)."""
    config = ChaosConfig(cycles=CYCLES, seed=20261121, min_run=0.15, max_run=0.6, pause=0.003,
                         torn_tail_probability=0.5, data_dir=str(tmp_path_factory.mktemp("chaos")), log=None)
    run = ChaosRun(config)
    return run, run.run()


def test_sigkill_cycles_keep_every_promise(chaos):
    run, report = chaos
    report.raise_for_violations()
    assert len(report.cycles) == CYCLES
    assert report.final is not None and not report.final.violations
    # The checks really ran: every protocol acknowledged records, the group consumed and committed, the
    # idempotent producers replayed batches across restarts, and the recovery report was exercised.
    acked = report.acked
    assert all(acked[p] > 100 for p in PROTOCOLS), acked
    assert sum(1 for c in report.cycles if all(c.acked[p] > 0 for p in PROTOCOLS)) >= CYCLES // 3
    assert report.total("commits") > 50 and report.total("consumed") > 100
    assert report.total("replays_deduplicated") + report.total("replays_appended") > 0
    assert all(c.unclean_reported for c in report.cycles)
    injected = [c for c in report.cycles if c.injected]
    assert injected, "the seed should tear some tails"
    for c in injected:
        for key, n in c.injected.items():
            assert (c.offsets_dropped if key == "offsets" else c.truncated_bytes) >= n
    assert all(run.ledger.commits.get((TOPICS[p], i)) for p in PROTOCOLS for i in range(run.config.partitions))
    assert len(run.ledger.producer_ids) > CYCLES  # InitProducerId in every cycle, never the same id twice


def test_verify_partition_finds_each_kind_of_violation():
    ledger = Ledger()
    tp = ("chaos-native", 0)
    ledger.sent.update({b"a", b"b", b"c"})
    ledger.acked[tp] = {0: b"a", 1: b"b", 2: b"c"}
    good = [(0, b"a"), (1, b"b"), (2, b"c")]
    assert verify_partition(ledger, tp, 0, 3, good) == []
    lost = verify_partition(ledger, tp, 0, 2, good[:2])
    assert any("b'c' at offset 2 is missing" in v for v in lost), lost
    moved = verify_partition(ledger, tp, 0, 3, [(0, b"a"), (1, b"c"), (2, b"b")])
    assert any("at offset 2 instead" in v for v in moved), moved
    dup = verify_partition(ledger, tp, 0, 4, good + [(3, b"a")])
    assert any("stored twice" in v for v in dup), dup
    gap = verify_partition(ledger, tp, 0, 4, [(0, b"a"), (1, b"b"), (3, b"c")])
    assert any("not contiguous" in v for v in gap), gap
    foreign = verify_partition(ledger, tp, 0, 4, good + [(3, b"zzz")])
    assert any("no producer sent" in v for v in foreign), foreign
    ledger.observed[tp] = {3: b"d"}
    ledger.sent.add(b"d")
    assert any("a consumer read" in v for v in verify_partition(ledger, tp, 0, 3, good))


def test_the_checker_fails_against_a_real_log_that_breaks_a_promise(chaos):
    run, _ = chaos
    tp = (TOPICS["kafka"], 1)
    with run.ledger.lock:
        end = max(run.ledger.acked.get(tp, {0: b""})) + 1
        run.ledger.acked[tp][end + 5] = b"kafka:phantom"  # acknowledged, but never written
        run.ledger.sent.add(b"kafka:phantom")
        run.ledger.commits[(TOPICS["tank"], 0)] = 10**9  # a commit the store would have had to keep
    gw = run.start_gateway()
    try:
        summary = run.verify(gw, CycleSummary(CYCLES + 1), expect_unclean=False)
    finally:
        gw.stop()
    text = "\n".join(summary.violations)
    assert f"{tp[0]}-{tp[1]}: acknowledged record b'kafka:phantom' at offset {end + 5} is missing" in text, text
    assert f"committed offset of {GROUP}" in text and "below the last acknowledged commit 1000000000" in text
    report = ChaosReport(cycles=[summary])
    with pytest.raises(ChaosViolation, match="phantom"):
        report.raise_for_violations()
