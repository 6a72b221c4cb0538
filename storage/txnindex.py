"""`TxnIndex`: the transactional writes of one partition — which offsets belong to an open, a committed or an
aborted transaction. From it come the partition's last stable offset (LSO: where the oldest open transaction
begins; readers that must not see uncommitted data stop there) and the aborted ranges they skip.

Format-agnostic: it records offsets and producer ids, never a batch, so it serves `kafka` topics (whose batches
also carry the producer id, and whose transaction markers are control batches in the log) and `tank` topics
(which keep neither) alike.

On disk, in the partition directory, `transactions.index`: fixed 32-byte entries, little-endian,

    kind u8 | flags u8 | producer_epoch i16 | producer_id i64 | first i64 | last i64 | crc32c u32 (of the 28 before)

    kind 1 DATA: the producer's transaction wrote offsets first..last (written before the batch itself)
    kind 2 END:  the producer's transaction ended (flags bit 0: committed, bit 1: a marker was written); first =
                 the marker's offset, or the log end when the format stores no marker; last = first

Entries come in offset order (appends, and each end with its marker, are serialised by the partition's lock).
Loading stops at the first torn or corrupt entry, and skips every entry that reaches past the log end (its batch
or marker was lost: recovery cut it), so a DATA entry written before a batch that never made it describes nothing;
the file is then rewritten without them. The file is synced with the partition, before the
data; with `reads_need_sync` (`flush: always`) the partition syncs a DATA entry before it writes the batch, since a
page written back early, or kept by a power cut, could otherwise put a batch on disk without the entry that says it
belongs to a transaction (under `interval`/`none` a cut may do so for the unsynced tail).
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field

from crc32c import crc32c

from .files import named
from .openfiles import OpenFiles, PooledFile

__all__ = ["TxnIndex", "TxnState", "AbortedTxn", "INDEX_NAME"]

INDEX_NAME = "transactions.index"
_ENTRY = struct.Struct("<BBhqqq")
_CRC = struct.Struct("<I")
ENTRY_SIZE = _ENTRY.size + _CRC.size  # 32
DATA, END = 1, 2
_COMMITTED, _MARKER = 1, 2
#: Rewrite the file once it holds this many entries more than the live ones (aborted ranges below the log start
#: and finished transactions are history).
_REWRITE_SLACK = 4096


@dataclass(slots=True)
class _Open:
    epoch: int
    first: int
    ranges: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction of this partition: its producer, its first offset, the offset of its end (the
    marker, or where the log ended when the format has none), and the exact ranges its batches hold."""

    producer_id: int
    first: int
    end: int
    ranges: tuple[tuple[int, int], ...]

    def covers(self, offset: int) -> bool:
        i = bisect.bisect_right(self.ranges, (offset, float("inf"))) - 1
        return i >= 0 and self.ranges[i][0] <= offset <= self.ranges[i][1]


