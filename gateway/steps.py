"""The storage steps every protocol takes, written once: the one door from a protocol handler to storage.

A handler gets a partition's handle (`partition(topic, n)`, a `Partition`) and gives it back to the steps; it reads
the handle's name and storage format, nothing else.
- positions: `marks(plog)` (log start, last stable offset, high watermark of one instant), `log_end`,
  `first_offset`; a reader parked at the end keeps a `Tail` (`tail(plog)`: plain numbers) and asks
  `appended_since(plog, tail)` how many bytes became readable, from the watermarks, without reads.
- `append(plog, data, headers=)`: whole batches in the partition's storage format; `headers` are the batches'
  headers when the handler parsed them already (a Kafka produce, for its producers' fields): storage takes them
  instead of scanning the batches again. It wakes the partition's long-polls — with `flush: always` only once the
  sync round that covers it is done, since readers then see only synced records. `encoder(plog)` turns records of
  another protocol into the partition's format (run through `convert`).
- `make_durable(plog, since)` / `sync_offsets()`: with `flush: always`, return once a group-commit round has synced
  what was written (every waiting writer shares the round's fdatasync); `since` is the partition's `cuts` read
  before the append, so a write that a failed sync cut back is never taken as synced by a later round.
- `read(plog, offset, max_bytes, as_=format, isolation=..., at_once=False)`: whole batches from `offset` in the
  format the reader asks for (`logway.gateway.formats`): the stored bytes untouched — a file range the pump sends
  as it lies — when they already are that format, otherwise decoded and re-encoded batch by batch (each batch once
  for every reader that asks for it in the same format while it is in `transcoded.TranscodedReads`). Bytes read
  from a file above `INLINE_READ_BYTES` are read in a worker thread, below it inline (one rule for every
  protocol; a backend whose older bytes are not in memory — PostgreSQL — reads them in a worker thread); a slice
  above `transcoded.STEP_BYTES` is transcoded a step at a time, letting the other connections
  run between the steps (or in a worker thread when it is not shared), so no read holds the event loop for long;
  with `at_once` such a read raises `NotNow` instead, so the read never waits.
  Transactions (see `Isolation`): readers see committed data only — up to the last stable offset, aborted records
  dropped, markers never shown — unless they are Kafka readers that filter for themselves (`RAW_COMMITTED`:
  the stored bytes up to the LSO, the aborted list beside them) or asked for everything (`UNCOMMITTED`).
- `end_transaction(plog, ...)` / `ended(plog)`: a transaction's end in a partition (the marker the storage format
  uses, if any); it moves the last stable offset, which wakes the partition's long-polls.
- waiting: `long_poll(keys, deadline, build)` is a request parked at the log end (`waiting.LongPoll`) that a
  handler returns; the pump hands it to `waiter` (`waiting.Waiter`, the one place long-polls wait), which builds
  the answer, parks it until one of the partitions gets new visible data and builds it again — in the appending task
  itself, written at once through the pump's `write_now`. Each protocol writes its answer once, as a coroutine
  `build(at_once)`: awaited by the waiting task, run to its end by `waiting.run_now` in the appending one
  (`at_once`: its reads never wait).
- lookups: `record_at_timestamp(plog, ts)` (ListOffsets by time: the first record at or after `ts`, or with the
  largest timestamp; its offset and timestamp), `offsets_for_timestamp`, `stored_tail` (the stored bytes of the
  log's end, for the idempotent producers' rebuild), `stored_size`.
- committed offsets: `commit_offset(s)` (durable with `flush: always`), `write_offset` + `sync_offsets`,
  `committed`, `committed_group`, `offset_groups`, `delete_group_offsets`; `new_producer_id`.
- topic administration: `topics`, a `topic_admin.TopicAdmin` (look up, create, delete, grow, configure, delete
  records, disk usage).

Protocol handlers call these and map failures with `logway.gateway.errors` (`ErrorKind`); no module under
`gateway/protocols/` imports storage (`tests/test_layering.py`), and none touches a segment or a file.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import Enum
import time
from typing import Awaitable, Callable, Hashable, Iterable, Iterator, NamedTuple, Sequence, TypeVar

import trio

from logway.codecs.records import Record
from logway.storage import AppendResult, LogEngine, PartitionLog, ReadSlice, ReadWouldWait
# (one member of several) what storage holds for a partition its ownership predicate gives another member: the
# handlers tell "serve here or route" by it
from logway.storage.engine import ForeignPartition
from logway.storage.offsets import MAX_METADATA_BYTES

from .durability import GroupCommitter
from .flush import Flush
from .formats import ReadFormat, StorageFormat
from .memory import give_back, reserve
from .notify import AppendNotifier
from .topic_admin import TopicAdmin
from .transcoded import STEP_BYTES, TranscodedReads
from .waiting import LongPoll, NotNow, Waiter

__all__ = ["INLINE_READ_BYTES", "ForeignPartition", "Isolation", "MAX_METADATA_BYTES", "Marks", "NotNow",
           "Partition", "Read", "Steps", "Tail"]

#: A partition as handlers hold it: a handle they get from `Steps.partition` and give back to the steps. Handlers
#: read its name (`topic`, `partition`) and storage format (`fmt`), nothing else.
Partition = PartitionLog

#: Reads larger than this run in a worker thread, so a cold read from disk does not stall other connections;
#: smaller ones run inline (a thread hop costs more than a read from the page cache).
INLINE_READ_BYTES = 4 * 1024 * 1024
#: Heavy work — a large slice transcoded a step at a time, a decode or conversion in a worker thread — done for this
#: many requests at once (`Steps.heavy`); the others wait their turn. Stepping bounds one request's work per pass
#: of the event loop, this bounds the pass: thirty-two readers stepping through their transcodes at once made every
#: pass, and every other client's answer, thirty-two steps long. (Worker threads share the interpreter's lock: more
#: of them at once would only take turns with the event loop.)
HEAVY_AT_ONCE = 2

T = TypeVar("T")


class Isolation(Enum):
    """What a reader may see of transactional data."""

    #: Committed data only, filtered here: up to the last stable offset, aborted records dropped, markers never
    #: shown (native and TANK readers, and any transcoded Kafka read).
    COMMITTED = "committed"
    #: Kafka read_committed reading its own format: the stored bytes up to the last stable offset; the client
    #: drops aborted batches itself, from the aborted-transactions list of the answer.
    RAW_COMMITTED = "raw-committed"
    #: Everything appended (Kafka read_uncommitted reading its own format).
    UNCOMMITTED = "uncommitted"


@dataclass(slots=True)
class Read:
    """What `Steps.read` found: `data` in the asked format — the `ReadSlice` itself when no transcode was needed,
    else what the format's `encode_read` made (bytes, encoded native records, a tuple of records) — and the slice
    of the log it came from. A transcoded read also says how many records it holds and the first one's offset
    (None when it holds none)."""

    slice: ReadSlice
    data: object
    count: int | None = None  # records in `data`, when the read decoded them (else: count the slice's offsets)
    first: int | None = None  # offset of the first record in `data`, when the read decoded them

    @property
    def zero_copy(self) -> bool:
        return self.data is self.slice

    @property
    def size(self) -> int:
        """Bytes the answer carries (for a byte budget)."""
        return self.slice.length if self.zero_copy else len(self.data)

    def head(self, n: int) -> bytes:
        """The first `n` bytes of a zero-copy answer (from memory, or read from its file): e.g. to look at its first
        batch's header."""
        return self.slice.head(n)


