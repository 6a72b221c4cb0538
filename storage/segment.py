"""One segment of a partition log: a data file of stored batches plus its sparse offset and time indexes.

On disk, in the partition directory, with `<base>` the segment's base offset as 20 zero-padded digits:
- `<base>.log`: batches back to back, each exactly as its storage format stores it (for `kafka`, a
  RecordBatch v2 whose baseOffset is the batch's absolute offset). No file header, no padding.
- `<base>.index` and `<base>.timeindex`: see `logway.storage.index`.
- `<base>.checksums`, only for formats whose batches carry no checksum of their own (TANK): see
  `logway.storage.checksums`.
- `<base>.cleaned`, only for a segment the log cleaner wrote (`logway.storage.cleaner`): the offset just after the
  segment (decimal text). The cleaner leaves gaps where it removed records — between batches, before the first one,
  after the last — so such a segment's batches may skip ahead, hold fewer records than the offsets they cover
  (`validate_cleaned`), and end before the segment does.
A segment covers offsets [base_offset, next_offset). Only the partition's last segment (the active one) is
appended to; older ones are frozen and only read or deleted whole. In memory, the active segment keeps where its
last appended batches lie (`RecentBatches`) and the last one's bytes, for the readers near its end. Its files are
opened through the engine's budget of open files (`logway.storage.openfiles`): when used, and let go when others
were used since — whoever uses a descriptor holds its `FileHandle` meanwhile.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import weakref
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Iterator

from crc32c import crc32c

from .checksums import Checksums
from .config import MAX_SEGMENT_BYTES
from .files import named, preallocate
from .formats import BatchFormat
from .index import IndexCorrupt, OffsetIndex, TimeIndex, sample_points
from .openfiles import FileHandle, OpenFiles, PooledFile

#: Index entries hold offsets relative to the segment base as u32: roll before that overflows.
MAX_RELATIVE_OFFSET = 2**32 - 2
#: Offsets are signed 64-bit in every protocol that names them (Kafka): nothing may go past this.
MAX_OFFSET = 2**63 - 1
#: How far a batch that carries its own offsets (TANK's ProduceWithSeqnum, sparse bundles) may reach: such batches
#: may jump ahead of the log end, but a log whose end reached MAX_OFFSET could never be appended to again, so
#: nothing past this is accepted (it leaves 2^62 offsets after the furthest jump). Segments based beyond it (left by
#: an older logway that took such a jump) are set aside when their partition is opened.
MAX_JUMP_OFFSET = 2**62

log = logging.getLogger("logway.storage")

#: Bytes read at a time while walking batch headers (reads, lookups): index entries are ~4 KiB apart.
HEADER_CHUNK = 8 * 1024
#: Bytes read at a time while validating whole batches (recovery).
RECOVERY_CHUNK = 4 * 1024 * 1024
#: The active segment reserves disk blocks ahead of its end (fallocate KEEP_SIZE) as it grows: each reservation is
#: as large as the segment already is, up to this, and at least the batch being appended — so a partition reserves
#: about what it has written (a few bytes for an idle one), and one written steadily reserves once per this many
#: bytes (appends into reserved blocks are markedly cheaper).
PREALLOCATE_BYTES = 16 * 1024 * 1024
#: Blocks found reserved past the end of an active segment when it is opened beyond this were left by a process that
#: did not close it (a crash): recovery gives them back.
LEFTOVER_RESERVATION_BYTES = 64 * 1024
#: The last appended batch is kept in memory up to this size (tailing readers get it without a file read).
KEEP_LAST_BATCH_BYTES = 16 * 1024
#: Lookups (`locate`, `range_end`) remembered for the next reader that asks the same, across the segments sharing
#: one `Lookups` (an engine's: ~250 bytes each, so a few MiB at most): readers that walk a partition from the same
#: offset with the same byte budget ask the same questions. Forgotten all at once when full.
REMEMBERED_LOOKUPS = 16 * 1024
#: The active segment keeps the places of at least this many of the batches appended last (at most twice as many;
#: 32 bytes each): readers near the tail — a long-poll woken a few batches behind the end, a consumer that has
#: caught up — find their batch and the end of their range by bisection instead of an index lookup and a walk over
#: headers read from the file.
RECENT_BATCHES = 256


#: The suffix of the file that marks a segment the log cleaner wrote, holding the offset just after it.
CLEANED = ".cleaned"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def read_cleaned_end(path: str) -> int | None:
    """The offset a `.cleaned` file holds, None when there is none (a segment the cleaner never wrote). The file is
    written synced before the segment's data takes its name, so anything but an offset is damage: the segment's
    own batches tell where it ends then (an error line says so)."""
    try:
        with open(path, "rb") as f:
            text = f.read(32).strip()
    except FileNotFoundError:
        return None
    if not text.isdigit() or int(text) > MAX_OFFSET:
        log.error("%s holds %r, not an offset: the segment ends after its last batch", path, text[:32])
        return None
    return int(text)


@dataclass(slots=True)
class WalkResult:
    """What a recovery walk over a segment found."""

    end_position: int  # just past the last good batch
    end_offset: int  # offset after the last good batch
    max_timestamp: int
    index_entries: list[tuple[int, int]]
    time_entries: list[tuple[int, int]]
    bytes_since_index: int
    problem: str | None  # why the walk stopped before the end of the file, if it did
    checksums: list[tuple[int, int]]  # (position, crc32c) of every batch walked (formats without their own CRC)


class Lookups:
    """The bound on the lookups remembered by the segments that share it. Each segment keeps its own answers (a
    dict per kind, keyed by what was asked: no key to build on the hot path); this counts them, and when
    `max_entries` were remembered since the last time, every segment holding some forgets them at once — so
    segments read once and never again (a log walked from the start) do not each keep theirs for good."""

    __slots__ = ("max_entries", "entries", "_holders")

    def __init__(self, max_entries: int = REMEMBERED_LOOKUPS) -> None:
        self.max_entries = max_entries
        self.entries = 0
        #: Weakly: a deleted segment keeps its data descriptor (and so its disk space) until it is dropped.
        self._holders: weakref.WeakSet[Segment] = weakref.WeakSet()

    def room(self, segment: "Segment") -> None:
        """Count one more answer about to be remembered by `segment` (clearing all first when full)."""
        if self.entries >= self.max_entries:
            holders, self._holders = self._holders, weakref.WeakSet()
            for held in holders:
                held._located.clear()
                held._ranges.clear()
            self.entries = 0
        self.entries += 1
        self._holders.add(segment)


class RecentBatches:
    """Where the batches appended last lie: position, end, first and last offset of each, oldest first, one after
    the other in the file (each starts where the one before ends) up to the segment's end. `locate` and `range_end`
    answer what `Segment`'s namesakes would find by walking headers, or None when the batches asked about are older
    than those kept (or not visible below `end`): the caller walks then."""

    __slots__ = ("pos", "end", "first", "last")

    def __init__(self) -> None:
        self.pos, self.end, self.first, self.last = array("q"), array("q"), array("q"), array("q")

    def add(self, position: int, size: int, first_offset: int, last_offset: int) -> None:
        if len(self.pos) >= 2 * RECENT_BATCHES:
            for column in (self.pos, self.end, self.first, self.last):
                del column[:RECENT_BATCHES]
        self.pos.append(position)
        self.end.append(position + size)
        self.first.append(first_offset)
        self.last.append(last_offset)

    def clear(self) -> None:
        for column in (self.pos, self.end, self.first, self.last):
            del column[:]

    def locate(self, offset: int, end: int) -> tuple[int, int] | None:
        """(position, first offset) of the batch holding `offset` or the first after it, if kept and below `end`."""
        first = self.first
        if not first or offset < first[0]:
            return None
        i = bisect_left(self.last, offset)
        if i == len(first) or self.end[i] > end:
            return None
        return self.pos[i], first[i]

    def range_end(self, start: int, target: int, end: int) -> tuple[int, int] | None:
        """End position and end offset of the batches from the one at `start` that end by `target` (at least that
        one), if it is kept and they lie below `end`."""
        pos = self.pos
        if not pos or start < pos[0]:
            return None
        j = bisect_left(pos, start)
        if j == len(pos) or pos[j] != start:
            return None
        k = max(bisect_right(self.end, target) - 1, j)
        stop = self.end[k]
        return (stop, self.last[k] + 1) if stop <= end else None


_UIDS = itertools.count()
#: What a frozen segment has of `RecentBatches`: nothing (never appended to).
NO_RECENT_BATCHES = RecentBatches()


class Segment:
    __slots__ = (
        "directory", "base_offset", "fmt", "log_path", "index", "timeindex", "size", "next_offset",
        "max_timestamp", "created_ms", "bytes_since_index", "index_interval", "_data", "active", "_reserved",
        "checksums", "indexes_rebuilt", "last_batch", "recent", "generation", "uid", "_located", "_ranges",
        "_lookups", "cleaned_end", "__weakref__",
    )

    def __init__(self, directory: str, base_offset: int, fmt: BatchFormat, *, active: bool,
                 index_interval: int, created_ms: int, lookups: Lookups, files: OpenFiles) -> None:
        """`lookups`: the bound on the lookups remembered, shared with other segments (the engine's); `files`: the
        budget of open files its files are opened through (the engine's, see logway.storage.openfiles)."""
        self.directory = directory
        self.base_offset = base_offset
        self.fmt = fmt
        self.active = active
        self.index_interval = index_interval
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + ".log"
        self._data = PooledFile(files, self.log_path, os.O_RDWR | os.O_APPEND if active else os.O_RDONLY,
                                create=active)
        self.index = self.timeindex = self.checksums = None
        try:
            self.size = os.path.getsize(self.log_path)
            self.index = OffsetIndex(stem + ".index", frozen=not active, files=files)
            self.timeindex = TimeIndex(stem + ".timeindex", frozen=not active, files=files)
            if not getattr(fmt, "checksummed", True):
                self.checksums = Checksums(stem + ".checksums", frozen=not active, files=files)
        except BaseException:  # (out of descriptors or inodes): what was opened is let go
            for part in (self.index, self.timeindex, self.checksums, self._data):
                if part is not None:
                    part.close()
            raise
        self._reserved = self.size  # blocks reserved up to here (only the active segment reserves)
        #: A segment the log cleaner wrote: the offset just after it, as its `.cleaned` file says (None otherwise).
        self.cleaned_end = None if active else read_cleaned_end(stem + CLEANED)
        self.next_offset = base_offset
        self.max_timestamp = self.timeindex.last_timestamp
        self.created_ms = created_ms
        self.bytes_since_index = 0
        self.indexes_rebuilt = False  # set by `recover` when it rewrote the indexes
        #: (position, first offset, size, last offset, bytes or None) of the batch appended last by this process:
        #: a tailing reader asks for it, and finds it without scanning headers from the index point — and, when
        #: it is small (≤ `KEEP_LAST_BATCH_BYTES`), without reading the file.
        self.last_batch: tuple[int, int, int, int, bytes | None] | None = None
        #: Bumped when bytes that were appended are cut again (`rollback`): whatever was derived from the
        #: segment's bytes before (remembered lookups here, transcoded reads in the gateway) no longer holds.
        #: The places of the batches this process appended last, while the segment is active (a frozen one holds
        #: the shared empty `NO_RECENT_BATCHES`: thousands of segments would otherwise each carry four arrays).
        self.recent = RecentBatches() if active else NO_RECENT_BATCHES
        self.generation = 0
        #: Unique to this object in the process: what caches key on (a `Segment` held by one would keep a deleted
        #: file's descriptor, and so its disk space).
        self.uid = next(_UIDS)
        self._located: dict[int, tuple[int, int]] = {}  # offset -> `locate`'s answer
        self._ranges: dict[tuple[int, int], tuple[int, int]] = {}  # (start, max_bytes) -> `range_end`'s answer
        self._lookups = lookups

    # -- file access -------------------------------------------------------------------------------------
    def handle(self) -> FileHandle:
        """The data file's open descriptor (opened when the engine's `OpenFiles` let it go), e.g. for os.sendfile:
        hold the handle while the descriptor is used, never only its number."""
        return self._data.handle()

    def pread(self, position: int, length: int) -> bytes:
        handle = self._data.handle()
        return os.pread(handle.fd, length, position)

    # -- appending ---------------------------------------------------------------------------------------
    def append(self, pieces, length: int, first_offset: int, last_offset: int, max_timestamp: int) -> None:
        """Write one batch (as `pieces`, for writev) that covers first_offset..last_offset."""
        position = self.size
        handle = self._data.handle()
        fd = handle.fd
        with named(self.log_path):
            if position + length > self._reserved:
                self._reserve(fd, position, length)
            written = os.writev(fd, pieces)
            if written != length:  # short write (disk full mid-batch): finish or roll back
                try:
                    rest = b"".join(bytes(p) for p in pieces)[written:]
                    while rest:
                        n = os.write(fd, rest)
                        rest = rest[n:]
                except OSError:
                    os.ftruncate(fd, position)
                    raise
        if self.checksums is not None:
            crc = 0
            for piece in pieces:
                crc = crc32c(piece, crc)
            try:
                self.checksums.append(position, crc)
            except OSError:
                os.ftruncate(fd, position)
                raise
        self.size = position + length
        rel = first_offset - self.base_offset
        if position == 0 or self.bytes_since_index >= self.index_interval:
            self.index.append(rel, position)
            self.timeindex.maybe_append(max(max_timestamp, self.max_timestamp), rel)
            self.bytes_since_index = 0
        self.bytes_since_index += length
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
        self.next_offset = last_offset + 1
        self.recent.add(position, length, first_offset, last_offset)
        self.last_batch = (position, first_offset, length, last_offset,
                           (pieces[0] if len(pieces) == 1 and type(pieces[0]) is bytes else b"".join(pieces))
                           if length <= KEEP_LAST_BATCH_BYTES else None)

    def _reserve(self, fd: int, position: int, length: int) -> None:
        """Reserve blocks for an append of `length` bytes at `position` and as many again as the segment holds (up
        to PREALLOCATE_BYTES). A full disk is reported here, before a byte of the batch is written: OSError when not
        even the batch fits."""
        want = max(length, min(position, PREALLOCATE_BYTES))
        try:
            reserved = preallocate(fd, position, want)
        except OSError as exc:
            if want == length or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            want = length  # room for the batch alone, perhaps
            reserved = preallocate(fd, position, want)
        self._reserved = position + want if reserved else 1 << 62  # (False: the file system cannot; never again)

    def rollback(self, size: int) -> None:
        """Undo a failed write: cut the data file back to `size` bytes."""
        handle = self._data.handle()
        with named(self.log_path):
            os.ftruncate(handle.fd, size)
        self.size = size
        self._forget()
        if self.checksums is not None:
            self.checksums.cut(size)

    def _forget(self) -> None:
        """Bytes were cut: nothing derived from them holds any more."""
        self.last_batch = None
        self.recent.clear()
        self.generation += 1
        self._located.clear()
        self._ranges.clear()

    def freeze(self) -> None:
        """Stop being the active segment: the final time-index entry goes down, files reopen read-only."""
        if self.next_offset > self.base_offset:
            self.timeindex.maybe_append(self.max_timestamp, self.index.last()[0] if len(self.index) else 0)
        self.index.freeze()
        self.timeindex.freeze()
        if self.checksums is not None:
            self.checksums.freeze()
        self._release_reserved()
        self._data.flags = os.O_RDONLY  # (when opened again)
        self.recent = NO_RECENT_BATCHES  # (its readers are few now: they walk)
        self.active = False

    def _release_reserved(self) -> None:
        """Give back blocks reserved past the end (the file size is unchanged; ftruncate frees them)."""
        if self._reserved > self.size and self.active:
            handle = self._data.handle()
            os.ftruncate(handle.fd, self.size)
            self._reserved = self.size

    def _release_leftover(self) -> None:
        """Give back blocks a crashed process left reserved past the end of the active segment."""
        handle = self._data.handle()
        st = os.fstat(handle.fd)
        if st.st_blocks * 512 > st.st_size + LEFTOVER_RESERVATION_BYTES:
            os.ftruncate(handle.fd, st.st_size)

    def sync(self, *, indexes: bool = False) -> None:
        """fdatasync the data (and its checksums); with `indexes`, the offset and time indexes too (a frozen
        segment's, once: recovery trusts a frozen segment's index, it rebuilds only the active one's)."""
        handle = self._data.handle()
        with named(self.log_path):
            os.fdatasync(handle.fd)
        if self.checksums is not None:
            self.checksums.sync()
        if indexes:
            self.index.sync()
            self.timeindex.sync()

    def sync_indexes_if_room(self) -> None:
        """Sync the active segment's indexes at a clean shutdown as far as the file system takes their entries: on a
        full disk what is pending stays unwritten, and the shutdown stays clean all the same — recovery trusts the
        active segment's index only up to its last entry and walks the batches after it (an empty one is rebuilt)."""
        for index in (self.index, self.timeindex):
            try:
                index.sync()
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise

    # -- reading -----------------------------------------------------------------------------------------
    def headers(self, position: int, offset: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
        """Walk batch headers from `position` (a batch start whose first offset is `offset`) up to `end`.

        Yields (position, first_offset, size, last_offset, max_timestamp) of each whole batch.
        """
        fmt = self.fmt
        need = fmt.header_size
        buf = memoryview(b"")
        buf_start = position
        handle = self._data.handle()  # (held while the walk lasts)
        fd = handle.fd
        while position < end:
            rel = position - buf_start
            if rel + need > len(buf):
                buf = memoryview(os.pread(fd, min(max(HEADER_CHUNK, need), end - position), position))
                buf_start, rel = position, 0
            info = fmt.scan(buf, rel)
            if info is None:
                return
            size, base, delta, max_ts = info
            if base is None:
                base = offset
            if size <= 0 or position + size > end:
                return
            yield position, base, size, base + delta, max_ts
            position += size
            offset = base + delta + 1

    def starts_at_own_base(self) -> bool:
        """True when the first batch names the segment's base offset itself (the roll of a far jump)."""
        try:
            info = self.fmt.scan(memoryview(self.pread(0, self.fmt.header_size)), 0)
        except ValueError:
            return False
        return info is not None and info[1] == self.base_offset

    def locate(self, offset: int, end: int) -> tuple[int, int] | None:
        """(position, first offset) of the batch holding `offset` (or the first batch after it), below `end`."""
        last = self.last_batch
        if last is not None and last[1] <= offset <= last[3] and last[0] + last[2] <= end:
            return last[0], last[1]
        located = self.recent.locate(offset, end)
        if located is not None:
            return located
        located = self._located.get(offset)
        if located is not None and located[0] < end:
            return located
        rel, pos = self.index.floor_offset(max(offset - self.base_offset, 0))
        for position, first, _size, last, _ts in self.headers(pos, self.base_offset + rel, end):
            if last >= offset:
                self._lookups.room(self)
                self._located[offset] = (position, first)
                return position, first
        return None

    def range_end(self, start: int, start_offset: int, max_bytes: int, end: int) -> tuple[int, int]:
        """End position and end offset of the whole batches from `start` that fit in max_bytes (at least one)."""
        target = start + max_bytes
        if target >= end:
            return end, -1  # -1: everything to the segment end; the caller knows that end offset
        known = self.recent.range_end(start, target, end)
        if known is not None:
            return known
        known = self._ranges.get((start, max_bytes))
        if known is not None:
            return known  # (its batches ended before target < end then, and still do)
        rel, pos = self.index.floor_position(target)
        if pos <= start:
            pos, first = start, start_offset
        else:
            first = self.base_offset + rel
        # Every batch between start and pos is whole and ends at or before target.
        stop, stop_offset = pos, first
        for position, first_off, size, last, _ts in self.headers(pos, first, end):
            if position + size > target and position > start:
                break
            stop, stop_offset = position + size, last + 1
            if stop >= target:
                break
        self._lookups.room(self)
        self._ranges[(start, max_bytes)] = (stop, stop_offset)
        return stop, stop_offset

    def time_lookup(self, timestamp: int, end: int) -> tuple[int, int, int] | None:
        """(position, first offset, size) of the first batch whose max timestamp >= timestamp."""
        rel = self.timeindex.floor_before(timestamp)
        start_rel, pos = self.index.floor_offset(rel)
        for position, first, size, _last, max_ts in self.headers(pos, self.base_offset + start_rel, end):
            if max_ts >= timestamp:
                return position, first, size
        return None

    # -- recovery ----------------------------------------------------------------------------------------
    def walk(self, position: int, offset: int, *, validate: bool, check_side: bool = True) -> WalkResult:
        """Scan (and with `validate`, checksum) every batch from `position` to the end of the file.

        Stops at the first torn, corrupt or out-of-sequence batch, and — for formats with side checksums, unless
        `check_side` is False (rebuilding them) — at the first batch whose side checksum is missing or differs.
        Index and time-index entries are recomputed for every batch seen, as appends would have made them. A read
        that fails (an I/O error) raises, naming the file: that is no bad batch, and nothing is cut for it.
        """
        with named(self.log_path):
            return self._walk(position, offset, validate, check_side)

    def _walk(self, position: int, offset: int, validate: bool, check_side: bool) -> WalkResult:
        fmt = self.fmt
        side = None
        crcs: list[tuple[int, int]] = []
        if validate and self.checksums is not None:
            side = self.checksums.entries_from(position) if check_side else iter(())
            expected = next(side, None)
        cleaned = self.cleaned_end is not None
        explicit = cleaned or bool(getattr(fmt, "explicit_offsets", False))  # (what may skip ahead)
        check = fmt.validate_cleaned if cleaned else fmt.validate
        handle = self._data.handle()  # (held while the walk lasts)
        fd = handle.fd
        file_size = os.fstat(fd).st_size
        entries: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        max_ts = -1
        since = self.index_interval  # the first batch walked is always an index point
        buf = memoryview(b"")
        buf_start = position
        problem = None
        while position < file_size:
            rel = position - buf_start
            if rel + fmt.header_size > len(buf) and buf_start + len(buf) < file_size:
                buf = memoryview(os.pread(fd, RECOVERY_CHUNK, position))
                buf_start, rel = position, 0
            try:
                info = fmt.scan(buf, rel)
            except ValueError as exc:
                problem = f"bad batch header at position {position}: {exc}"
                break
            if info is None:
                problem = f"torn batch header at position {position}"
                break
            size, base, delta, ts = info
            if size <= 0 or size > MAX_SEGMENT_BYTES or delta < 0:
                problem = f"impossible batch size {size} at position {position}"
                break
            if position + size > file_size:
                problem = f"torn batch at position {position} ({size} bytes declared, {file_size - position} left)"
                break
            if base is not None and (base < offset if explicit else base != offset):
                problem = f"batch at position {position} has offset {base}, expected {offset}"
                break
            first = offset if base is None else base  # `offset` moves only once the batch is accepted
            if first + delta >= MAX_OFFSET or first + delta - self.base_offset > MAX_RELATIVE_OFFSET:
                # Appends refuse such a batch (PartitionLog._append_locked), so this is garbage, not data.
                problem = f"batch at position {position} reaches offset {first + delta}, outside the segment"
                break
            if validate:
                if rel + size > len(buf):
                    buf = memoryview(os.pread(fd, max(RECOVERY_CHUNK, size), position))
                    buf_start, rel = position, 0
                try:
                    check(buf[rel:rel + size])
                except ValueError as exc:
                    problem = f"corrupt batch at position {position}: {exc}"
                    break
                if side is not None:
                    crc = crc32c(buf[rel:rel + size])
                    if check_side:
                        while expected is not None and expected[0] < position:
                            expected = next(side, None)
                        if expected is None or expected[0] != position:
                            problem = f"no checksum for the batch at position {position}"
                            break
                        if expected[1] != crc:
                            problem = f"checksum mismatch for the batch at position {position}"
                            break
                    crcs.append((position, crc))
            if since >= self.index_interval:
                entries.append((first - self.base_offset, position))
                if max(ts, max_ts) > (times[-1][0] if times else -1):
                    times.append((max(ts, max_ts), first - self.base_offset))
                since = 0
            since += size
            max_ts = max(max_ts, ts)
            position += size
            offset = first + delta + 1
        return WalkResult(position, offset, max_ts, entries, times, since, problem, crcs)

    def _check_index_points(self, file_size: int) -> None:
        """Raise IndexCorrupt unless a sample of index entries each point at a batch header that parses and
        starts at the entry's offset. Catches a data file that was replaced or overwritten (garbage, another
        segment's data) under an intact index, which the tail walk alone would trust."""
        fmt = self.fmt
        for i in sample_points(len(self.index)):
            rel, position = self.index.entry(i)
            head = self.pread(position, fmt.header_size)
            try:
                info = fmt.scan(memoryview(head), 0)
            except ValueError as exc:
                raise IndexCorrupt(f"{self.log_path}: no valid batch at position {position}, where index entry {i} "
                                   f"points ({exc})") from None
            if info is None:
                if len(head) < fmt.header_size:
                    continue  # near the end of the file: the tail walk decides
                raise IndexCorrupt(f"{self.log_path}: no valid batch at position {position}, where index entry {i} "
                                   f"points")
            size, base = info[0], info[1]
            if size <= 0 or position + size > file_size or (base is not None and base != self.base_offset + rel):
                raise IndexCorrupt(f"{self.log_path}: the batch at position {position} does not match index entry "
                                   f"{i} (offset {self.base_offset + rel})")

    def recover(self, *, full: bool, legacy_checksums: bool = True) -> int:
        """Make the segment consistent: validate, truncate a bad tail, rebuild a damaged index.

        With `full`, every batch is checksummed and the indexes are rebuilt from scratch; otherwise the index is
        sanity-checked and only the batches after its last entry are validated. Returns bytes truncated.
        A format with side checksums whose checksum file is missing: with `legacy_checksums` (the partition was
        written by an older logway) the file is rebuilt from the data; without, the data cannot be verified and
        the segment is emptied (see logway.storage.checksums).
        """
        self.size = file_size = os.path.getsize(self.log_path)
        start_pos, start_off = 0, self.base_offset
        keep_entries = 0
        rebuild_side = self.checksums is not None and not self.checksums.found and file_size > 0
        if rebuild_side and not legacy_checksums:
            log.warning("%s: its checksum file never reached the disk, so its %d bytes cannot be verified; "
                        "emptying it", self.log_path, file_size)
            return self._empty(file_size)
        if rebuild_side:
            log.warning("%s: no checksum file (written by an older logway): rebuilding it from the data",
                        self.log_path)
            full = True
        if not full:
            try:
                self.index.sanity_check(file_size)
                self._check_index_points(file_size)
                self.timeindex.sanity_check(self.index)
                n = len(self.index)
                if n:
                    rel, start_pos = self.index.entry(n - 1)
                    start_off = self.base_offset + rel
                    keep_entries = n - 1
            except IndexCorrupt as exc:
                log.warning("%s; rebuilding it", exc)
                full = True
        result = self.walk(start_pos, start_off, validate=True, check_side=not rebuild_side)
        if result.problem:
            log.warning("%s: %s; truncating %d bytes", self.log_path, result.problem, file_size - result.end_position)
        entries = [self.index.entry(i) for i in range(keep_entries)] + result.index_entries
        if full or result.problem or len(self.index) != len(entries):
            self.indexes_rebuilt = True
            self.index.reset(entries)
            old_times = [] if full else [t for t in self.timeindex.entries() if t[1] < (start_off - self.base_offset)]
            times = []
            for ts, rel in old_times + result.time_entries:
                if not times or ts > times[-1][0]:
                    times.append((ts, rel))
            self.timeindex.reset(times)
        truncated = file_size - result.end_position
        if truncated:
            self._cut_file(result.end_position)
            self._forget()
        elif self.active:
            self._release_leftover()
        if rebuild_side:
            self.checksums.reset(result.checksums)
        elif self.checksums is not None:
            self.checksums.cut(result.end_position)
        self.size = result.end_position
        self.next_offset = result.end_offset
        if self.cleaned_end is not None and not truncated:  # (its last records may have been cleaned away)
            self.next_offset = max(self.next_offset, self.cleaned_end)
        self.max_timestamp = max(self.timeindex.last_timestamp, result.max_timestamp)
        self.bytes_since_index = result.bytes_since_index
        return truncated

    def _cut_file(self, size: int) -> None:
        fd = os.open(self.log_path, os.O_RDWR)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _empty(self, file_size: int) -> int:
        """Cut the data file and its side files to nothing (an unverifiable segment); returns the bytes cut."""
        self._cut_file(0)
        self.index.reset([])
        self.timeindex.reset([])
        self.checksums.reset([])
        self.size = self.bytes_since_index = 0
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        return file_size

    # -- lifecycle ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Let go of the files (closed once no reader holds them): the indexes' pending entries are written when
        the file system takes them, blocks reserved past the end given back."""
        self.index.close()
        self.timeindex.close()
        if self.checksums is not None:
            self.checksums.close()
        try:
            self._release_reserved()
        except OSError:  # (an I/O error: the next open gives them back)
            pass
        self._data.close()

    def delete(self) -> None:
        """Remove the files. The data descriptor stays open until the segment object is dropped, so a reader
        that holds the segment can finish (Linux keeps unlinked files readable)."""
        try:
            self._data.keep()  # open it now: a reader holding this segment must not find the name gone
        except FileNotFoundError:
            pass
        self.index.delete()
        self.timeindex.delete()
        if self.checksums is not None:
            self.checksums.delete()
        for path in (self.log_path, self.log_path[:-len(".log")] + CLEANED):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def side_paths(self) -> list[str]:
        """The paths of the files beside the data file that exist: indexes, checksums, the cleaner's end."""
        stem = self.log_path[:-len(".log")]
        paths = [self.index.path, self.timeindex.path, stem + CLEANED]
        if self.checksums is not None:
            paths.append(self.checksums.path)
        return [p for p in paths if os.path.lexists(p)]
