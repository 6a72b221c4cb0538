"""The storage steps every protocol takes, written once.

- `append(plog, data)`: whole batches in the partition's storage format. It wakes the partition's long-polls — with
  `flush: always` only once the sync round that covers it is done, since readers then see only synced records.
- `make_durable(plog)` / `sync_offsets()`: with `flush: always`, return once a group-commit round has synced what
  was written (every waiting writer shares the round's fdatasync).
- `read(plog, offset, max_bytes, as_=format)`: whole batches from `offset` in the format the reader asks for
  (`logway.gateway.formats`): the stored bytes untouched — a file range the pump sends with `os.sendfile` — when
  they already are that format, otherwise decoded and re-encoded. Bytes read from a file above
  `INLINE_READ_BYTES` are read in a worker thread, below it inline (one rule for every protocol).
- `long_poll(keys, deadline, build)`: build the answer; while it is not enough and time is left, park until one
  of the partitions gets new visible data, then build it again.

Protocol handlers call these and map failures with `logway.gateway.errors`; they never touch segments or files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Hashable, Iterable, TypeVar

import trio

from logway.codecs.records import Record
from logway.storage import AppendResult, LogEngine, PartitionLog, ReadSlice

from .durability import Flush, GroupCommitter
from .formats import ReadFormat
from .notify import AppendNotifier

__all__ = ["INLINE_READ_BYTES", "Read", "Steps"]

#: Reads larger than this run in a worker thread, so a cold read from disk does not stall other connections;
#: smaller ones run inline (a thread hop costs more than a read from the page cache).
INLINE_READ_BYTES = 4 * 1024 * 1024

T = TypeVar("T")


@dataclass(slots=True)
class Read:
    """What `Steps.read` found: `data` in the asked format — the `ReadSlice` itself when no transcode was needed,
    else bytes (or, for `RECORDS`, the records) — and the slice of the log it came from."""

    slice: ReadSlice
    data: object
    records: list[Record] | None = None  # the decoded records, when the read decoded them

    @property
    def zero_copy(self) -> bool:
        return self.data is self.slice

    @property
    def size(self) -> int:
        """Bytes the answer carries (for a byte budget)."""
        return self.slice.length if self.zero_copy else len(self.data)


class Steps:
    def __init__(self, engine: LogEngine, notifier: AppendNotifier, committer: GroupCommitter, flush: Flush):
        self.engine = engine
        self.notifier = notifier
        self.committer = committer
        self.sync_acks = flush == Flush.ALWAYS

    # -- writing -----------------------------------------------------------------------------------------
    def append(self, plog: PartitionLog, data) -> AppendResult:
        """Append whole batches (no waiting). Raises what the partition raises (see `errors.kind_of`)."""
        result = plog.append(data)
        if self.sync_acks:
            self.committer.schedule(plog)  # the round's end wakes the readers (`synced`)
        else:
            self.notifier.notify((plog.topic, plog.partition))
        return result

    def synced(self, target) -> None:
        """A group-commit round synced `target`: what it made visible wakes the partition's long-polls."""
        if isinstance(target, PartitionLog):
            self.notifier.notify((target.topic, target.partition))

    async def make_durable(self, plog: PartitionLog) -> None:
        """With `flush: always`, return once a sync covering every append made so far has finished."""
        if self.sync_acks:
            await self.committer.sync(plog)

    async def sync_offsets(self) -> None:
        """With `flush: always`, return once every offset commit written so far is synced."""
        if self.sync_acks:
            await self.committer.sync(self.engine.offsets)

    async def commit_offset(self, group: str, topic: str, partition: int, offset: int, metadata: str) -> None:
        """Commit one offset and, with `flush: always`, make it durable. ValueError: what the store refuses."""
        self.engine.offsets.commit(group, topic, partition, offset, metadata)
        await self.sync_offsets()

    # -- reading -----------------------------------------------------------------------------------------
    async def read(self, plog: PartitionLog, offset: int, max_bytes: int, as_: ReadFormat) -> Read | None:
        """Whole batches from `offset` (at least one when there is one) in format `as_`; None when nothing is
        visible there. Raises OffsetOutOfRange, and RecordFormatError when stored records cannot be converted."""
        rng = plog.read(offset, max_bytes)
        if rng is None:
            return None
        stored = plog.fmt
        if as_ is stored:
            return Read(rng, rng)
        records = stored.decode(await self.read_bytes(rng), first_offset=rng.first_offset, min_offset=offset)
        return Read(rng, as_.encode_read(records), records)

    @staticmethod
    async def read_bytes(rng: ReadSlice) -> bytes:
        """The bytes of a slice: inline when small, in a worker thread when large."""
        if rng.length > INLINE_READ_BYTES:
            return await trio.to_thread.run_sync(rng.read)
        return rng.read()

    async def in_thread(self, fn: Callable[..., T], *args) -> T:
        """Run a blocking storage call (topic creation, a timestamp search) in a worker thread."""
        return await trio.to_thread.run_sync(fn, *args)

    # -- waiting -----------------------------------------------------------------------------------------
    async def long_poll(self, keys: Iterable[Hashable], deadline: float,
                        build: Callable[[], Awaitable[tuple[T, bool]]]) -> T:
        """`build()` -> (answer, enough). Return the first answer that is enough, or the one built after the
        deadline (or at once when the notifier refuses to park: shutdown, `limits.max_waiters`). `keys` are the
        (topic, partition) pairs whose new data may make the answer enough."""
        keys = list(keys)
        while True:
            answer, enough = await build()
            if enough or trio.current_time() >= deadline:
                return answer
            if not await self.notifier.wait(keys, deadline):
                return (await build())[0]
