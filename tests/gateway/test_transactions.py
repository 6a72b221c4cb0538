"""The transaction coordinator (logway.gateway.transactions) over a real storage engine in a temp dir: the state
machine, fencing, epoch overflow, timeouts, and recovery of what a crash interrupted (prepared completions,
transactions left open in partitions)."""

from __future__ import annotations

import pytest
import trio

from logway.gateway.cluster.ownership import Ownership, leaders
from logway.gateway.durability import GroupCommitter
from logway.gateway.flush import Flush
from logway.gateway.formats import STORAGE_FORMATS
from logway.gateway.notify import AppendNotifier
from logway.gateway.steps import Steps
from logway.gateway.transactions import (MAX_EPOCH, ConcurrentTransactions, Fenced, InvalidTimeout, InvalidTxnState,
                                         PeerUnavailable, Peers, ProducerIdMismatch, TransactionCoordinator, TxnState,
                                         TxnStatus)
from logway.storage import LogEngine, TopicConfig


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def open_coordinator(path, clock=None, flush=Flush.NONE):
    engine = LogEngine(path, STORAGE_FORMATS, TopicConfig())
    steps = Steps(engine, AppendNotifier(), GroupCommitter(), flush)
    coord = TransactionCoordinator(engine, steps, max_timeout_ms=60_000, check_interval_ms=10,
                                   clock=clock or Clock())
    return engine, steps, coord


def batch(pid, epoch, seq=0):
    from logway.codecs.kafka.records import encode_batch
    from logway.codecs.records import Record

    return encode_batch([Record(b"v")], default_timestamp=1, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, transactional=True)


async def test_state_machine_and_fencing(tmp_path):
    engine, steps, coord = open_coordinator(tmp_path)
    plog = engine.create_topic("t", 2).partitions[0]
    pid, epoch = await coord.init_producer_id("a", 10_000)
    with pytest.raises(InvalidTxnState):
        await coord.end_txn("a", pid, epoch, True)  # nothing begun
    await coord.add_partitions("a", pid, epoch, [("t", 0)])
    coord.check_produce(pid, epoch, "t", 0)
    with pytest.raises(InvalidTxnState):
        coord.check_produce(pid, epoch, "t", 1)  # not added
    steps.append(plog, batch(pid, epoch), producer=(pid, epoch))
    assert plog.last_stable_offset == 0
    pid2, epoch2 = await coord.init_producer_id("a", 10_000)  # a new producer: fences, aborts the open one
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert plog.last_stable_offset == plog.log_end_offset == 2  # the record and its ABORT marker
    assert [t.ranges for t in plog.aborted(0, 2)] == [((0, 0),)]
    for call in (coord.add_partitions("a", pid, epoch, [("t", 0)]), coord.end_txn("a", pid, epoch, True),
                 coord.add_offsets("a", pid, epoch, "g")):
        with pytest.raises(Fenced):
            await call
    with pytest.raises(Fenced):
        coord.check_produce(pid, epoch, "t", 0)
    with pytest.raises(ProducerIdMismatch):
        await coord.add_partitions("a", pid + 1, epoch2, [("t", 0)])
    with pytest.raises(InvalidTimeout):
        await coord.init_producer_id("b", 0)
    with pytest.raises(InvalidTimeout):
        await coord.init_producer_id("b", 60_001)
    engine.close()


async def test_offsets_commit_with_the_transaction_only(tmp_path):
    engine, steps, coord = open_coordinator(tmp_path)
    engine.create_topic("t", 1)
    pid, epoch = await coord.init_producer_id("a", 10_000)
    with pytest.raises(InvalidTxnState):
        await coord.offset_commit("a", pid, epoch, "g", {("t", 0): (5, "")})
    await coord.add_offsets("a", pid, epoch, "g")
    await coord.offset_commit("a", pid, epoch, "g", {("t", 0): (5, "m")})
    assert engine.offsets.fetch("g", "t", 0) is None
    await coord.end_txn("a", pid, epoch, True)
    assert engine.offsets.fetch("g", "t", 0).offset == 5
    await coord.end_txn("a", pid, epoch, True)  # a retry of a completed commit: fine
    with pytest.raises(InvalidTxnState):
        await coord.end_txn("a", pid, epoch, False)  # but not an abort of it
    await coord.add_offsets("a", pid, epoch, "g")
    await coord.offset_commit("a", pid, epoch, "g", {("t", 0): (9, "")})
    await coord.end_txn("a", pid, epoch, False)
    assert engine.offsets.fetch("g", "t", 0).offset == 5
    engine.close()


