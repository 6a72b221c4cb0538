"""The transaction coordinator: transactional ids, their producer ids and epochs, and the life of each transaction
(Kafka's `TransactionCoordinator`), protocol-neutral — Kafka's API handlers call it, and so could any protocol.

A transactional id's state (`TxnState`) is kept durably in the storage engine's `TransactionStore`; every change
is written (and fdatasynced) before the request that caused it is answered — but for Complete* after Prepare*,
which a crash may lose (the completion is then run again at start) unless the transaction committed offsets:

    (none) --init--> Empty --add partitions / offsets--> Ongoing --end(commit)--> PrepareCommit --> CompleteCommit
                                                            |     --end(abort) --> PrepareAbort  --> CompleteAbort
                                                            +---- timeout, or init by a newer producer (fencing):
                                                                  the epoch is bumped, then PrepareAbort ...

Completing a transaction (`_complete`, run in a worker thread): in every partition of the transaction the
partition's open transaction is ended — with a marker batch where the storage format has one (a Kafka control
batch in `kafka` topics; `tank` topics record the end in the partition's transaction index only) — the partitions
are synced (under `flush: always`), the transaction's consumer offsets are committed (commit only), and the state
becomes Complete*. Each step is idempotent, so a completion interrupted by a crash is simply run again at start
(`recover`), which also ends every transaction a partition still has open that its coordinator state does not
(a store set aside after damage, a completion whose END entries a power cut took): committed when the state says
that very transaction committed, else aborted. An Ongoing transaction found at start stays open — its producer
may still commit it — until its timeout aborts it.

With `workers: N` (`peers` set) worker 0 is every transactional id's coordinator and each partition is written by
its owner. Completing a transaction first asks each other owner of its partitions to end it there (`Peers.end`:
a request over the workers' native relay sockets; idempotent), then does the local part as above; an owner that
does not answer leaves the state Prepare* — EndTxn fails with a retriable error, and `run` tries again. An
owner accepts a transactional batch of a producer it has not heard of once the coordinator says that transaction
is open with that partition added (`Peers.query`, remembered in `_remote` until the transaction's end), and at its
start asks the coordinator about every transaction its partitions hold open instead of deciding alone (`settle`).
The coordinator's start completes Prepare* states that involve other workers once they answer (`settle`).

Fencing: `init_producer_id` for an id whose producer is known bumps the epoch (a new producer id once the epoch
would overflow) and aborts the transaction it had open; requests with an older epoch then fail with `Fenced`.
Epoch bumps for timeouts also fence the late producer, as Kafka does.

Expiry (Kafka's transactional.id.expiration.ms): an id whose state has not changed for `expiration_ms` and that has
no transaction open or completing (Empty, Complete*) is forgotten — in memory and in the store — by `run` (looked
at every `EXPIRATION_CHECK_MS` at most): clients that make up a transactional id per task (the Spark writer) would
otherwise add one for good each time. The next InitProducerId for a forgotten id starts it afresh (a new producer
id, epoch 0). A state written before the change time was kept counts from the gateway's start.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable

import trio

from logway.storage import LogEngine, PartitionLog, StorageError, UnknownPartition, UnknownTopic

if TYPE_CHECKING:  # pragma: no cover
    from .steps import Steps

log = logging.getLogger("logway.gateway.transactions")

__all__ = ["TxnStatus", "TxnState", "TransactionCoordinator", "TxnError", "Fenced", "InvalidTxnState",
           "ConcurrentTransactions", "ProducerIdMismatch", "InvalidTimeout", "PeerUnavailable", "Peers", "MAX_EPOCH"]

#: Epochs are int16; at this one a new producer id is handed out instead of a bump (Kafka's rule).
MAX_EPOCH = 32767 - 1
#: Idle transactional ids are looked for at least this often, and as often as the expiration when it is shorter.
EXPIRATION_CHECK_MS = 600_000


class TxnError(Exception):
    """A transactional request that cannot be served in the id's current state."""