class Marks(NamedTuple):
    """A partition's positions at one instant (`Steps.marks`)."""

    #: The first offset a reader may ask for.
    log_start: int
    #: Where readers of committed data stop: the first offset of the oldest open transaction, else `high_watermark`.
    last_stable: int
    #: The end of what readers see (with `flush: always`, of what is synced).
    high_watermark: int


class Tail(NamedTuple):
    """Where a reader parked at the end of a partition stood (`Steps.tail`): plain numbers, no segment held."""

    last_stable: int
    segment: int  # which segment the visible end lay in (its base offset): another one later means a roll
    size: int  # that segment's size then


class Steps:
    #: Told of every append as (plog, result, bytes): the gateway's metrics (`admin.metrics`); None: not counted.
    on_append: Callable[[PartitionLog, AppendResult, int], None] | None = None
    #: Told of every read that found something as (read, offset asked): the metrics count records out.
    on_read: Callable[[Read, int], None] | None = None

    def __init__(self, engine: LogEngine, notifier: AppendNotifier, committer: GroupCommitter, flush: Flush, *,
                 transcode_cache_bytes: int = 0):
        self.engine = engine
        #: Transcoded slices shared between readers (`transcoded.py`); None: every read transcodes its own.
        self.transcoded = TranscodedReads(transcode_cache_bytes) if transcode_cache_bytes > 0 else None
        self.notifier = notifier
        #: Where long-polls wait (the pump hands it each `LongPoll` a handler returns).
        self.waiter = Waiter(notifier)
        self.committer = committer
        self.sync_acks = flush == Flush.ALWAYS
        #: Answers that need no durability elsewhere (Kafka's acks=1: the leader wrote it) wait for it all the same
        #: when an append does not outlive the process before its sync (the postgres backend's pending rows).
        self.leader_acks_wait = not engine.appends_outlive_the_process
        #: The turns of heavy work (see `HEAVY_AT_ONCE`): large transcodes, decodes, conversions and reads into memory
        #: take one.
        self.heavy = trio.CapacityLimiter(HEAVY_AT_ONCE)
        #: Looking topics up and changing them (`topic_admin.py`).
        self.topics = TopicAdmin(engine)

    # -- positions ---------------------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> Partition:
        """The handle of a partition: UnknownTopic, UnknownPartition (with `workers: N`, another worker's is a
        `ForeignPartition`)."""
        return self.engine.partition(topic, partition)

    @staticmethod
    def marks(plog: Partition) -> Marks:
        """Log start, last stable offset and high watermark of one instant."""
        stable, high = plog.stable_bounds()
        return Marks(plog.log_start_offset, stable, high)

    @staticmethod
    def log_end(plog: Partition) -> int:
        """The offset the next append gets (appended, synced or not)."""
        return plog.log_end_offset

    @staticmethod
    def first_offset(plog: Partition) -> int:
        """The offset of the first record present: the log start, or further on when the log begins with a gap;
        the log end when the log is empty."""
        return plog.first_offset

    @staticmethod
    def tail(plog: Partition) -> Tail:
        """Where a reader parked at the end stands now (compare with `appended_since`)."""
        stable = plog.last_stable_offset
        _, segment, size = plog.watermark()
        return Tail(stable, segment, size)

    @staticmethod
    def appended_since(plog: Partition, tail: Tail) -> int | None:
        """Bytes that became readable since `tail`, from the watermarks (no reads): 0 when nothing did, at least 1
        once anything did (a transaction's end may make data readable without appending a byte); None when the
        log rolled to another segment since (the sizes no longer compare)."""
        if plog.last_stable_offset <= tail.last_stable:
            return 0  # nothing readable yet (an open transaction's data waits for its end)
        _, segment, size = plog.watermark()
        return max(size - tail.size, 1) if segment == tail.segment else None

    @staticmethod
    def aborted(plog: Partition, start: int, end: int):
        """The aborted transactions with data in [start, end) (their `producer_id` and `first` offset)."""
        return plog.aborted(start, end)

    @staticmethod
    def sync_point(plog: Partition) -> int:
        """What `make_durable` compares with: read it before the append the caller will wait for."""
        return plog.cuts

    @staticmethod
    def stored_tail(plog: Partition, max_bytes: int, chunk: int) -> Iterator[bytes]:
        """The last `max_bytes` or so of the log (from the batch at an index point), as stored, `chunk` bytes of
        whole batches at a time. Blocking reads: iterate it in a worker thread."""
        offset, end = plog.tail_offset(max_bytes), plog.log_end_offset
        while offset < end:
            rng = plog.read(offset, chunk)
            if rng is None:
                return
            yield rng.read()
            offset = rng.end_offset

    # -- writing -----------------------------------------------------------------------------------------
    @staticmethod
    def encoder(plog: Partition) -> Callable[[Sequence[Record]], bytes]:
        """A pure function: records as whole batches of the partition's storage format (a produce from another
        protocol; run it with `convert`). RecordFormatError: what the format cannot carry."""
        fmt, max_batch = plog.fmt, plog.config.max_batch_bytes

        def encode(records: Sequence[Record]) -> bytes:
            return fmt.encode(records, now_ms=int(time.time() * 1000), max_batch_bytes=max_batch)
        return encode

    def append(self, plog: Partition, data, *, producer: tuple[int, int] | None = None,
               headers: Sequence | None = None) -> AppendResult:
        """Append whole batches (no waiting); `producer` = (id, epoch) of the open transaction they belong to.
        `headers`: each batch's header as the caller parsed it already (Kafka `BatchHeader`s, read for the
        producers' fields), which storage then uses instead of scanning the batches again. Raises what the
        partition raises (see `errors.kind_of`)."""
        infos = None if headers is None else [(h.size, h.base_offset, h.last_offset_delta, h.max_timestamp)
                                              for h in headers]
        result = plog.append(data, producer=producer, infos=infos)
        self._appended(plog)
        if self.on_append is not None:
            self.on_append(plog, result, len(data))
        return result

    def _appended(self, plog: PartitionLog) -> None:
        if self.sync_acks:
            self.committer.schedule(plog)  # the round's end wakes the readers (`synced`)
        else:
            self.notifier.notify((plog.topic, plog.partition))

    def ended(self, plog: PartitionLog) -> None:
        """A transaction ended in `plog` (by `PartitionLog.end_transaction`, in a worker thread): the last stable
        offset moved, and a marker may have been appended."""
        self._appended(plog)

    def synced(self, target) -> None:
        """A group-commit round synced `target` (a partition, or the offset store): what it made visible wakes the
        partition's long-polls."""
        if target is not self.engine.offsets:
            self.notifier.notify((target.topic, target.partition))

    async def make_durable(self, plog: PartitionLog, since: int) -> None:
        """With `flush: always`, return once a sync covering every append made so far has finished. `since`: the
        partition's `cuts` as the caller read it before it appended — when a failed sync cut the log back since
        then, the caller's append went with it (or may have): that sync's error is raised, whatever later syncs
        did."""
        if self.sync_acks:
            await self.committer.sync(plog)
            if plog.cuts != since:
                raise plog.cut_error

    async def sync_offsets(self) -> None:
        """With `flush: always`, return once every offset commit written so far is synced."""
        if self.sync_acks:
            await self.committer.sync(self.engine.offsets)
            if self.engine.offsets.lost is not None:  # (cluster: another member coordinates now)
                raise self.engine.offsets.lost

    # -- committed offsets -------------------------------------------------------------------------------
    async def new_producer_id(self) -> int:
        """A producer id never given before (durably reserved: in a worker thread)."""
        return await trio.to_thread.run_sync(self.engine.producer_ids.next_id)

    async def commit_offset(self, group: str, topic: str, partition: int, offset: int, metadata: str) -> None:
        """Commit one offset and, with `flush: always`, make it durable. ValueError: what the store refuses."""
        self.write_offset(group, topic, partition, offset, metadata)
        await self.sync_offsets()

    async def commit_offsets(self, group: str, entries: Iterable[tuple[str, int, int, str]]) -> None:
        """Commit (topic, partition, offset, metadata) entries at once and, with `flush: always`, make them
        durable. ValueError: what the store refuses (then none is written)."""
        self.engine.offsets.commit_many(group, list(entries))
        await self.sync_offsets()

    def write_offset(self, group: str, topic: str, partition: int, offset: int, metadata: str) -> None:
        """Commit one offset without waiting: the caller makes a request's commits durable at once with
        `sync_offsets`. ValueError: what the store refuses (an empty or overlong group, metadata over
        `MAX_METADATA_BYTES`, a negative offset)."""
        self.engine.offsets.commit(group, topic, partition, offset, metadata)

    def committed(self, group: str, topic: str, partition: int):
        """The group's committed offset of the partition (its `offset` and `metadata`), or None."""
        return self.engine.offsets.fetch(group, topic, partition)

    def committed_group(self, group: str) -> dict:
        """(topic, partition) -> committed offset, of every partition the group committed (none where this process
        holds no offset store)."""
        offsets = self.engine.offsets
        return offsets.fetch_group(group) if offsets is not None else {}

    def offset_groups(self) -> list[str]:
        """The groups that have committed offsets (none on a worker that does not hold the offset store)."""
        offsets = self.engine.offsets
        return offsets.groups() if offsets is not None else []

    async def delete_group_offsets(self, group: str, partitions: Iterable[tuple[str, int]] | None = None) -> int:
        """Delete a group's committed offsets (all, or those of the (topic, partition) pairs), durably; how many.
        ValueError for a malformed group, topic or partition."""
        return await trio.to_thread.run_sync(self.engine.delete_group_offsets, group, partitions)

    # -- reading -----------------------------------------------------------------------------------------
    async def read(self, plog: PartitionLog, offset: int, max_bytes: int, as_: ReadFormat,
                   isolation: Isolation = Isolation.COMMITTED, *, at_once: bool = False) -> Read | None:
        """Whole batches from `offset` (at least one when there is one) in format `as_`; None when nothing is
        visible there. Raises OffsetOutOfRange, and RecordFormatError when stored records cannot be converted.

        A transcoded read (and with `Isolation.COMMITTED` any read) skips a slice that holds nothing for the reader
        — aborted records, markers, offsets a compacted topic's cleaner emptied — and answers with the next records
        (or None up to the last stable offset). A read of the stored format hands out the slice as it is: its
        protocol's readers step over such batches themselves.

        `at_once`: never wait — raise `NotNow` instead of reading more than `INLINE_READ_BYTES` in a worker thread
        — so that the caller's coroutine can be run to its end by `run_now` (an answer built by the appending
        task; see `long_poll`)."""
        stored = plog.fmt
        until = None if isolation is Isolation.UNCOMMITTED else plog.last_stable_offset
        try:
            rng = plog.read(offset, max_bytes, until=until, wait=False)
        except ReadWouldWait:
            rng = await self._waiting_read(plog, offset, max_bytes, until, at_once)
        if rng is None:
            return None
        filtering = isolation is Isolation.COMMITTED and plog.txns.has_aborted
        if as_ is stored and not filtering:
            return self._done(Read(rng, rng), offset)
        asked = offset
        while True:
            aborted = plog.aborted(rng.first_offset, rng.end_offset) if filtering else ()
            if not aborted:
                if as_ is stored:
                    return self._done(Read(rng, rng), asked)
                read = await self._transcode(rng, offset, stored, as_, at_once)
            else:  # committed records only: drop what aborted transactions wrote
                async with _holding(rng, as_, at_once):
                    data = await self._bytes(rng, at_once)
                    read = await self._in_thread_if_large(rng, at_once, _transcoded, rng, data, offset, stored, as_,
                                                          aborted)
            if read.count:
                return self._done(read, asked)
            # Nothing in this slice for the reader — only markers, aborted records, or offsets the log cleaner left
            # empty (a compacted topic's batch keeps its offsets when its last records go): the next one.
            end = plog.high_watermark if until is None else until
            if rng.end_offset >= end:
                return None
            offset = rng.end_offset
            try:
                rng = plog.read(offset, max_bytes, until=until, wait=False)
            except ReadWouldWait:
                rng = await self._waiting_read(plog, offset, max_bytes, until, at_once)
            if rng is None:
                return None

    @staticmethod
    async def _waiting_read(plog: PartitionLog, offset: int, max_bytes: int, until: int | None,
                            at_once: bool) -> ReadSlice | None:
        """A read whose bytes are not in memory (the postgres backend's older rows): in a worker thread (or
        `NotNow` when `at_once`)."""
        if at_once:
            raise NotNow
        return await trio.to_thread.run_sync(lambda: plog.read(offset, max_bytes, until=until))

    async def _transcode(self, rng: ReadSlice, offset: int, stored: StorageFormat, as_: ReadFormat,
                         at_once: bool) -> Read:
        """The slice's records from `offset` in `as_`, shared with the readers that asked for the same
        (`transcoded.TranscodedReads`: the answer without the decoded records, which would only weigh on the
        garbage collector): the same slice as a whole, else batch by batch, decoding and encoding only the
        batches nobody asked for yet."""
        cache = self.transcoded
        shared = None if cache is None else cache.shared(rng, offset, as_)
        if shared is not None:
            return Read(rng, *shared)
        async with _holding(rng, as_, at_once):
            data = await self._bytes(rng, at_once)
            if cache is None:
                return await self._in_thread_if_large(rng, at_once, _transcoded, rng, data, offset, stored, as_)
            if rng.length <= STEP_BYTES:
                shared = cache.transcode(rng, data, offset, stored, as_)
            elif at_once:
                raise NotNow
            else:  # the loop is let go between the batches (the cache is this thread's: not a worker thread)
                async with self.heavy:
                    steps = cache.transcode_in_steps(rng, data, offset, stored, as_)
                    try:
                        while True:
                            next(steps)
                            await trio.lowlevel.checkpoint()
                    except StopIteration as done:
                        shared = done.value
        return Read(rng, *shared)

    async def _in_thread_if_large(self, rng: ReadSlice, at_once: bool, fn: Callable[..., T], *args) -> T:
        """`fn(*args)` (decoding or encoding the slice `rng`): inline when the slice is small; when large, in a
        worker thread, taking a turn of heavy work (or `NotNow` when `at_once`)."""
        if rng.length <= STEP_BYTES:
            return fn(*args)
        if at_once:
            raise NotNow
        return await trio.to_thread.run_sync(fn, *args, limiter=self.heavy)

    def _done(self, read: Read, offset: int) -> Read:
        if self.on_read is not None:
            self.on_read(read, offset)
        return read

    async def _bytes(self, rng: ReadSlice, at_once: bool) -> bytes:
        """The bytes of a slice: inline when small; when large, in a worker thread taking a turn of heavy work (or
        `NotNow` when `at_once`) — dozens of readers asking for tens of MiB each at once would otherwise copy a GiB
        out of the page cache, and fault it into fresh memory, all together, starving the event loop of CPU."""
        if rng.length <= INLINE_READ_BYTES:
            return rng.read()
        if at_once:
            raise NotNow
        return await trio.to_thread.run_sync(rng.read, limiter=self.heavy)

    async def convert(self, size: int, fn: Callable[..., T], *args) -> T:
        """`fn(*args)`: a pure conversion of records worth `size` bytes (a produce in another format than the
        topic's, encoded into it) — inline when small, in a worker thread taking a turn of heavy work when larger
        than `STEP_BYTES`, so no produce holds the event loop for long."""
        if size <= STEP_BYTES:
            return fn(*args)
        return await trio.to_thread.run_sync(fn, *args, limiter=self.heavy)

    async def in_thread(self, fn: Callable[..., T], *args) -> T:
        """Run a blocking call in a worker thread."""
        return await trio.to_thread.run_sync(fn, *args)

    async def offsets_for_timestamp(self, plogs: Sequence[Partition], timestamp: int) -> list[int | None]:
        """Each partition's first visible offset whose record timestamp is >= `timestamp` (None: none), found in
        its time index (in a worker thread: it reads index files)."""
        return await trio.to_thread.run_sync(lambda: [p.offset_for_timestamp(timestamp) for p in plogs])

    @staticmethod
    def stored_size(plog: Partition) -> tuple[int, int]:
        """(bytes of stored batches, segments) of the partition."""
        return plog.size_bytes, plog.segment_count

    async def record_at_timestamp(self, plog: Partition, timestamp: int | None) -> tuple[int, int] | None:
        """(offset, timestamp) of the first visible record whose timestamp is >= `timestamp` — or, with None, is the
        largest of the partition (the first record at the largest of its segments' largest timestamps) — or None
        when there is none; the timestamp -1 when the record has none. In a worker thread: it reads an index and a
        batch. RecordFormatError when the stored batch cannot be decoded."""
        return await trio.to_thread.run_sync(_record_at_timestamp, plog, timestamp)

    # -- waiting -----------------------------------------------------------------------------------------
    def long_poll(self, keys: Iterable[Hashable], deadline: float,
                  build: Callable[[bool], Awaitable[tuple[T, bool]]], *, at_once: bool = True,
                  now: Callable[[], Awaitable[T]] | None = None) -> LongPoll:
        """A request parked at the log end, for the handler to return: `build(at_once)` -> (answer, enough), `keys`
        the (topic, partition) pairs whose new data may make it enough, answered at `deadline` whatever it holds
        (`waiting.LongPoll`; `at_once=False`: only the waiting task builds it)."""
        return LongPoll(list(keys), deadline, build, at_once, now)