async def test_timeouts_abort_and_fence(tmp_path):
    clock = Clock()
    engine, steps, coord = open_coordinator(tmp_path, clock)
    plog = engine.create_topic("t", 1).partitions[0]
    pid, epoch = await coord.init_producer_id("a", 1000)
    await coord.add_partitions("a", pid, epoch, [("t", 0)])
    steps.append(plog, batch(pid, epoch), producer=(pid, epoch))
    clock.now += 0.5
    assert await coord.abort_expired() == 0
    clock.now += 1
    assert await coord.abort_expired() == 1
    assert plog.last_stable_offset == plog.log_end_offset
    with pytest.raises(Fenced):
        await coord.end_txn("a", pid, epoch, True)
    assert coord.states["a"].epoch == epoch + 1 and coord.states["a"].status == TxnStatus.COMPLETE_ABORT
    # the background loop does the same on its own
    pid, epoch = await coord.init_producer_id("a", 1000)
    await coord.add_partitions("a", pid, epoch, [("t", 0)])
    clock.now += 2
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coord.run)
        with trio.fail_after(5):
            while coord.states["a"].status != TxnStatus.COMPLETE_ABORT:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    engine.close()



async def test_idle_transactional_ids_are_forgotten_unless_a_transaction_is_open(tmp_path):
    """`expiration_ms` (Kafka's transactional.id.expiration.ms): ids at rest (Empty, Complete*) whose state has not
    changed for that long are forgotten, in memory and in the store; an open transaction's id is kept, however old,
    as is an id changed since; a state saved by a build that did not record its change time counts from the
    start. The background loop does it too."""
    clock = Clock()
    engine = LogEngine(tmp_path, STORAGE_FORMATS, TopicConfig())
    engine.create_topic("t", 1)
    engine.transactions.put("old-build", {"pid": 9999, "epoch": 3, "timeout_ms": 1000, "status": "CompleteCommit"})
    steps = Steps(engine, AppendNotifier(), GroupCommitter(), Flush.NONE)

    def coordinator() -> TransactionCoordinator:
        return TransactionCoordinator(engine, steps, max_timeout_ms=60_000, check_interval_ms=10,
                                      expiration_ms=10_000, clock=clock)

    coord = coordinator()
    empty = await coord.init_producer_id("empty", 1000)
    committed = await coord.init_producer_id("committed", 1000)
    await coord.add_offsets("committed", *committed, "g")
    await coord.end_txn("committed", *committed, True)
    ongoing = await coord.init_producer_id("ongoing", 60_000)
    await coord.add_offsets("ongoing", *ongoing, "g")
    clock.now += 6
    recent = await coord.init_producer_id("recent", 1000)
    assert await coord.forget_idle() == 0
    clock.now += 5  # the first three 11 s old, "recent" 5 s
    assert await coord.forget_idle() == 3
    assert coord.expired == 3  # (the metric logway_expired_total{what="transactional_ids"})
    assert sorted(coord.states) == ["ongoing", "recent"]
    assert sorted(tid for tid, _ in engine.transactions.items()) == ["ongoing", "recent"]
    with pytest.raises(ProducerIdMismatch):
        await coord.end_txn("committed", *committed, True)  # its producer belongs to no id any more
    again = await coord.init_producer_id("empty", 1000)
    assert again[0] not in (empty[0], committed[0], ongoing[0], recent[0]) and again[1] == 0  # afresh
    assert coord.states["ongoing"].status == TxnStatus.ONGOING  # kept however idle
    reopened = coordinator()  # the store replayed: what was forgotten stays forgotten
    assert sorted(reopened.states) == ["empty", "ongoing", "recent"]
    clock.now += 11  # "recent" and the new "empty" idle now too: the loop forgets them
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reopened.run)
        with trio.fail_after(5):
            while sorted(reopened.states) != ["ongoing"]:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    engine.close()


async def test_epoch_overflow_hands_out_a_new_producer_id(tmp_path):
    engine, steps, coord = open_coordinator(tmp_path)
    pid, epoch = await coord.init_producer_id("a", 1000)
    state = coord.states["a"].copy()
    state.epoch = MAX_EPOCH
    await coord._save("a", state)
    new_pid, new_epoch = await coord.init_producer_id("a", 1000)
    assert new_pid != pid and new_epoch == 0
    with pytest.raises(ProducerIdMismatch):
        coord.check_produce(pid, MAX_EPOCH, "t", 0)  # the old id belongs to no transactional id any more
    engine.close()