class Fenced(TxnError):
    """A newer producer (a higher epoch) owns the transactional id."""


class InvalidTxnState(TxnError):
    """The request does not fit the transaction's state (e.g. EndTxn with nothing begun, offsets of a group that
    was not added)."""


class ConcurrentTransactions(TxnError):
    """The previous transaction is still being completed: retry."""


class ProducerIdMismatch(TxnError):
    """The producer id is not the one the transactional id has (or the id is unknown)."""


class InvalidTimeout(TxnError):
    """A transaction timeout outside 1..transaction_max_timeout_ms."""


class PeerUnavailable(ConcurrentTransactions):
    """(workers: N) Another worker, the owner of a partition or the coordinator, did not answer: retry."""


class TxnStatus(StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


_PREPARED = (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT)
#: Nothing open or completing: an id in one of these may be forgotten once idle.
_AT_REST = (TxnStatus.EMPTY, TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT)


@dataclass(slots=True)
class TxnState:
    """One transactional id's durable state. `offsets`: group -> {(topic, partition): (offset, metadata)}, what
    the transaction commits for consumer groups when it commits."""

    producer_id: int
    epoch: int
    timeout_ms: int
    status: TxnStatus = TxnStatus.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    offsets: dict[str, dict[tuple[str, int], tuple[int, str]]] = field(default_factory=dict)
    started_ms: int = -1
    updated_ms: int = -1  # when it was last saved (-1: saved by a build that did not say)

    def to_json(self) -> dict:
        return {"pid": self.producer_id, "epoch": self.epoch, "timeout_ms": self.timeout_ms,
                "status": str(self.status), "partitions": sorted(self.partitions), "groups": sorted(self.groups),
                "offsets": {g: [[t, p, o, m] for (t, p), (o, m) in sorted(entries.items())]
                            for g, entries in self.offsets.items()},
                "started_ms": self.started_ms, "updated_ms": self.updated_ms}

    @classmethod
    def from_json(cls, d: dict) -> "TxnState":
        return cls(producer_id=int(d["pid"]), epoch=int(d["epoch"]), timeout_ms=int(d["timeout_ms"]),
                   status=TxnStatus(d["status"]), partitions={(t, int(p)) for t, p in d.get("partitions", ())},
                   groups=set(d.get("groups", ())),
                   offsets={g: {(t, int(p)): (int(o), m) for t, p, o, m in entries}
                            for g, entries in d.get("offsets", {}).items()},
                   started_ms=int(d.get("started_ms", -1)), updated_ms=int(d.get("updated_ms", -1)))

    def copy(self) -> "TxnState":
        """A copy to change: the coordinator's map holds only what is durable, so a change becomes visible to
        other requests (e.g. a bumped epoch that fences) once it is saved."""
        return TxnState(self.producer_id, self.epoch, self.timeout_ms, self.status, set(self.partitions),
                        set(self.groups), {g: dict(e) for g, e in self.offsets.items()}, self.started_ms,
                        self.updated_ms)

    def clear(self) -> None:
        self.partitions, self.groups, self.offsets, self.started_ms = set(), set(), {}, -1


@dataclass(slots=True)
class Peers:
    """The other members of a cluster: this member's `index`, `owner(topic, partition)` (a member's index),
    `is_coordinator()` (whether this member coordinates now: worker 0, or a cluster's holder of slot 0), and two
    requests to another member, each raising `PeerUnavailable` when it did not answer: `end(worker, producer_id,
    epoch, committed, partitions)` (it ends the transaction in its partitions) and `query(producer_id, epoch, topic,
    partition)` (the coordinator's `query` answer). `cluster/txn_peers.py` makes them."""

    index: int
    owner: Callable[[str, int], int]
    end: Callable[[int, int, int, bool, list], Awaitable[None]]
    query: Callable[[int, int, str, int], Awaitable[str]]
    is_coordinator: Callable[[], bool]

    @property
    def coordinating(self) -> bool:
        return self.is_coordinator()


#: Seconds between a worker's tries to reach the others for `settle` (at start, while they start too).
SETTLE_RETRY = 1.0


class TransactionCoordinator:
    """Every transactional id's state, in memory and in the engine's `TransactionStore`. One operation per id at
    a time (a trio lock each); storage work runs in worker threads."""

    def __init__(self, engine: LogEngine, steps: "Steps", *, max_timeout_ms: int, check_interval_ms: int,
                 expiration_ms: int = 604_800_000, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.steps = steps
        self.store = engine.transactions
        self.max_timeout_ms = max_timeout_ms
        self.check_interval_ms = check_interval_ms
        self.expiration_ms = expiration_ms
        self.expired = 0  # transactional ids forgotten so far (a metric)
        self.clock = clock
        self.states: dict[str, TxnState] = {}
        self._by_pid: dict[int, str] = {}
        self._locks: dict[str, trio.Lock] = {}
        #: (workers: N) Set before `recover`: the other workers (see `Peers`).
        self.peers: Peers | None = None
        #: (an owner, workers: N) producer id -> (epoch, partitions of this worker) of transactions the coordinator
        #: said are open; and per producer id with a question to the coordinator in flight, a count of the ends
        #: that came meanwhile for each (`_query`).
        self._remote: dict[int, tuple[int, set[tuple[str, int]]]] = {}
        self._watch: dict[int, list[list[int]]] = {}
        #: Transactional ids whose completion waits for another worker, and (an owner) transactions found open at
        #: start: both settled by `settle` once the others answer.
        self._unfinished: set[str] = set()
        self._found_open: list[tuple[PartitionLog, int, int]] = []
        self._next_expiry = self._now_ms() + min(expiration_ms, EXPIRATION_CHECK_MS)
        self._load_states()

    def _load_states(self) -> None:
        now = self._now_ms()
        for tid, raw in self.store.items():
            try:
                state = TxnState.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("transactional id %r: unreadable state %r (%s): forgotten", tid, raw, exc)
                continue
            if state.updated_ms < 0:
                state.updated_ms = now
            self.states[tid] = state
            self._by_pid[state.producer_id] = tid

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def take_over(self) -> None:
        """(A cluster's member that became the coordinator) every transactional id's state as the previous
        coordinator left it in the store (`storage` read it again); Prepare* ones are completed by `run`."""
        self.states, self._by_pid = {}, {}
        self._load_states()
        self._unfinished |= {tid for tid, state in self.states.items() if state.status in _PREPARED}
        if self.states:
            log.info("transactions: coordinating %d transactional id(s) from now on (%d to complete)",
                     len(self.states), len(self._unfinished))

    def _lock(self, tid: str) -> trio.Lock:
        lock = self._locks.get(tid)
        if lock is None:
            lock = self._locks[tid] = trio.Lock()
        return lock

    # -- recovery (at start, before any listener) -----------------------------------------------------------
    def recover(self) -> dict[str, int]:
        """Finish what a stop interrupted (blocking: run in a thread before serving). Returns counts of
        transactions completed, and of orphans ended, for the start-up log line."""
        completed = 0
        for tid, state in list(self.states.items()):
            if state.status in _PREPARED:
                if self._remote_partitions(state):  # the other owners first: once they answer (`settle`)
                    self._unfinished.add(tid)
                    continue
                self._complete(tid, state, state.status == TxnStatus.PREPARE_COMMIT, wait_sync=True)
                completed += 1
        orphans = 0
        for topic in self.engine.topics():
            for plog in topic.partitions:
                for pid, (epoch, _first) in plog.txns.open_transactions().items():
                    if self.peers is not None and not self.peers.coordinating:
                        self._found_open.append((plog, pid, epoch))  # the coordinator decides (`settle`)
                        continue
                    tid = self._by_pid.get(pid)
                    state = self.states.get(tid) if tid is not None else None
                    key = (plog.topic, plog.partition)
                    if (state is not None and state.status == TxnStatus.ONGOING and key in state.partitions
                            and state.epoch == epoch):
                        continue  # still open: its producer may commit it, or its timeout aborts it
                    if tid in self._unfinished and state.epoch == epoch:
                        continue  # completed by `settle`, once the other workers answer
                    committed = (state is not None and state.status == TxnStatus.COMPLETE_COMMIT
                                 and state.epoch == epoch)
                    self._end_in(plog, pid, epoch, committed)
                    plog.sync()
                    orphans += 1
                    log.warning("%s-%d: ended the transaction of producer %d left open (%s)", plog.topic,
                                plog.partition, pid, "committed" if committed else "aborted")
        return {"completed": completed, "orphans": orphans}

    # -- the APIs -------------------------------------------------------------------------------------------
    async def init_producer_id(self, tid: str, timeout_ms: int,
                               current: tuple[int, int] | None = None) -> tuple[int, int]:
        """The producer id and epoch for `tid`'s (new) producer; fences the previous one (see the module doc).

        `current` (KIP-360): the (producer id, epoch) the producer has, when it asks for its epoch to be bumped
        after an error instead of starting afresh. That id and epoch bump it (aborting its open transaction); the
        epoch just before (a bump whose answer was lost, retried) answers the current one unchanged; anything
        else was fenced by a newer producer: `Fenced`."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidTimeout(f"transaction timeout {timeout_ms} ms is not in 1..{self.max_timeout_ms}")
        async with self._lock(tid):
            state = self.states.get(tid)
            if state is not None:
                state = state.copy()
            else:  # (a producer id given for an id we do not know: a fresh start, as Kafka)
                pid = await self.steps.in_thread(self.engine.producer_ids.next_id)
                state = TxnState(pid, 0, timeout_ms)
                await self._save(tid, state)
                return pid, 0
            if current is not None:
                pid, epoch = current
                if pid != state.producer_id or epoch not in (state.epoch, state.epoch - 1):
                    raise Fenced(f"producer {pid} epoch {epoch} of {tid!r} was fenced by producer "
                                 f"{state.producer_id} epoch {state.epoch}")
                if epoch == state.epoch - 1 and state.status not in _PREPARED:
                    return state.producer_id, state.epoch  # a retried bump: done already
            bumped = state.status == TxnStatus.ONGOING
            if bumped:  # a zombie's transaction (or, KIP-360, the producer's own failed one): fence it, abort it
                self._bump(state)
                state.status = TxnStatus.PREPARE_ABORT
                await self._save(tid, state)
                log.info("transactional id %r: a new producer fenced the old one; its open transaction is aborted",
                         tid)
            if state.status in _PREPARED:  # finish what is in flight (with the epoch it was begun with)
                await self._complete_async(tid, state, state.status == TxnStatus.PREPARE_COMMIT)
            if not bumped:
                self._bump(state)
            state.timeout_ms = timeout_ms
            state.status = TxnStatus.EMPTY
            state.clear()
            await self._save(tid, state)
            return state.producer_id, state.epoch

    async def add_partitions(self, tid: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]):
        """Add partitions to the transaction (beginning it when none is open)."""
        async with self._lock(tid):
            state = self._check(tid, producer_id, epoch)
            new = set(partitions) - state.partitions
            if state.status == TxnStatus.ONGOING and not new:
                return
            self._begin(state)
            state.partitions |= new
            await self._save(tid, state)

    async def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> None:
        """The transaction will commit offsets of `group` (TxnOffsetCommit follows)."""
        async with self._lock(tid):
            state = self._check(tid, producer_id, epoch)
            if state.status == TxnStatus.ONGOING and group in state.groups:
                return
            self._begin(state)
            state.groups.add(group)
            await self._save(tid, state)

    async def offset_commit(self, tid: str, producer_id: int, epoch: int, group: str,
                            offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Offsets the transaction commits for `group` when (and only if) it commits."""
        async with self._lock(tid):
            state = self._check(tid, producer_id, epoch)
            if state.status != TxnStatus.ONGOING or group not in state.groups:
                raise InvalidTxnState(f"group {group!r} was not added to the transaction of {tid!r}")
            state.offsets.setdefault(group, {}).update(offsets)
            await self._save(tid, state)

    async def end_txn(self, tid: str, producer_id: int, epoch: int, committed: bool) -> None:
        """Commit or abort the open transaction; a retry of an end already done succeeds again."""
        async with self._lock(tid):
            state = self._check(tid, producer_id, epoch, prepared_ok=True)
            status = state.status
            want = TxnStatus.PREPARE_COMMIT if committed else TxnStatus.PREPARE_ABORT
            done = TxnStatus.COMPLETE_COMMIT if committed else TxnStatus.COMPLETE_ABORT
            if status == done:
                return  # a retried EndTxn whose first attempt completed
            if status == want:  # a completion that failed part-way (e.g. disk full): finish it now
                await self._complete_async(tid, state, committed)
                return
            if status != TxnStatus.ONGOING:
                raise InvalidTxnState(f"cannot {'commit' if committed else 'abort'} the transaction of {tid!r}: "
                                      f"it is {status}")
            state.status = want
            await self._save(tid, state)
            await self._complete_async(tid, state, committed)

    def pending_offsets(self, group: str) -> frozenset[tuple[str, int]]:
        """The (topic, partition)s of `group` whose offsets a transaction committed but has not completed yet (open
        or being completed): what Kafka calls an unstable offset commit."""
        return frozenset(key for state in self.states.values()
                         if state.status == TxnStatus.ONGOING or state.status in _PREPARED
                         for key in state.offsets.get(group, ()))

    def check_produce(self, producer_id: int, epoch: int, topic: str, partition: int) -> None:
        """May a transactional batch of this producer go to this partition now? Raises TxnError if not."""
        tid = self._by_pid.get(producer_id)
        if tid is None and self.peers is not None and not self.peers.coordinating:
            known = self._remote.get(producer_id)
            if known is None or known[0] != epoch or (topic, partition) not in known[1]:
                raise InvalidTxnState(f"partition {topic}-{partition} is not in an open transaction of producer "
                                      f"{producer_id} (epoch {epoch}) at the coordinator")
            return
        if tid is None:
            raise ProducerIdMismatch(f"producer id {producer_id} belongs to no transactional id")
        state = self._owned(tid, producer_id, epoch)
        if state.status != TxnStatus.ONGOING or (topic, partition) not in state.partitions:
            raise InvalidTxnState(f"partition {topic}-{partition} is not in an open transaction of {tid!r}")

    # -- workers: N -----------------------------------------------------------------------------------------
    async def learn(self, producer_id: int, epoch: int, topic: str, partition: int) -> None:
        """(an owner) Before `check_produce` of a transactional batch: ask the coordinator about a transaction
        not heard of yet (one round trip per transaction and partition); `check_produce` then refuses what is not
        known open. Raises `PeerUnavailable` when the coordinator did not answer."""
        peers = self.peers
        if peers is None or peers.coordinating or producer_id in self._by_pid:
            return
        known = self._remote.get(producer_id)
        if known is not None and known[0] == epoch and (topic, partition) in known[1]:
            return
        if await self._query(producer_id, epoch, topic, partition) == "ongoing":
            self._remember(producer_id, epoch, topic, partition)

    async def _query(self, producer_id: int, epoch: int, topic: str, partition: int) -> str:
        """The coordinator's answer about the transaction, asked again when an end of this producer's transaction
        came meanwhile (the answer may predate it; Kafka producers keep their id and epoch from one transaction
        to the next, so the end cannot be told apart by them). Raises `PeerUnavailable`."""
        for _ in range(3):
            cell = [0]
            watching = self._watch.setdefault(producer_id, [])
            watching.append(cell)
            try:
                state = await self.peers.query(producer_id, epoch, topic, partition)
            finally:
                watching.remove(cell)
                if not watching:
                    self._watch.pop(producer_id, None)
            if not cell[0]:
                return state
        raise PeerUnavailable(f"ends of producer {producer_id}'s transactions kept overtaking the coordinator's "
                              f"answers")

    def _remember(self, producer_id: int, epoch: int, topic: str, partition: int) -> None:
        known = self._remote.get(producer_id)
        if known is None or known[0] < epoch:
            self._remote[producer_id] = (epoch, {(topic, partition)})
        elif known[0] == epoch:
            known[1].add((topic, partition))

    def query(self, producer_id: int, epoch: int, topic: str, partition: int) -> str:
        """(the coordinator) The answer to an owner's `Peers.query`: "ongoing" (open, with that partition added),
        "completing" (the owner will be asked to end it), "committed" or "aborted"."""
        tid = self._by_pid.get(producer_id)
        state = self.states.get(tid) if tid is not None else None
        if state is None or state.epoch != epoch:
            return "aborted"  # unknown, or its producer was fenced or timed out since: never committed
        if state.status == TxnStatus.ONGOING:
            return "ongoing" if (topic, partition) in state.partitions else "aborted"
        if state.status in _PREPARED:
            return "completing"
        return "committed" if state.status == TxnStatus.COMPLETE_COMMIT else "aborted"

    async def end_here(self, producer_id: int, epoch: int, committed: bool,
                       partitions: Iterable[tuple[str, int]]) -> None:
        """(an owner) The coordinator's `Peers.end`: end the transaction in these partitions of this worker."""
        for cell in self._watch.get(producer_id, ()):
            cell[0] += 1
        known = self._remote.get(producer_id)
        if known is not None and known[0] <= epoch:
            del self._remote[producer_id]
        plogs = []
        for topic, partition in partitions:
            try:
                plogs.append(self.engine.partition(topic, partition))
            except (UnknownTopic, UnknownPartition):
                continue  # deleted since
        touched = await self.steps.in_thread(self._end_all, plogs, producer_id, epoch, committed)
        for plog in touched:
            self.steps.ended(plog)

    def _end_all(self, plogs: list, producer_id: int, epoch: int, committed: bool) -> list:
        touched = [plog for plog in plogs if self._end_in(plog, producer_id, epoch, committed)]
        if self.steps.sync_acks:
            for plog in touched:
                plog.sync()
        return touched

    def _remote_partitions(self, state: TxnState) -> dict[int, list[tuple[str, int]]]:
        """The transaction's partitions other workers own, by owner (none without `peers`)."""
        peers = self.peers
        out: dict[int, list[tuple[str, int]]] = {}
        if peers is None:
            return out
        for topic, partition in sorted(state.partitions):
            owner = peers.owner(topic, partition)
            if owner != peers.index:
                out.setdefault(owner, []).append((topic, partition))
        return out

    async def settle(self) -> None:
        """(workers: N, once every worker is up) What the start left to the others: the coordinator completes the
        Prepare* states that involve other workers; an owner asks about each transaction its partitions held open
        and ends it, remembers it as open, or leaves it to the coordinator's TxnEnd. Retries until all answered."""
        while self._unfinished or self._found_open:
            await self._complete_unfinished()
            left = []
            for plog, pid, epoch in self._found_open:
                try:
                    state = await self._query(pid, epoch, plog.topic, plog.partition)
                except PeerUnavailable:
                    left.append((plog, pid, epoch))  # again later
                    continue
                if state in ("committed", "aborted"):
                    await self.end_here(pid, epoch, state == "committed", [(plog.topic, plog.partition)])
                    log.warning("%s-%d: ended the transaction of producer %d left open (%s)", plog.topic,
                                plog.partition, pid, state)
                elif state == "ongoing":
                    self._remember(pid, epoch, plog.topic, plog.partition)
            self._found_open = left
            if self._unfinished or self._found_open:
                await trio.sleep(SETTLE_RETRY)

    async def _complete_unfinished(self) -> None:
        """One try at each completion that waits for another worker."""
        for tid in sorted(self._unfinished):
            async with self._lock(tid):
                state = self.states.get(tid)
                if state is None or state.status not in _PREPARED:
                    self._unfinished.discard(tid)
                    continue
                try:
                    await self._complete_async(tid, state.copy(), state.status == TxnStatus.PREPARE_COMMIT)
                except PeerUnavailable as exc:
                    log.info("transactional id %r: completion waits for another worker: %s", tid, exc)

    # -- timeouts -------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Abort transactions open longer than their timeout (checked every `check_interval_ms`); (workers: N)
        retry completions another worker did not answer; forget idle transactional ids."""
        while True:
            await trio.sleep(self.check_interval_ms / 1000)
            await self.abort_expired()
            if self._unfinished:
                await self._complete_unfinished()
            if self._now_ms() >= self._next_expiry:
                self._next_expiry = self._now_ms() + min(self.expiration_ms, EXPIRATION_CHECK_MS)
                await self.forget_idle()

    async def forget_idle(self) -> int:
        """Forget the transactional ids idle for `expiration_ms` with nothing open or completing (see the module
        docstring); how many."""
        before = self._now_ms() - self.expiration_ms
        idle = [tid for tid, s in self.states.items() if s.status in _AT_REST and s.updated_ms < before]
        forgotten = 0
        for tid in idle:
            lock = self._lock(tid)
            async with lock:
                state = self.states.get(tid)
                if state is None or state.status not in _AT_REST or state.updated_ms >= before:
                    continue
                try:  # (not synced: an id a crash brings back is forgotten again)
                    await self.steps.in_thread(partial(self.store.put, tid, None, sync=False))
                except StorageError as exc:
                    log.warning("forgetting idle transactional ids: %s; trying again later", exc)
                    break
                del self.states[tid]
                if self._by_pid.get(state.producer_id) == tid:
                    del self._by_pid[state.producer_id]
                forgotten += 1
                self.expired += 1
            if not lock.locked():  # (a request that waited for it holds it now: it stays for the next)
                self._locks.pop(tid, None)
        if forgotten:
            log.info("forgot %d transactional id(s) idle for %d ms", forgotten, self.expiration_ms)
        return forgotten

    async def abort_expired(self) -> int:
        now = self._now_ms()
        expired = [tid for tid, s in self.states.items()
                   if s.status == TxnStatus.ONGOING and now - s.started_ms > s.timeout_ms]
        for tid in expired:
            async with self._lock(tid):
                state = self.states.get(tid)
                if state is None or state.status != TxnStatus.ONGOING or now - state.started_ms <= state.timeout_ms:
                    continue
                state = state.copy()
                self._bump(state)  # the late producer is fenced (Kafka bumps the epoch on timeouts too)
                state.status = TxnStatus.PREPARE_ABORT
                await self._save(tid, state)
                try:
                    await self._complete_async(tid, state, False)
                except PeerUnavailable as exc:
                    log.warning("transactional id %r: timed out; its abort waits for another worker: %s", tid, exc)
                    continue
                log.info("transactional id %r: transaction timed out after %d ms: aborted", tid, state.timeout_ms)
        return len(expired)

    # -- helpers --------------------------------------------------------------------------------------------
    def _check(self, tid: str, producer_id: int, epoch: int, *, prepared_ok: bool = False) -> TxnState:
        """A copy of `tid`'s state after checking the producer's id and epoch (and that no completion is under
        way, unless `prepared_ok`: EndTxn finishes a completion that failed part-way)."""
        state = self._owned(tid, producer_id, epoch)
        if state.status in _PREPARED and not prepared_ok:
            raise ConcurrentTransactions(f"the previous transaction of {tid!r} is still completing")
        return state.copy()

    def _owned(self, tid: str, producer_id: int, epoch: int) -> TxnState:
        """`tid`'s state (not a copy), when this producer id and epoch are its current producer's."""
        state = self.states.get(tid)
        if state is None or state.producer_id != producer_id:
            raise ProducerIdMismatch(f"producer id {producer_id} does not belong to transactional id {tid!r}")
        if epoch < state.epoch:
            raise Fenced(f"producer epoch {epoch} of {tid!r} was fenced by epoch {state.epoch}")
        if epoch > state.epoch:
            raise ProducerIdMismatch(f"producer epoch {epoch} of {tid!r} is ahead of the coordinator's {state.epoch}")
        return state

    def _begin(self, state: TxnState) -> None:
        if state.status != TxnStatus.ONGOING:
            state.clear()
            state.status = TxnStatus.ONGOING
            state.started_ms = self._now_ms()

    def _bump(self, state: TxnState) -> None:
        if state.epoch >= MAX_EPOCH:  # a new producer id (never a wrapped epoch)
            state.producer_id = self.engine.producer_ids.next_id()
            state.epoch = 0
        else:
            state.epoch += 1

    async def _save(self, tid: str, state: TxnState) -> None:
        state.updated_ms = self._now_ms()
        await self.steps.in_thread(self.store.put, tid, state.to_json())
        old = self.states.get(tid)
        if old is not None and old.producer_id != state.producer_id:
            self._by_pid.pop(old.producer_id, None)
        self.states[tid] = state
        self._by_pid[state.producer_id] = tid

    async def _complete_async(self, tid: str, state: TxnState, committed: bool) -> None:
        """Complete the transaction: in other workers' partitions first (raises `PeerUnavailable` when one did not
        answer: the state stays Prepare*, to be completed again), then here (`_complete`)."""
        for owner, partitions in self._remote_partitions(state).items():
            try:
                await self.peers.end(owner, state.producer_id, state.epoch, committed, partitions)
            except PeerUnavailable:
                self._unfinished.add(tid)
                raise
        self._unfinished.discard(tid)
        touched = await self.steps.in_thread(self._complete, tid, state, committed)
        self.states[tid] = state  # (saved by `_complete`)
        for plog in touched:
            self.steps.ended(plog)

    def _complete(self, tid: str, state: TxnState, committed: bool, *, wait_sync: bool | None = None) -> list:
        """End the transaction in its partitions, commit its offsets, record the outcome (blocking; idempotent)."""
        touched: list[PartitionLog] = []
        peers = self.peers
        for topic, partition in sorted(state.partitions):
            if peers is not None and peers.owner(topic, partition) != peers.index:
                continue  # ended by its owner (`_complete_async`)
            try:
                plog = self.engine.partition(topic, partition)
            except (UnknownTopic, UnknownPartition):
                continue  # deleted since: nothing left to end
            if self._end_in(plog, state.producer_id, state.epoch, committed):
                touched.append(plog)
        if wait_sync if wait_sync is not None else self.steps.sync_acks:
            for plog in touched:
                plog.sync()
        if committed:
            for group, entries in sorted(state.offsets.items()):
                self.engine.offsets.commit_many(group, [(t, p, o, m or "") for (t, p), (o, m) in entries.items()])
            if state.offsets:
                self.engine.offsets.sync()
        # Not synced unless offsets were committed: lost in a crash, the Prepare* state before it is completed
        # again at start, which writes nothing twice; offsets committed again, though, could undo later commits.
        durable = committed and bool(state.offsets)
        state.status = TxnStatus.COMPLETE_COMMIT if committed else TxnStatus.COMPLETE_ABORT
        state.clear()
        state.updated_ms = self._now_ms()
        self.store.put(tid, state.to_json(), sync=durable)
        return touched

    def _end_in(self, plog: PartitionLog, producer_id: int, epoch: int, committed: bool) -> bool:
        marker = plog.fmt.transaction_marker(producer_id, epoch, committed, self._now_ms())
        return plog.end_transaction(producer_id, epoch, committed=committed, marker=marker)