@asynccontextmanager
async def _holding(rng: ReadSlice, as_: ReadFormat, at_once: bool):
    """The memory budget's share of transcoding `rng` into `as_` — its bytes and its answer — for the block;
    `NotNow` when `at_once` and it does not fit now."""
    held = await reserve(rng.length * (1 + as_.expansion), at_once)
    if held is None:
        raise NotNow
    try:
        yield
    finally:
        give_back(held)


def _transcoded(rng: ReadSlice, data, offset: int, stored: StorageFormat, as_: ReadFormat,
                aborted=()) -> Read:
    """The slice's records from `offset` (leaving out those of the `aborted` transactions) in `as_`: a pure
    function of its arguments, run in a worker thread when the slice is large."""
    records = stored.decode(data, first_offset=rng.first_offset, min_offset=offset)
    if aborted:
        records = [r for r in records if not any(t.covers(r.offset) for t in aborted)]
    return Read(rng, as_.encode_read(records), len(records), records[0].offset if records else None)


def _record_at_timestamp(plog: PartitionLog, timestamp: int | None) -> tuple[int, int] | None:
    if timestamp is None:
        timestamp = plog.max_timestamp
        if timestamp < 0:  # empty, or no record with a timestamp
            return None
    offset = plog.offset_for_timestamp(timestamp)
    if offset is None:
        return None
    rng = plog.read(offset, 1)
    records = plog.fmt.decode(rng.read(), first_offset=rng.first_offset, min_offset=offset) if rng else ()
    for rec in records:
        return rec.offset, rec.timestamp if rec.timestamp is not None else -1
    return offset, -1
