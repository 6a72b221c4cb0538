"""The crash-restart checker (`logway.bench.chaos`) against a real gateway killed with SIGKILL 12 times:
producers over the native, TANK and Kafka (idempotent) protocols, two transactional Kafka producers, and a
two-member Kafka consumer group, every check after every restart, then a graceful stop and a clean start. Also:
the checker does fail when the log breaks a promise (it is not vacuous), the pure check of the transactional
topic (`verify_transactions`) on hand-built logs, and a shorter run against a `workers: 2` gateway."""

from __future__ import annotations

import pytest

from logway.bench.chaos import (ABORTED, COMMITTED, COMMITTING, GROUP, OPEN, PROTOCOLS, TOPICS, TXN_TOPIC,
                                 ChaosConfig, ChaosReport, ChaosRun, ChaosViolation, CycleSummary, Ledger,
                                 Transaction, TxnLedger, TxnPartitionRead, verify_partition, verify_transactions)
from logway.gateway.cluster.ownership import partition_leader

CYCLES = 12


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
    # Transactions: committed and aborted ones, some with group offsets, some in doubt at the kills (resolved
    # one way or the other), producers coming back every way, an open transaction holding the LSO after a restart.
    # The floors say the paths ran, not how fast: about a quarter of what a 2-core machine with both cores taken by
    # other work gave (41 committed in 11 of 12 cycles, 21 aborted, 8-11 with offsets, 690 records; idle: 72, 30,
    # 16, 1,058), since the runs are short and their volume follows the machine's speed.
    assert report.total("txn_committed") >= CYCLES and report.total("txn_aborted") >= CYCLES // 2, report.figures()
    assert sum(c.txn_committed > 0 for c in report.cycles) >= CYCLES // 2, report.figures()
    assert report.total("txn_offsets") >= 3 and report.total("txn_acked") >= 200, report.figures()
    assert report.total("txn_in_doubt") >= CYCLES // 2
    assert report.total("txn_doubt_committed") + report.total("txn_doubt_aborted") == report.total("txn_in_doubt")
    assert {"reinit", "resume", "timeout"} <= set(report._settle_totals()), report._settle_totals()
    assert sum(c.txn_lso_held > 0 for c in report.cycles) > 0
    assert report.cycles[-1].txn_visible > 100
    assert len(run.ledger.txn_ids) == run.config.txn_producers  # one stable producer id per transactional id


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
    with run.txn_ledger.lock:  # a committed transaction whose record never reached the log
        ghost = Transaction("chaos-txn-producer-0", 10**6, -1, 0, partitions=[1], added=True,
                            batches=[(1, [b"txn:phantom"])], state=COMMITTED)
        run.txn_ledger.txns.append(ghost)
        run.txn_ledger.origin[b"txn:phantom"] = (ghost, 1)
    gw = run.start_gateway()
    try:
        summary = run.verify(gw, CycleSummary(CYCLES + 1), expect_unclean=False)
    finally:
        gw.stop()
    text = "\n".join(summary.violations)
    assert f"{tp[0]}-{tp[1]}: acknowledged record b'kafka:phantom' at offset {end + 5} is missing" in text, text
    assert f"committed offset of {GROUP}" in text and "below the last acknowledged commit 1000000000" in text
    assert (f"{TXN_TOPIC}-1: acknowledged record b'txn:phantom' of transaction chaos-txn-producer-0#1000000 "
            f"(committed) is missing from the log") in text, text
    report = ChaosReport(cycles=[summary])
    with pytest.raises(ChaosViolation, match="phantom"):
        report.raise_for_violations()


# -------------------------------------------------------------------------- verify_transactions, by hand
VIEWS = ("native", "kafka", "tank")
A, B = 7, 8  # producer ids


def txn_ledger(*txns: Transaction) -> TxnLedger:
    ledger = TxnLedger()
    for t in txns:
        ledger.txns.append(t)
        for p, x in t.written():
            ledger.origin[x] = (t, p)
    return ledger


def scenario():
    """Two producers, two partitions: A#1 committed (with offsets), B#1 aborted, A#2 committing at the kill (with
    offsets), B#2 open at the kill with a produce in flight."""
    return txn_ledger(
        Transaction("A", 1, A, 0, partitions=[0, 1], added=True, batches=[(0, [b"a1", b"a2"]), (1, [b"a3"])],
                    group="gA", state=COMMITTED),
        Transaction("B", 1, B, 0, partitions=[0], added=True, batches=[(0, [b"b1"])], state=ABORTED),
        Transaction("A", 2, A, 0, partitions=[0, 1], added=True, batches=[(0, [b"c1"]), (1, [b"c2"])], group="gA",
                    state=COMMITTING),
        Transaction("B", 2, B, 0, partitions=[0, 1], added=True, batches=[(0, [b"d1"])], in_flight=(1, [b"d2"]),
                    state=OPEN))