async def test_concurrent_end_while_completing_is_refused(tmp_path):
    engine, steps, coord = open_coordinator(tmp_path)
    engine.create_topic("t", 1)
    pid, epoch = await coord.init_producer_id("a", 10_000)
    await coord.add_partitions("a", pid, epoch, [("t", 0)])
    state = coord.states["a"].copy()
    state.status = TxnStatus.PREPARE_COMMIT
    await coord._save("a", state)
    with pytest.raises(ConcurrentTransactions):
        await coord.add_partitions("a", pid, epoch, [("t", 0)])
    await coord.end_txn("a", pid, epoch, True)  # finishes the prepared commit
    assert coord.states["a"].status == TxnStatus.COMPLETE_COMMIT
    engine.close()


def test_recovery_completes_prepared_commits_and_ends_orphans(tmp_path):
    engine = LogEngine(tmp_path, STORAGE_FORMATS, TopicConfig())
    t = engine.create_topic("t", 3)
    p0, p1, p2 = t.partitions
    # "a": crashed after PrepareCommit was durable, before any marker
    p0.append(batch(10, 0), producer=(10, 0))
    engine.transactions.put("a", TxnState(10, 0, 10_000, TxnStatus.PREPARE_COMMIT, {("t", 0)}, set(),
                                          {"g": {("t", 0): (7, "")}}).to_json())
    # "b": completed its commit, but the END entry in p1 was lost (a power cut): committed again
    p1.append(batch(11, 2), producer=(11, 2))
    engine.transactions.put("b", TxnState(11, 2, 10_000, TxnStatus.COMPLETE_COMMIT).to_json())
    # producer 12: no coordinator state at all (a damaged store set aside): aborted
    p2.append(batch(12, 0), producer=(12, 0))
    # "c": still Ongoing, with p2 in it: kept open for its producer (or its timeout)
    p2.append(batch(13, 1), producer=(13, 1))
    engine.transactions.put("c", TxnState(13, 1, 10_000, TxnStatus.ONGOING, {("t", 2)}).to_json())
    engine.close(clean=False)

    engine, steps, coord = open_coordinator(tmp_path)
    assert coord.recover() == {"completed": 1, "orphans": 2}
    p0, p1, p2 = engine.topic("t").partitions
    assert coord.states["a"].status == TxnStatus.COMPLETE_COMMIT
    assert engine.offsets.fetch("g", "t", 0).offset == 7
    assert p0.last_stable_offset == p0.log_end_offset == 2 and p0.aborted(0, 2) == []
    assert p1.last_stable_offset == p1.log_end_offset and p1.aborted(0, 9) == []
    assert [txn.producer_id for txn in p2.aborted(0, 9)] == [12]
    assert p2.txns.open_transactions() == {13: (1, 1)} and p2.last_stable_offset == 1
    assert coord.recover() == {"completed": 0, "orphans": 0}  # idempotent
    engine.close()


def test_recovery_ends_an_older_epochs_transaction_though_the_id_has_one_ongoing(tmp_path):
    """An open transaction left in a partition with an older epoch than the id's Ongoing one is not that
    transaction (a bump aborts what was open before it): recovery aborts it rather than keeping it for the
    producer, which would hold the partition's LSO back until the Ongoing transaction ends."""
    engine = LogEngine(tmp_path, STORAGE_FORMATS, TopicConfig())
    plog = engine.create_topic("t", 1).partitions[0]
    plog.append(batch(20, 4), producer=(20, 4))  # 0: left open by epoch 4
    engine.transactions.put("d", TxnState(20, 5, 10_000, TxnStatus.ONGOING, {("t", 0)}).to_json())
    engine.close(clean=False)

    engine, steps, coord = open_coordinator(tmp_path)
    assert coord.recover() == {"completed": 0, "orphans": 1}
    plog = engine.partition("t", 0)
    assert plog.txns.open_transactions() == {}
    assert plog.stable_bounds() == (2, 2) and [t.producer_id for t in plog.aborted(0, 2)] == [20]
    assert coord.states["d"].status == TxnStatus.ONGOING  # the Ongoing transaction itself is untouched
    engine.close()


