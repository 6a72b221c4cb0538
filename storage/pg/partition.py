"""`PgPartitionLog`: one partition of the postgres backend, with the interface of the file backend's `PartitionLog`
(what the gateway's steps and handlers use of it).

This gateway is the partition's only writer (the engine holds the database's writer lock), so offsets are assigned
here, in memory, as batches are appended: an append is validated and stamped exactly as in a segment file, and
added to the partition's pending rows (runs of whole batches of at most `ROW_BYTES`) — nothing is written yet. The
engine's next commit (`PgEngine.sync_many`: the group commit's round, or `sync()`) writes the pending rows of every
partition in one database transaction; once it is committed they become visible: the high watermark is the end of
what is committed, as the file backend's under `flush: always`, so no reader sees, and no consumer commits past, a
record the database could still lose. A commit that fails leaves the rows pending (their offsets stay theirs) for
the next one.

Reads: committed rows are kept in the engine's `RowCache` (every row this gateway commits goes there; rows read
from the database too); a read returns a `ReadSlice` of bytes in memory — whole batches from the one that holds
the offset, across consecutive rows up to `max_bytes` (at least one batch), never past the high watermark nor
`until` — from the cache, or, for older rows, from the database (a blocking query: `read(..., wait=False)` raises
`ReadWouldWait` instead, and the gateway reads in a worker thread). The slice's `segment` is the partition's
`stream` and its `position` the bytes' place in the partition's byte stream (`Row.pos`), which never changes: what
the gateway derives from a slice (transcoded batches) stays true.

Retention and DeleteRecords delete whole rows below the new log start offset, which they store in the partition's
row; retention never deletes the last row (as the file backend keeps the active segment).
"""

from __future__ import annotations

import bisect
import itertools
import threading
from typing import TYPE_CHECKING

from ..config import TopicConfig
from ..errors import CorruptBatch, InvalidBatchOffset, OffsetOutOfRange, ReadWouldWait, UnknownTopic
from ..formats import BatchFormat
from ..partition import AppendResult, ReadSlice, RecoveryReport, batch_offset, scan_batches
from ..txnindex import TxnState
from .rows import Row
from .txns import PgTxnIndex

if TYPE_CHECKING:  # pragma: no cover
    from .engine import PgEngine

__all__ = ["PgPartitionLog", "ROW_BYTES"]

#: A pending row takes batches up to about this many bytes (a larger batch is a row of its own): what a read of one
#: row costs the database, and what one row weighs in the cache.
ROW_BYTES = 1024 * 1024
#: Rows one read fetches at most (besides `max_bytes`): a partition written in tiny commits is read in bounded steps.
FETCH_ROWS = 1000
#: Leading rows retention looks at per run (it goes on at the next run).
RETENTION_ROWS = 10_000

_uids = itertools.count(1)

_FETCH = ("SELECT base_offset, end_offset, pos, max_ts, time_ms, data FROM batches WHERE partition_id = %(p)s "
          "AND end_offset > %(o)s AND end_offset <= %(hw)s AND pos < coalesce((SELECT pos FROM batches WHERE "
          "partition_id = %(p)s AND end_offset > %(o)s ORDER BY end_offset LIMIT 1), 0) + %(n)s "
          "ORDER BY end_offset LIMIT %(rows)s")


class Stream:
    """A partition's byte stream, as a `ReadSlice.segment`: `uid` is new for every partition log object, and the
    bytes at a position never change (`generation` stays 0)."""

    __slots__ = ("uid", "generation")

    def __init__(self) -> None:
        self.uid = next(_uids)
        self.generation = 0


class _Pending:
    """A row being filled by appends, not committed yet."""

    __slots__ = ("start", "base", "end", "pos", "chunks", "size", "bounds", "max_ts", "time_ms")

    def __init__(self, start: int, base: int, pos: int) -> None:
        self.start, self.base, self.end, self.pos = start, base, base, pos
        self.chunks: list[bytes] = []
        self.size = 0
        self.bounds: list[tuple[int, int, int]] = []
        self.max_ts = -1
        self.time_ms = -1

    def row(self) -> Row:
        data = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        self.chunks = [data]
        time_ms = self.max_ts if self.max_ts >= 0 else self.time_ms
        return Row(self.start, self.base, self.end, self.pos, data, self.max_ts, time_ms, self.bounds)