def reads(*, a2_committed: bool, settled: bool = True, views=None):
    """The log after the restart: A#2 completed (committed or aborted); B#2 aborted by a re-init (settled) or
    still open (not settled, the LSO held at its first record)."""
    p0 = [(0, b"a1"), (1, b"a2"), (2, b"b1"), (5, b"c1"), (6, b"d1")]
    m0 = [(3, A, True), (4, B, False), (7, A, a2_committed)] + ([(8, B, False)] if settled else [])
    p1 = [(0, b"a3"), (2, b"c2"), (3, b"d2")]
    m1 = [(1, A, True), (4, A, a2_committed)] + ([(5, B, False)] if settled else [])
    visible0 = [(0, b"a1"), (1, b"a2")] + ([(5, b"c1")] if a2_committed else [])
    visible1 = [(0, b"a3")] + ([(2, b"c2")] if a2_committed else [])
    views = views or {}
    return {0: TxnPartitionRead(9 if settled else 8, 9 if settled else 6, p0, m0,
                                {v: list(views.get((0, v), visible0)) for v in VIEWS}),
            1: TxnPartitionRead(6 if settled else 5, 6 if settled else 3, p1, m1,
                                {v: list(views.get((1, v), visible1)) for v in VIEWS})}


def offsets(value_0: int, value_1: int | None = None):
    return {"gA": {0: value_0, 1: value_0 if value_1 is None else value_1}}


def check(ledger, got_reads, got_offsets, *, settled=True):
    return verify_transactions(ledger, got_reads, got_offsets, settled=settled)


def test_verify_transactions_accepts_both_outcomes_of_a_commit_in_flight():
    assert check(scenario(), reads(a2_committed=True), offsets(2)) == ([], {("A", 2): True, ("B", 2): False})
    assert check(scenario(), reads(a2_committed=False), offsets(1)) == ([], {("A", 2): False, ("B", 2): False})
    # Before the producers came back: B#2 still open holds the LSO at its first record in each partition.
    assert check(scenario(), reads(a2_committed=True, settled=False), offsets(2), settled=False) == (
        [], {("A", 2): True})
    # A#2 aborted (its records lie below the LSO, none visible), B#2 still open.
    got = check(scenario(), reads(a2_committed=False, settled=False), offsets(1), settled=False)
    assert got == ([], {("A", 2): False})


def violations(ledger, got_reads, got_offsets, *, settled=True) -> str:
    found, _ = check(ledger, got_reads, got_offsets, settled=settled)
    assert found, "expected a violation"
    return "\n".join(found)


def test_verify_transactions_finds_each_kind_of_violation():
    # A record of an aborted transaction returned by one reader.
    leak = {(0, "kafka"): [(0, b"a1"), (1, b"a2"), (2, b"b1"), (5, b"c1")]}
    text = violations(scenario(), reads(a2_committed=True, views=leak), offsets(2))
    assert "read_committed (kafka): returned b'b1' at offset 2, a record of the aborted transaction B#1" in text
    # A commit in flight visible in one partition only (its marker in the other says ABORT).
    text = violations(scenario(), reads(a2_committed=True, views={(1, v): [(0, b"a3")] for v in VIEWS}), offsets(2))
    assert "transaction A#2, committing at the kill, is partly visible" in text, text
    # ... or to one reader only.
    text = violations(scenario(), reads(a2_committed=True, views={(0, "tank"): [(0, b"a1"), (1, b"a2")],
                                                                  (1, "tank"): [(0, b"a3")]}), offsets(2))
    assert "visible to some read_committed readers and not to others" in text, text
    # A control batch returned as a record.
    text = violations(scenario(), reads(a2_committed=True, views={
        (0, "native"): [(0, b"a1"), (1, b"a2"), (3, b"\x00\x00\x00\x00"), (5, b"c1")]}), offsets(2))
    assert "read_committed (native): returned the control batch at offset 3" in text
    # A committed record not returned.
    text = violations(scenario(), reads(a2_committed=True, views={(0, "kafka"): [(0, b"a1"), (5, b"c1")]}),
                      offsets(2))
    assert "read_committed (kafka): 1 record(s) of committed transactions below the last stable offset 9 are not " \
           "returned, first b'a2' at offset 1 (transaction A#1)" in text, text
    # A record of a transaction that never asked to commit.
    text = violations(scenario(), reads(a2_committed=True, views={
        (0, "native"): [(0, b"a1"), (1, b"a2"), (5, b"c1"), (6, b"d1")]}), offsets(2))
    assert "a record of transaction B#2, in doubt at the kill (open: it never asked to commit)" in text
    # An acknowledged record lost from the log; an in-flight produce partly there.
    bad = reads(a2_committed=True)
    bad[0].data.remove((1, b"a2"))
    for v in VIEWS:
        bad[0].views[v].remove((1, b"a2"))
    text = violations(scenario(), bad, offsets(2))
    assert f"{TXN_TOPIC}-0: acknowledged record b'a2' of transaction A#1 (committed) is missing from the log" in text
    ledger = scenario()
    ledger.txns[3].in_flight = (1, [b"d2", b"d3"])
    ledger.origin[b"d3"] = (ledger.txns[3], 1)
    assert "a produce of transaction B#2 in flight at the kill is partly in the log" in violations(
        ledger, reads(a2_committed=True), offsets(2))
    # The LSO: below the HW once every transaction ended; held back by an ended transaction.
    bad = reads(a2_committed=True)
    bad[0].last_stable_offset = 6
    assert f"{TXN_TOPIC}-0: the last stable offset is 6, not the high watermark 9" in violations(
        scenario(), bad, offsets(2))
    bad = reads(a2_committed=True, settled=False)
    bad[0].last_stable_offset = 2
    for v in VIEWS:
        bad[0].views[v] = [(0, b"a1"), (1, b"a2")]
    assert "no transaction in doubt begins there" in violations(scenario(), bad, offsets(2), settled=False)
    # A marker that contradicts the outcome.
    bad = reads(a2_committed=True)
    bad[1].markers[1] = (4, A, False)
    assert "transaction A#2 is committed, but the marker after its data (offset 4) says ABORT" in violations(
        scenario(), bad, offsets(2))
    # Offsets: of a transaction that aborted; committed records without their offsets; offsets in part.
    text = violations(scenario(), reads(a2_committed=False), offsets(2))
    assert "group gA: the offsets of transaction A#2 were committed, but its records were not" in text
    text = violations(scenario(), reads(a2_committed=True), offsets(1))
    assert "group gA: transaction A#2 committed its records but not its offsets" in text
    text = violations(scenario(), reads(a2_committed=True), offsets(2, 1))
    assert "a transaction's offsets were committed in part" in text
    ledger = scenario()
    ledger.txns[1].group = "gB"  # B#1 committed offsets of gB in its transaction, then aborted
    text = violations(ledger, reads(a2_committed=True), {**offsets(2), "gB": {0: 1, 1: 1}})
    assert "group gB: the committed offset is 1, from transaction B#1 (aborted)" in text, text
    # A payload no producer sent.
    bad = reads(a2_committed=True)
    bad[1].data.append((5, b"zzz"))
    bad[1].markers.pop()
    assert "which no transactional producer sent" in violations(scenario(), bad, offsets(2))