async def test_committed_reads_in_another_format_go_past_slices_that_hold_only_markers(tmp_path):
    from logway.codecs.kafka.records import encode_batch
    from logway.codecs.records import Record
    from logway.gateway.formats import NATIVE, TANK

    engine, steps, coord = open_coordinator(tmp_path)
    plog = engine.create_topic("t", 1).partitions[0]
    for commit in (False, True):  # offsets 0 + ABORT marker 1, then 2 + COMMIT marker 3
        pid, epoch = await coord.init_producer_id("a", 10_000)
        await coord.add_partitions("a", pid, epoch, [("t", 0)])
        steps.append(plog, batch(pid, epoch), producer=(pid, epoch))
        await coord.end_txn("a", pid, epoch, commit)
    steps.append(plog, encode_batch([Record(b"after")], default_timestamp=1))  # offset 4
    assert plog.txns.has_aborted and plog.last_stable_offset == 5
    sharing = Steps(engine, AppendNotifier(), GroupCommitter(), Flush.NONE, transcode_cache_bytes=1 << 20)
    for reader in (steps, sharing):
        for as_ in (NATIVE, TANK):
            for asked, first in ((0, 2), (1, 2), (3, 4)):
                for _ in range(2):  # (the second time a shared transcode, for `sharing`)
                    read = await reader.read(plog, asked, 1, as_)  # one batch per slice: a marker alone at 1, 3
                    assert (read.count, read.first) == (1, first), (as_, asked)
    assert sharing.transcoded.hits > 0
    engine.close()


# -- workers: N — two coordinators over one directory, worker 0 coordinating, their `Peers` calling each other in
# process (the relay-socket transport is tests/e2e/test_workers.py's) -------------------------------------------

class Pair:
    """Two workers' engines and coordinators over one directory; `down` makes worker `i` not answer."""

    def __init__(self, path) -> None:
        from logway.storage.engine import Share

        data = str(path / "data")
        self.supervisor = LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2)))
        self.engines = [LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2), i, self.supervisor.clean_start))
                        for i in range(2)]
        self.steps = [Steps(e, AppendNotifier(), GroupCommitter(), Flush.NONE) for e in self.engines]
        self.coords = [TransactionCoordinator(e, s, max_timeout_ms=60_000, check_interval_ms=10, clock=Clock())
                       for e, s in zip(self.engines, self.steps)]
        self.down: set[int] = set()
        self.queries = 0
        self.before_answer = None  # an awaitable to run between the coordinator's answer and its arrival
        for i, coord in enumerate(self.coords):
            coord.peers = Peers(i, Ownership(0, 2).leader, self._end, self._query, lambda i=i: i == 0)
        self.owner = Ownership(0, 2).leader

    async def _end(self, worker, producer_id, epoch, committed, partitions):
        if worker in self.down:
            raise PeerUnavailable(f"worker {worker} is down")
        await self.coords[worker].end_here(producer_id, epoch, committed, partitions)

    async def _query(self, producer_id, epoch, topic, partition):
        if 0 in self.down:
            raise PeerUnavailable("worker 0 is down")
        self.queries += 1
        answer = self.coords[0].query(producer_id, epoch, topic, partition)
        if self.before_answer is not None:
            step, self.before_answer = self.before_answer, None
            await step()
        return answer

    def partitions(self, worker: int) -> list[int]:
        return [p for p in range(4) if self.owner("t", p) == worker]

    def close(self) -> None:
        for engine in (*self.engines, self.supervisor):
            engine.close()


@pytest.fixture
def pair(tmp_path):
    pair = Pair(tmp_path)
    pair.engines[0].create_topic("t", 4)
    pair.engines[1].refresh()
    yield pair
    pair.close()


async def test_across_workers_a_transaction_ends_in_every_owners_partitions_and_the_next_one_works(pair):
    c0, c1 = pair.coords
    theirs = pair.partitions(1)
    pid, epoch = await c0.init_producer_id("a", 10_000)
    for committed in (True, False, True):  # Kafka producers keep their id and epoch from one transaction to the next
        await c0.add_partitions("a", pid, epoch, [("t", p) for p in range(4)])
        with pytest.raises(InvalidTxnState):
            c1.check_produce(pid, epoch, "t", theirs[0])  # not heard of yet
        await c1.learn(pid, epoch, "t", theirs[0])
        c1.check_produce(pid, epoch, "t", theirs[0])
        starts = {}
        for p in range(4):
            owner = pair.owner("t", p)
            if owner == 1:
                await c1.learn(pid, epoch, "t", p)
            pair.coords[owner].check_produce(pid, epoch, "t", p)
            plog = pair.engines[owner].partition("t", p)
            starts[p] = plog.log_end_offset
            pair.steps[owner].append(plog, batch(pid, epoch), producer=(pid, epoch))
        await c0.end_txn("a", pid, epoch, committed)
        for p in range(4):
            plog = pair.engines[pair.owner("t", p)].partition("t", p)
            assert plog.last_stable_offset == plog.log_end_offset == starts[p] + 2  # ended everywhere: a marker
            assert bool(plog.aborted(starts[p], plog.log_end_offset)) is not committed
        assert c1._remote == {}
        with pytest.raises(InvalidTxnState):  # ended: a late batch is refused
            c1.check_produce(pid, epoch, "t", theirs[0])
    assert pair.queries == 3 * len(theirs)  # once per transaction and partition: a second learn asks nothing