class PgPartitionLog:
    reads_need_sync = True  # readers see committed rows only (see the module docstring)
    cuts = 0  # a failed commit cuts nothing back: its rows are committed with the next one (`PartitionLog.cuts`)

    def __init__(self, engine: "PgEngine", partition_id: int, topic: str, partition: int, fmt: BatchFormat,
                 config: TopicConfig, *, log_start: int = 0, first: tuple[int, int] | None = None,
                 last: tuple[int, int, int] | None = None, rows: int = 0, max_ts: int = -1, txns=(),
                 epoch: int | None = None) -> None:
        """The partition as the database holds it: `first` = (base offset, position) of its first row, `last` =
        (end offset, position, size) of its last (None: no rows), `rows` how many, `max_ts` their largest timestamp,
        `txns` its rows of the `txns` table; `epoch` (cluster mode) that of its slot when this member opened it,
        which fences its commits (logway.storage.pg.leases)."""
        self._engine = engine
        self._cache = engine.cache
        self.partition_id = partition_id
        self.topic = topic
        self.partition = partition
        self.epoch = epoch
        self.fmt = fmt
        self.config = config
        self.explicit_offsets = bool(getattr(fmt, "explicit_offsets", False))
        self.clock = engine.clock
        self.lock = threading.Lock()  # appends, and what a commit changes
        self._trim_lock = threading.Lock()  # retention and DeleteRecords, one at a time
        self.recovery = RecoveryReport()  # (a database recovers by itself: nothing to report)
        self.stream = Stream()
        self.txns = PgTxnIndex(txns)
        self._retired = False  # its topic was deleted, or (cluster mode) another member writes it now
        self._lost: Exception | None = None  # (the latter) what appends get
        self._pending: list[_Pending] = []
        self._log_start = log_start
        self._first_base = None if first is None else first[0]
        self._start_pos = 0 if first is None else first[1]
        end, pos = (log_start, 0) if last is None else (max(last[0], log_start), last[1] + last[2])
        self._committed = end  # the high watermark: the end of what is committed
        self._committed_pos = pos
        self._next = end  # the log end offset: where the next append goes
        self._next_pos = pos
        self._rows = rows
        self._max_ts = max_ts

    def __repr__(self) -> str:
        return f"PgPartitionLog({self.topic!r}, {self.partition})"

    # -- state -------------------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def first_offset(self) -> int:
        """The first record present: the log start offset, or further on where the log begins with a gap (formats
        with offsets of their own); the high watermark when nothing is."""
        if self._first_base is None or self._committed <= self._log_start:
            return self._committed
        return max(self._log_start, self._first_base)

    @property
    def log_end_offset(self) -> int:
        return self._next

    @property
    def high_watermark(self) -> int:
        return self._committed

    @property
    def durable_offset(self) -> int:
        return self._committed

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    @property
    def size_bytes(self) -> int:
        return self._committed_pos - self._start_pos

    @property
    def segment_count(self) -> int:
        """Rows of the partition in the database (a segment's counterpart)."""
        return self._rows

    def watermark(self) -> tuple[int, int, int]:
        """(high watermark, 0 — one stream, never rolled —, bytes committed to it so far): what a reader parked at
        the end compares later snapshots with (the bytes grew: that many were committed)."""
        with self.lock:
            return self._committed, 0, self._committed_pos

    @property
    def last_stable_offset(self) -> int:
        return self.stable_bounds()[0]

    def stable_bounds(self) -> tuple[int, int]:
        """(last stable offset, high watermark) of one instant."""
        if not self.txns.has_open:
            hw = self._committed
            return max(hw, self._log_start), hw
        with self.lock:
            hw = self._committed
            return max(self.txns.last_stable_offset(hw), self._log_start), hw

    def aborted(self, start: int, end: int):
        return self.txns.aborted(start, end)

    def apply_config(self, config: TopicConfig) -> None:
        if config.format != self.config.format:
            raise ValueError("a partition's storage format cannot change")
        self.config = config

    # -- appending ---------------------------------------------------------------------------------------
    def append(self, data, *, producer: tuple[int, int] | None = None, infos=None) -> AppendResult:
        """Validate whole batches, assign their offsets, keep them for the next commit (see the module docstring);
        all of them or none. CorruptBatch, BatchTooLarge, InvalidBatchOffset, InvalidRecord; UnknownTopic once the
        topic was deleted. `infos`: the batches' headers as the caller read them (`scan_batches`)."""
        batches = scan_batches(self.fmt, self.config, self.topic, data, infos)
        with self.lock:
            return self._append_locked(batches, producer)

    def _append_locked(self, batches, producer: tuple[int, int] | None) -> AppendResult:
        if self._retired:
            raise self._lost or UnknownTopic(f"topic {self.topic!r} was deleted")
        now = int(self.clock() * 1000)
        base = offset = self._next
        placed = []
        for batch, _, explicit, delta, max_ts in batches:  # every offset checked before anything is kept
            start = batch_offset(offset, explicit, delta, self.explicit_offsets)
            if offset == base:
                base = start
            offset = start + delta + 1
            placed.append((batch, start, offset, max_ts))
        if producer is not None:
            self.txns.add_data(producer[0], producer[1], base, offset - 1)
        stamp = self.fmt.stamp
        for batch, start, end, max_ts in placed:
            self._add(b"".join(stamp(batch, start)), start, end, max_ts, now)
        self._next = offset
        return AppendResult(base, offset - 1, now)

    def _add(self, stored: bytes, first: int, end: int, max_ts: int, now: int) -> None:
        """Keep one stamped batch [first, end) in the pending row (a new one when it would grow past ROW_BYTES)."""
        pending = self._pending[-1] if self._pending else None
        if pending is None or (pending.size and pending.size + len(stored) > ROW_BYTES):
            pending = _Pending(self._next if pending is None else pending.end, first, self._next_pos)
            self._pending.append(pending)
        pending.bounds.append((pending.size, first, end))
        pending.chunks.append(stored)
        pending.size += len(stored)
        pending.end = end
        pending.max_ts = max(pending.max_ts, max_ts)
        pending.time_ms = now
        self._next_pos += len(stored)

    def copy_batches(self, data, first: int) -> int:
        """Keep whole batches stored by another log (`logway migrate`) *verbatim*, for the next commit as appends
        are: the bytes as they are (not stamped again), the first batch at offset `first` — at or after the log
        end: a gap before it stays a gap — and each next one where an append would put it. A batch that records
        an offset of its own must record its place (InvalidBatchOffset otherwise), so a `kafka` batch keeps its
        base offset; each is validated as on append (CorruptBatch), but the topic's `max.message.bytes` does not
        apply (a batch stored before it was lowered is kept). The offset after the last batch."""
        view = memoryview(data)
        batches, pos = [], 0
        try:
            while pos < len(view):
                info = self.fmt.scan(view, pos)
                if info is None or info[0] <= 0 or pos + info[0] > len(view):
                    raise CorruptBatch(f"truncated batch at position {pos} of {len(view)} bytes")
                size, explicit, delta, max_ts = info[:4]
                self.fmt.validate(view[pos:pos + size])
                batches.append((view[pos:pos + size], explicit, delta, max_ts))
                pos += size
        except ValueError as exc:
            raise CorruptBatch(str(exc)) from None
        with self.lock:
            if self._retired:
                raise UnknownTopic(f"topic {self.topic!r} was deleted")
            if first < self._next:
                raise InvalidBatchOffset(f"{self.topic}-{self.partition}: batches copied to offset {first} would "
                                         f"overwrite the log, which ends at {self._next}")
            now = int(self.clock() * 1000)
            placed, offset = [], first
            for batch, explicit, delta, max_ts in batches:  # every place checked before anything is kept
                start = offset if not placed else batch_offset(offset, explicit, delta, self.explicit_offsets)
                if explicit is not None and explicit != start:
                    raise InvalidBatchOffset(f"{self.topic}-{self.partition}: a batch that records offset "
                                             f"{explicit} was to be copied to offset {start}")
                offset = start + delta + 1
                placed.append((bytes(batch), start, offset, max_ts))
            for stored, start, end, max_ts in placed:
                self._add(stored, start, end, max_ts, now)
                self._next = end
            return offset

    def copy_log_start(self, offset: int, txns: TxnState) -> None:
        """The last step of copying another log into this one (`logway migrate`), after its batches were committed:
        its transactions (`txns`: the open ones and those aborted) are committed, then the log start offset is
        moved to `offset` (as DeleteRecords); a log holding nothing up to `offset` then ends there (the source's
        records were all deleted). Both steps may be taken again (a migration run again)."""
        with self._trim_lock:
            with self.lock:
                if self._pending or self._next != self._committed:
                    raise InvalidBatchOffset(f"{self.topic}-{self.partition}: copied batches are not committed yet")
                self.txns.copy_from(txns)
            self.sync()
            self._trim(offset, offset)
            with self.lock:
                if self._committed < self._log_start:
                    self._next = self._committed = self._log_start

    def end_transaction(self, producer_id: int, epoch: int, *, committed: bool, marker=None) -> bool:
        """End the producer's open transaction here (its `marker` batch appended first, when the format has one);
        False when it has none open here. Committed with the next commit, as an append."""
        batches = scan_batches(self.fmt, self.config, self.topic, marker) if marker is not None else None
        with self.lock:
            if not self.txns.is_open(producer_id):
                return False
            if batches is not None:
                offset = self._append_locked(batches, None).base_offset
                return self.txns.end(producer_id, epoch, committed=committed, offset=offset, marker=True)
            return self.txns.end(producer_id, epoch, committed=committed, offset=self._next, marker=False)

    # -- committing (the engine's side) ------------------------------------------------------------------
    def sync(self) -> int:
        """Commit every append made before this call; the high watermark after it. StorageIOError."""
        self._engine.sync_many([self])
        return self._committed

    def _take(self):
        """What the engine's commit writes of this partition (None: nothing), taken from it."""
        with self.lock:
            if self._retired:
                return None
            changes = self.txns.take()
            if not self._pending and not changes:
                return None
            pending, self._pending = self._pending, []
        return _PartitionWork(self, [p.row() for p in pending], changes)

    def _committed_rows(self, rows: list[Row]) -> None:
        with self.lock:
            if rows:
                last = rows[-1]
                if self._first_base is None:
                    self._first_base, self._start_pos = rows[0].base, rows[0].pos
                self._committed, self._committed_pos = last.end, last.pos + last.size
                self._rows += len(rows)
                self._max_ts = max(self._max_ts, max(r.max_ts for r in rows))
        if rows:
            self._cache.put(self, rows)

    def _give_back(self, rows: list[Row], changes: dict) -> None:
        with self.lock:
            self._pending = [_pending_of(r) for r in rows] + self._pending
            self.txns.give_back(changes)

    def retire(self) -> None:
        """The topic is being deleted: nothing more is appended or committed; pending rows are dropped."""
        with self.lock:
            self._retired = True
            self._pending = []
            self.txns.take()
        self._cache.drop(self)

    def lose(self, error: Exception) -> None:
        """(Cluster mode) another member writes the partition now: nothing more is appended or committed here;
        appends get `error`, and so do the writers of what was pending (`cuts`: their acknowledgement waits for
        a commit that will not write it)."""
        with self.lock:
            if self._pending:
                self.cuts += 1
                self.cut_error = error
            self._lost = error
            self._retired = True
            self._pending = []
            self.txns.take()
        self._cache.drop(self)

    # -- reading -----------------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, until: int | None = None, wait: bool = True) -> ReadSlice | None:
        """Whole batches from the one that holds `offset` (see the module docstring). None at or past the high
        watermark or `until`; OffsetOutOfRange below the log start or past the log end. `wait=False`: raise
        `ReadWouldWait` rather than query the database."""
        hw = self._committed
        start = self._log_start
        end = hw if until is None or until >= hw else until
        if offset < start or offset > max(hw, self._next):
            raise OffsetOutOfRange(f"offset {offset} is outside [{start}, {hw}]", log_start=start, log_end=hw)
        if offset >= end:
            return None
        rows = self._cache.rows_from(self, offset, max_bytes)
        if rows is None:
            if not wait:
                raise ReadWouldWait(f"{self.topic}-{self.partition}: offset {offset} is not in memory")
            rows = self._fetch(offset, max_bytes, hw)
            if not rows:
                return None
        return self._slice(rows, offset, max(max_bytes, 1), end)

    def _slice(self, rows: list[Row], offset: int, max_bytes: int, end: int) -> ReadSlice | None:
        """The slice of `rows` (consecutive) from the batch holding `offset` on, within `max_bytes` (at least one
        batch) and before `end`."""
        fmt = self.fmt
        pieces = []  # (row, from, to) of each row's part
        length = 0
        first = last = None
        for row in rows:
            bounds = row.bounds(fmt)
            k = 0 if first is not None else bisect.bisect_right(bounds, offset, key=_end_offset)
            lo = hi = bounds[k][0] if k < len(bounds) else row.size
            full = False
            for k in range(k, len(bounds)):
                pos, b_first, b_end = bounds[k]
                size = (bounds[k + 1][0] if k + 1 < len(bounds) else row.size) - pos
                if b_end > end or (length and length + size > max_bytes):
                    full = True
                    break
                if first is None:
                    first = b_first
                last, hi = b_end, pos + size
                length += size
            if hi > lo:
                pieces.append((row, lo, hi))
            if full or first is None:
                break
        if first is None:
            return None
        row, lo, hi = pieces[0]
        if len(pieces) == 1:
            data = memoryview(row.data)[lo:hi]
        else:
            data = b"".join(memoryview(r.data)[a:b] for r, a, b in pieces)
        return ReadSlice(self.stream, None, row.pos + lo, length, first, last, data)

    def _fetch(self, offset: int, max_bytes: int, hw: int) -> list[Row]:
        """Rows from the one holding `offset`, about `max_bytes` of them, from the database (and into the cache)."""
        with self._engine.pool.connection(f"reading {self.topic}-{self.partition}") as conn:
            cur = conn.cursor(binary=True)
            found = cur.execute(_FETCH, {"p": self.partition_id, "o": offset, "hw": hw, "n": max(max_bytes, 1),
                                         "rows": FETCH_ROWS}).fetchall()
        rows = []
        prev = None
        for base, end, pos, max_ts, time_ms, data in found:
            rows.append(Row(base if prev is None else prev, base, end, pos, data, max_ts, time_ms))
            prev = end
        self._cache.put(self, rows)
        return rows

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first visible offset whose record timestamp is >= timestamp, or None (a database query)."""
        hw = self._committed
        with self._engine.pool.connection(f"looking up a timestamp in {self.topic}-{self.partition}") as conn:
            found = conn.cursor(binary=True).execute(
                "SELECT base_offset, end_offset, pos, max_ts, time_ms, data FROM batches WHERE partition_id = %s "
                "AND end_offset > %s AND end_offset <= %s AND max_ts >= %s ORDER BY end_offset LIMIT 1",
                (self.partition_id, self._log_start, hw, timestamp)).fetchone()
        if found is None:
            return None
        base, end, pos, max_ts, time_ms, data = found
        row = Row(base, base, end, pos, data, max_ts, time_ms)
        view = memoryview(row.data)
        refine = getattr(self.fmt, "offset_for_timestamp", None)
        for pos, first, _ in row.bounds(self.fmt):
            size, _, _, batch_max_ts = self.fmt.scan(view, pos)[:4]
            if batch_max_ts < timestamp:
                continue
            if refine is not None:
                exact = refine(view[pos:pos + size], first, timestamp)
                if exact is not None:
                    first = exact
            first = max(first, self._log_start)
            return first if first < hw else None
        return None

    def tail_offset(self, max_bytes: int) -> int:
        """The first offset of the row that starts about `max_bytes` before the end of the log (or before); the log
        start offset when the log is smaller."""
        with self._engine.pool.connection(f"reading {self.topic}-{self.partition}") as conn:
            found = conn.execute("SELECT base_offset FROM batches WHERE partition_id = %s AND pos <= %s ORDER BY "
                                 "end_offset DESC LIMIT 1",
                                 (self.partition_id, self._committed_pos - max_bytes)).fetchone()
        return self._log_start if found is None else max(found[0], self._log_start)

    # -- deleting records --------------------------------------------------------------------------------
    def delete_records(self, offset: int) -> int:
        """Delete every record below `offset` (-1: the high watermark), Kafka's DeleteRecords: the log start offset
        moves there and the rows wholly below it go, in one database transaction, before this returns. Returns the
        log start offset after the call. OffsetOutOfRange for an offset past the high watermark or negative."""
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        with self._trim_lock:
            hw = self._committed
            if offset == -1:
                offset = hw
            if offset < 0 or offset > hw:
                raise OffsetOutOfRange(f"cannot delete records below offset {offset}: the partition holds "
                                       f"[{self._log_start}, {hw})", log_start=self._log_start, log_end=hw)
            if offset <= self._log_start:
                return self._log_start
            self._trim(offset, offset)
        return self._log_start

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old rows beyond retention_ms / retention_bytes from the front, never the last one (nor any
        of a topic that is not `delete`); how many."""
        cfg = self.config
        if not cfg.delete or (cfg.retention_ms < 0 and cfg.retention_bytes < 0):
            return 0
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        with self._trim_lock:
            with self._engine.pool.connection(f"retention of {self.topic}-{self.partition}") as conn:
                leading = conn.execute("SELECT end_offset, size, time_ms FROM batches WHERE partition_id = %s AND "
                                       "end_offset < %s ORDER BY end_offset LIMIT %s",
                                       (self.partition_id, self._committed, RETENTION_ROWS)).fetchall()
            total = self._committed_pos - self._start_pos
            doomed, upto = 0, None
            for end, size, time_ms in leading:
                expired = cfg.retention_ms >= 0 and now_ms - time_ms > cfg.retention_ms
                oversize = cfg.retention_bytes >= 0 and total - size >= cfg.retention_bytes
                if not (expired or oversize):
                    break
                total -= size
                doomed, upto = doomed + 1, end
            if upto is None:
                return 0
            self._trim(None, upto)
        return doomed

    def _trim(self, log_start: int | None, upto: int) -> None:
        """Delete the rows ending at or below `upto` and move the log start to `log_start` (None: to the first row
        left), in one transaction; then forget them here."""
        pid = self.partition_id
        with self._engine.pool.connection(f"deleting records of {self.topic}-{self.partition}") as conn:
            with conn.transaction():
                gone = conn.execute("DELETE FROM batches WHERE partition_id = %s AND end_offset <= %s",
                                    (pid, upto)).rowcount
                first = conn.execute("SELECT base_offset, pos FROM batches WHERE partition_id = %s ORDER BY "
                                     "end_offset LIMIT 1", (pid,)).fetchone()
                start = log_start if log_start is not None else (upto if first is None else first[0])
                start = max(start, self._log_start)
                conn.execute("UPDATE partitions SET log_start = %s WHERE partition_id = %s", (start, pid))
                conn.execute("DELETE FROM txns WHERE partition_id = %s AND end_offset < %s", (pid, start))
        with self.lock:
            self._log_start = start
            self._rows -= gone
            if first is None:
                self._first_base, self._start_pos = None, self._committed_pos
            else:
                self._first_base, self._start_pos = first
            self.txns.prune(start)
        self._cache.drop(self, upto)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def close(self, *, durable: bool = False) -> None:
        self._cache.drop(self)

    def delete(self) -> None:
        self.retire()