def test_sigkill_cycles_of_a_workers_gateway_keep_every_promise(tmp_path):
    """The same checker against `workers: 2` (two brokers, each the only writer of its partitions): every kill takes
    each worker and then the supervisor down, so no process shuts down on its own; the Kafka clients send each
    partition's requests to its leader and group and transaction requests to worker 0, native and TANK ones go
    through the shared ports (handed over or relayed to the owner). Every promise holds across the kills."""
    cycles = 6
    config = ChaosConfig(cycles=cycles, seed=20261124, min_run=0.15, max_run=0.6, pause=0.003,
                         torn_tail_probability=0.5, workers=2, data_dir=str(tmp_path), log=None)
    run = ChaosRun(config)
    report = run.run()
    report.raise_for_violations()
    assert len(report.cycles) == cycles and report.final is not None and not report.final.violations
    assert all(report.acked[p] > 50 for p in PROTOCOLS), report.acked
    owners = {partition_leader(*tp, 2) for tp, acked in run.ledger.acked.items() if acked}
    assert owners == {0, 1}  # both workers' partitions took acknowledged records
    assert report.total("commits") > 0 and report.total("consumed") > 0
    assert report.total("txn_committed") > 0 and report.total("txn_in_doubt") > 0, report.figures()
    assert all(c.unclean_reported for c in report.cycles)
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "run").glob("gateway-*.stderr"))
    assert "the supervisor went away" not in logs  # no worker outlived its supervisor to shut down cleanly


def test_supervisor_kills_of_a_workers_gateway_keep_every_promise(tmp_path):
    """`kill: supervisor`: each cycle SIGKILLs the supervisor alone, so both workers see their control socket close
    and shut down on their own under the load (none may outlive it by `join_timeout`); what they refuse on the way
    down is in doubt, as a cut request. Every promise holds after each (unclean: no marker) restart."""
    cycles = 5
    config = ChaosConfig(cycles=cycles, seed=20261125, min_run=0.15, max_run=0.6, pause=0.003,
                         torn_tail_probability=0.5, workers=2, kill="supervisor", data_dir=str(tmp_path), log=None)
    run = ChaosRun(config)
    report = run.run()
    report.raise_for_violations()
    assert len(report.cycles) == cycles and report.final is not None and not report.final.violations
    assert all(report.acked[p] > 50 for p in PROTOCOLS), report.acked
    assert report.total("commits") > 0 and report.total("txn_committed") > 0, report.figures()
    assert all(c.unclean_reported for c in report.cycles)
    assert "the supervisor alone killed" in report.figures()[0]
    for incarnation in range(1, cycles + 1):  # every killed gateway's workers went by themselves
        log = (tmp_path / "run" / f"gateway-{incarnation}.stderr").read_text(errors="replace")
        assert all(f"worker {i}: the supervisor went away: shutting down" in log for i in range(2)), log[-2000:]


def test_supervisor_kills_need_workers():
    with pytest.raises(ValueError, match="needs workers > 1"):
        ChaosRun(ChaosConfig(kill="supervisor", log=None))
    with pytest.raises(ValueError, match="kill must be one of all, supervisor"):
        ChaosRun(ChaosConfig(kill="power", workers=2, log=None))