async def test_an_owner_asks_again_when_an_end_overtook_the_coordinators_answer(pair):
    c0, c1 = pair.coords
    p = pair.partitions(1)[0]
    pid, epoch = await c0.init_producer_id("a", 10_000)
    await c0.add_partitions("a", pid, epoch, [("t", p)])

    async def abort_meanwhile():  # the transaction times out while the "ongoing" answer is on its way
        await c0.end_txn("a", pid, epoch, False)

    pair.before_answer = abort_meanwhile
    await c1.learn(pid, epoch, "t", p)
    assert pair.queries == 2  # the first answer was not taken
    with pytest.raises(InvalidTxnState):
        c1.check_produce(pid, epoch, "t", p)  # no hanging transaction: the late batch is refused


async def test_a_completion_an_owner_does_not_answer_stays_prepared_and_is_finished_later(pair):
    c0, c1 = pair.coords
    pid, epoch = await c0.init_producer_id("a", 10_000)
    await c0.add_partitions("a", pid, epoch, [("t", p) for p in range(4)])
    await c0.add_offsets("a", pid, epoch, "g")
    await c0.offset_commit("a", pid, epoch, "g", {("t", 0): (5, "")})
    for p in range(4):
        owner = pair.owner("t", p)
        await pair.coords[owner].learn(pid, epoch, "t", p)
        pair.steps[owner].append(pair.engines[owner].partition("t", p), batch(pid, epoch), producer=(pid, epoch))
    pair.down.add(1)
    with pytest.raises(PeerUnavailable):  # (CONCURRENT_TRANSACTIONS to the client: it retries)
        await c0.end_txn("a", pid, epoch, True)
    assert c0.states["a"].status == TxnStatus.PREPARE_COMMIT
    assert all(pair.engines[0].partition("t", p).last_stable_offset == 0 for p in pair.partitions(0))
    assert pair.engines[0].offsets.fetch("g", "t", 0) is None  # nothing committed before every owner ended it
    pair.down.clear()
    await c0.settle()  # (what `run` does on its next tick)
    assert c0.states["a"].status == TxnStatus.COMPLETE_COMMIT
    for p in range(4):
        plog = pair.engines[pair.owner("t", p)].partition("t", p)
        assert plog.last_stable_offset == plog.log_end_offset == 2 and not plog.aborted(0, 2)
    assert pair.engines[0].offsets.fetch("g", "t", 0) is not None


def test_an_owners_start_leaves_open_transactions_to_the_coordinator(pair, tmp_path):
    """Worker 1's recovery ends nothing of a transaction it finds open (its own store knows none); `settle` asks
    worker 0 and ends or keeps each."""
    c0, c1 = pair.coords

    async def begin():
        ids = []
        for tid in ("done", "open"):
            pid, epoch = await c0.init_producer_id(tid, 10_000)
            await c0.add_partitions(tid, pid, epoch, [("t", p) for p in pair.partitions(1)])
            for p in pair.partitions(1):
                await c1.learn(pid, epoch, "t", p)
                pair.steps[1].append(pair.engines[1].partition("t", p), batch(pid, epoch), producer=(pid, epoch))
            ids.append((tid, pid, epoch))
        pair.down.add(1)  # worker 1 "dies" before the commit reaches it: the commit waits
        with pytest.raises(PeerUnavailable):
            await c0.end_txn("done", ids[0][1], ids[0][2], True)
        pair.down.clear()
        await c0.settle()  # ... and is completed through worker 1: only "open" stays open there
        return ids

    ids = trio.run(begin)
    # worker 1 starts again over the same partitions (a new coordinator over its engine, knowing no transaction)
    p1 = pair.partitions(1)[0]
    reopened = TransactionCoordinator(pair.engines[1], pair.steps[1], max_timeout_ms=60_000, check_interval_ms=10)
    reopened.peers = Peers(1, Ownership(0, 2).leader, pair._end, pair._query, lambda: False)
    assert reopened.recover() == {"completed": 0, "orphans": 0}
    plog = pair.engines[1].partition("t", p1)
    assert plog.txns.open_transactions()  # left open: the coordinator decides
    trio.run(reopened.settle)
    (_, pid, epoch) = ids[1]
    reopened.check_produce(pid, epoch, "t", p1)  # "open" is still open, and known to be