class TxnState:
    """The transactions of one partition in memory — each producer's open one (its epoch and the ranges it wrote)
    and the aborted ones, by first offset — and what readers ask of them. `TxnIndex` keeps them in a file;
    `logway.storage.pg.txns.PgTxnIndex` in a table."""

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}
        self._aborted: list[AbortedTxn] = []  # by first offset

    def _apply(self, kind: int, flags: int, epoch: int, pid: int, first: int, last: int) -> None:
        if kind == DATA:
            txn = self._open.get(pid)
            if txn is None:
                txn = self._open[pid] = _Open(epoch, first)
            txn.ranges.append((first, last))
            return
        txn = self._open.pop(pid, None)
        if txn is not None and not flags & _COMMITTED:
            bisect.insort(self._aborted, AbortedTxn(pid, txn.first, first, tuple(txn.ranges)), key=_first)

    # -- reading -----------------------------------------------------------------------------------------
    def is_open(self, producer_id: int) -> bool:
        """Has the producer a transaction open in this partition?"""
        return producer_id in self._open

    def open_transactions(self) -> dict[int, tuple[int, int]]:
        """producer id -> (epoch, first offset) of every transaction still open in this partition."""
        return {pid: (t.epoch, t.first) for pid, t in self._open.items()}

    def last_stable_offset(self, high_watermark: int) -> int:
        """Where the oldest open transaction begins, or the high watermark when none is open."""
        if not self._open:
            return high_watermark
        return min(min(t.first for t in self._open.values()), high_watermark)

    def aborted(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with data in [start, end)."""
        out = []
        for txn in self._aborted:
            if txn.first >= end:
                break
            if txn.end >= start:
                out.append(txn)
        return out

    @property
    def has_open(self) -> bool:
        """Is a transaction open in this partition?"""
        return bool(self._open)

    @property
    def has_aborted(self) -> bool:
        return bool(self._aborted)


class TxnIndex(TxnState):
    def __init__(self, directory: str, log_start: int, log_end: int, files: OpenFiles) -> None:
        """`files`: the budget of open files the file is opened through (the engine's, as segments' files are)."""
        super().__init__()
        self.path = os.path.join(directory, INDEX_NAME)
        self._entries = 0
        #: Entries written since the last `sync()`.
        self.dirty = False
        #: The file was created or replaced since the last `sync()`: its directory must be synced too.
        self.new_name = False
        self._file = PooledFile(files, self.path, os.O_RDWR | os.O_APPEND)
        # Created by the first transactional write only: most partitions never have one.
        self._exists = os.path.exists(self.path)
        self.dropped = self._load(log_start, log_end) if self._exists else 0

    # -- loading -----------------------------------------------------------------------------------------
    def _load(self, log_start: int, log_end: int) -> int:
        """Replay the entries; returns the bytes cut (a torn or corrupt tail, or entries past the log end)."""
        handle = self._file.handle()
        with named(self.path):
            data = os.pread(handle.fd, os.fstat(handle.fd).st_size, 0)
        good = 0
        skipped = 0
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            body = data[pos:pos + _ENTRY.size]
            if _CRC.unpack_from(data, pos + _ENTRY.size)[0] != crc32c(body):
                break
            kind, flags, epoch, pid, first, last = _ENTRY.unpack(body)
            if kind not in (DATA, END) or last < first:
                break
            good = pos + ENTRY_SIZE
            # A DATA entry whose batch, or an END whose marker, is not in the log any more: it describes nothing.
            # Skipped, not a reason to stop: an index written before ends were kept in offset order may hold, after
            # it, the end of a transaction whose marker is further back (and still there).
            if last >= log_end if kind == DATA or flags & _MARKER else first > log_end:
                skipped += 1
                continue
            self._apply(kind, flags, epoch, pid, first, last)
        self._entries = good // ENTRY_SIZE - skipped
        dropped = len(data) - good + skipped * ENTRY_SIZE
        if good < len(data):
            os.ftruncate(handle.fd, good)
        if skipped:
            self.rewrite()  # the entries kept, without those that describe nothing
        self.prune(log_start)
        return dropped

    # -- writing -----------------------------------------------------------------------------------------
    def _write(self, kind: int, flags: int, epoch: int, pid: int, first: int, last: int) -> None:
        if not self._exists:
            self._file.create()
            self._exists = self.new_name = True
        handle = self._file.handle()
        os.write(handle.fd, _entry(kind, flags, epoch, pid, first, last))
        self._entries += 1
        self.dirty = True
        self._apply(kind, flags, epoch, pid, first, last)

    def add_data(self, producer_id: int, epoch: int, first: int, last: int) -> None:
        """The producer's open transaction is about to write offsets first..last (call before the batch)."""
        self._write(DATA, 0, epoch, producer_id, first, last)

    def undo_data(self, producer_id: int) -> None:
        """Take back the last `add_data` (its batch was not written): cut the entry off the file."""
        handle = self._file.handle()
        size = os.fstat(handle.fd).st_size - ENTRY_SIZE
        os.ftruncate(handle.fd, max(size, 0))
        self._entries -= 1
        txn = self._open.get(producer_id)
        if txn is not None:
            txn.ranges.pop()
            if not txn.ranges:
                del self._open[producer_id]

    def end(self, producer_id: int, epoch: int, *, committed: bool, offset: int, marker: bool) -> bool:
        """The producer's transaction ended: its marker is at `offset` (`marker`), or, for a format without
        markers, `offset` is the log end. False (nothing written) when the producer has no open transaction."""
        if producer_id not in self._open:
            return False
        flags = (_COMMITTED if committed else 0) | (_MARKER if marker else 0)
        self._write(END, flags, epoch, producer_id, offset, offset)
        return True

    def sync(self) -> bool:
        """Make the written entries durable; True when the file's name is new and its directory needs a sync."""
        if self.dirty and self._exists:
            handle = self._file.handle()
            with named(self.path):
                os.fdatasync(handle.fd)
            self.dirty = False
        new, self.new_name = self.new_name, False
        return new

    def forget_aborted(self, txns) -> None:
        """Forget these aborted transactions (the log cleaner removed their records and is about to remove their
        abort markers): the file is rewritten without them and synced before this returns (its name is durable
        with the next sync of the directory)."""
        gone = {(t.producer_id, t.first) for t in txns}
        self._aborted = [t for t in self._aborted if (t.producer_id, t.first) not in gone]
        self.rewrite()

    def prune(self, log_start: int) -> None:
        """Forget aborted transactions entirely below the log start; rewrite the file when it is mostly history."""
        self._aborted = [t for t in self._aborted if t.end >= log_start]
        live = sum(len(t.ranges) for t in self._open.values()) + sum(len(t.ranges) + 1 for t in self._aborted)
        if self._entries - live > _REWRITE_SLACK:
            self.rewrite()

    def rewrite(self) -> None:
        """Replace the file with the live entries only (aborted ranges still above the log start, open
        transactions); synced before it replaces the old content."""
        out = bytearray()
        count = 0
        for txn in self._aborted:
            for first, last in txn.ranges:
                out += _entry(DATA, 0, 0, txn.producer_id, first, last)
            out += _entry(END, 0, 0, txn.producer_id, txn.end, txn.end)  # (no marker: never cut)
            count += len(txn.ranges) + 1
        for pid, txn in self._open.items():
            for first, last in txn.ranges:
                out += _entry(DATA, 0, txn.epoch, pid, first, last)
            count += len(txn.ranges)
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, bytes(out))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)  # the partition syncs its directory with its next sync
        self._file.close()  # (the next use opens the new file)
        self._exists = True
        self._entries = count
        self.new_name = True

    @property
    def exists(self) -> bool:
        """Whether the file was created (by the first transactional write)."""
        return self._exists

    def close(self) -> None:
        self._file.close()


def _entry(kind: int, flags: int, epoch: int, pid: int, first: int, last: int) -> bytes:
    """One entry as stored: the fields and their CRC-32C."""
    body = _ENTRY.pack(kind, flags, epoch, pid, first, last)
    return body + _CRC.pack(crc32c(body))


def _first(txn: AbortedTxn) -> int:
    return txn.first