class _PartitionWork:
    """A partition's part of one commit: its pending rows and transaction changes, taken from it."""

    __slots__ = ("plog", "rows", "changes")

    def __init__(self, plog: PgPartitionLog, rows: list[Row], changes: dict) -> None:
        self.plog, self.rows, self.changes = plog, rows, changes

    @property
    def live(self) -> bool:
        return not self.plog._retired

    @property
    def lost(self) -> bool:
        """(Cluster mode) its log was let go of since this was taken: never written, nor taken for committed."""
        return self.plog._lost is not None

    def write(self, cur) -> None:
        pid = self.plog.partition_id
        for (producer_id, first), row in self.changes.items():
            if row is None:
                cur.execute("DELETE FROM txns WHERE partition_id = %s AND producer_id = %s AND first_offset = %s",
                            (pid, producer_id, first))
            else:
                cur.execute("INSERT INTO txns (partition_id, producer_id, first_offset, epoch, end_offset, ranges) "
                            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (partition_id, producer_id, first_offset) "
                            "DO UPDATE SET epoch = excluded.epoch, end_offset = excluded.end_offset, "
                            "ranges = excluded.ranges", (pid, producer_id, first, *row))

    def committed(self) -> None:
        self.plog._committed_rows(self.rows)

    def give_back(self) -> None:
        self.plog._give_back(self.rows, self.changes)

    def fenced(self) -> None:
        """Not written: the partition's slot is another member's now (cluster mode)."""
        plog = self.plog
        error = plog._engine._lost(plog.topic, plog.partition)
        with plog.lock:  # (the rows taken for this commit were pending too)
            plog.cuts += 1
            plog.cut_error = error
        plog.lose(error)


def _pending_of(row: Row) -> _Pending:
    """A row that was to be committed, pending again."""
    pending = _Pending(row.start, row.base, row.pos)
    pending.end, pending.chunks, pending.size, pending.bounds = row.end, [row.data], row.size, row._bounds
    pending.max_ts, pending.time_ms = row.max_ts, row.time_ms
    return pending


def _end_offset(bound: tuple[int, int, int]) -> int:
    return bound[2]
