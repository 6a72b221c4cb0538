"""Sparse per-segment indexes: offset → file position, and timestamp → offset.

On disk (little-endian, fixed-size entries, append-only, derived data that recovery can always rebuild):
- `<base>.index`: entries of `relative_offset u32 | position u32` (8 bytes). Relative offset = the first offset of
  an indexed batch minus the segment's base offset; position = where that batch starts in the data file. The
  first batch of a segment is always indexed, then one batch after every `index_interval_bytes` written.
- `<base>.timeindex`: entries of `timestamp i64 | relative_offset u32` (12 bytes): "every record at or before the
  batch starting at relative_offset has a timestamp <= timestamp". Written at index points when the segment's
  maximum timestamp grew, and once more when the segment is rolled.

The active segment keeps its offset-index entries in an `array` (bounded by the segment size) and writes new
entries behind, a few hundred at a time; a frozen segment's index is memory-mapped on first use, so memory does
not grow with the size of the log. Files and mappings are opened through the engine's `OpenFiles` (see
`logway.storage.openfiles`): let go when others were used since, opened again when used.
"""

from __future__ import annotations

import errno
import operator
import os
import struct
import sys
import weakref
from array import array

from .files import named, sync_file, write_synced
from .openfiles import OpenFiles, PooledFile, not_open

ENTRY = struct.Struct("<II")
TIME_ENTRY = struct.Struct("<qI")
_LITTLE = sys.byteorder == "little"
#: Opening a segment checks this many index entries (spread over the index, first and last included) against the
#: data and the offset index: enough to catch a file replaced by garbage, without reading a 1 GiB segment whole.
SAMPLED_ENTRIES = 8
#: New entries are written in groups of this many bytes (and on sync, roll and close): the index is derived data
#: that recovery rebuilds from the last entry on disk, so it need not cost a syscall per batch.
WRITE_BEHIND_BYTES = 1024


class IndexCorrupt(Exception):
    """The index file fails its sanity check; the segment rebuilds it from the data file."""


def sample_points(n: int) -> list[int]:
    """Indexes of up to SAMPLED_ENTRIES entries of n, spread evenly, the first and the last included."""
    if n <= 0:
        return []
    return sorted({0, n - 1, *(n * k // (SAMPLED_ENTRIES - 1) for k in range(1, SAMPLED_ENTRIES - 1))})


class OffsetIndex:
    """Sparse offset index of one segment. Its entries are a flat sequence rel0, pos0, rel1, pos1, ...: an array in
    memory for the active segment, a mapping of the file (through the engine's `OpenFiles`, so let go when others
    were used since) for a frozen one."""

    __slots__ = ("path", "_file", "_entries", "_mapped", "frozen", "_pending", "_files")

    def __init__(self, path: str, *, frozen: bool, files: OpenFiles) -> None:
        self.path = path
        self.frozen = frozen
        self._files = files
        #: Where new entries are written (opened when they are: a frozen index only to write what a full disk kept
        #: from being written before its segment rolled).
        self._file = PooledFile(files, path, os.O_RDWR | os.O_APPEND, create=not frozen)
        self._entries: array | None = None  # the entries, when held in memory (the active segment's)
        self._mapped = not_open  # a weak reference to the mapping of a frozen index (`Mapped`)
        self._pending = bytearray()

    # -- loading -----------------------------------------------------------------------------------------
    def _load(self):
        entries = self._entries
        if entries is not None:
            return entries
        mapped = self._mapped()
        if mapped is not None:
            mapped.used = True
            return mapped.view
        size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
        usable = size - size % ENTRY.size
        if self.frozen and _LITTLE and usable:
            mapped = self._files.map(self.path, usable, "I")
            self._mapped = weakref.ref(mapped)
            return mapped.view
        self._entries = arr = self._read_file(usable)
        return arr

    def _read_file(self, size: int) -> array:
        """The first `size` bytes of entries, read from the file."""
        arr = array("I")
        if size:
            with open(self.path, "rb") as f, named(self.path):
                arr.frombytes(f.read(size))
            if not _LITTLE:
                arr.byteswap()
        return arr

    def __len__(self) -> int:
        return len(self._load()) // 2

    def entry(self, i: int) -> tuple[int, int]:
        e = self._load()
        return e[2 * i], e[2 * i + 1]

    def last(self) -> tuple[int, int] | None:
        n = len(self)
        return self.entry(n - 1) if n else None

    # -- lookups -----------------------------------------------------------------------------------------
    def floor_offset(self, rel: int) -> tuple[int, int]:
        """The last entry whose relative offset is <= rel, or (0, 0) when none is."""
        return self._floor(0, rel)

    def floor_position(self, position: int) -> tuple[int, int]:
        """The last entry whose file position is <= position, or (0, 0) when none is."""
        return self._floor(1, position)

    def _floor(self, column: int, value: int) -> tuple[int, int]:
        e = self._load()
        lo, hi = 0, len(e) // 2
        while lo < hi:
            mid = (lo + hi) >> 1
            if e[2 * mid + column] <= value:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return 0, 0
        return e[2 * lo - 2], e[2 * lo - 1]

    # -- writing -----------------------------------------------------------------------------------------
    def append(self, rel: int, position: int) -> None:
        assert not self.frozen, "append to a frozen index"
        entries = self._load()
        entries.append(rel)
        entries.append(position)
        pending = self._pending
        pending += ENTRY.pack(rel, position)
        if len(pending) >= WRITE_BEHIND_BYTES:
            write_behind(self)

    def flush(self) -> None:
        """Write the entries that are only in memory so far."""
        _write_pending(self._file, self._pending)

    def sync(self) -> None:
        """Write what is only in memory and make the file durable (a frozen segment's index is trusted after a
        power cut only when it was synced before anything after the roll was acknowledged)."""
        self.flush()
        sync_file(self.path)

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole index (after a rebuild) and sync it — or, on a full disk, keep it in memory until the
        file system takes it (see `_rewrite`)."""
        self._pending.clear()
        self._release()
        data = b"".join(ENTRY.pack(r, p) for r, p in entries)
        if not _rewrite(self.path, data, self._pending):
            arr = array("I")
            arr.frombytes(data)
            if not _LITTLE:
                arr.byteswap()
            self._entries = arr

    def sanity_check(self, data_size: int) -> None:
        """Raise IndexCorrupt unless entries strictly increase and point inside the data file."""
        write_behind(self)
        size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
        if size % ENTRY.size:
            raise IndexCorrupt(f"{self.path}: size {size} is not a multiple of {ENTRY.size}")
        # A frozen index is read here, not through its mapping: a device that fails the read must fail the open
        # with an I/O error (OSError), not kill the process with SIGBUS at the first look at a mapped page.
        e = self._read_file(size) if self.frozen else self._load()
        if not e:
            if data_size:  # the first batch of a segment is always indexed
                raise IndexCorrupt(f"{self.path}: empty or missing, for a {data_size}-byte data file")
            return
        if e[1] != 0:  # (its relative offset may be above 0: a format with explicit offsets may leave a gap)
            raise IndexCorrupt(f"{self.path}: first entry ({e[0]}, {e[1]}) is not at position 0")
        if e[-1] >= max(data_size, 1):
            raise IndexCorrupt(f"{self.path}: last entry points at {e[-1]}, past the {data_size}-byte data file")
        # Both columns strictly increasing (map over memoryview/array slices runs in C: ~10 ms per 1 GiB segment).
        rels, positions = e[0::2], e[1::2]
        if not (all(map(operator.lt, rels[:-1], rels[1:])) and all(map(operator.lt, positions[:-1], positions[1:]))):
            raise IndexCorrupt(f"{self.path}: entries are out of order")

    def freeze(self) -> None:
        """The segment was rolled: stop appending and map the file on next use (entries a full disk kept from
        being written stay in memory until `sync` or `close` writes them)."""
        self._release()
        self.frozen = True

    def _release(self) -> None:
        """Let go of the entries in memory or mapped and of the file, writing what is pending when it can."""
        write_behind(self)
        self._entries = None
        self._files.forget(self._mapped())
        self._mapped = not_open
        self._file.close()

    def close(self) -> None:
        self._release()

    def delete(self) -> None:
        """Remove the file. A reader still holding the segment finds no entry from now on (it walks its data file
        from the start), never the file that may take the name next (a segment the log cleaner wrote)."""
        self._pending.clear()
        self._release()
        _unlink(self.path)
        self._entries = array("I")


class TimeIndex:
    """Sparse timestamp index of one segment; lookups read the (small) file, appends keep only the last entry."""

    __slots__ = ("path", "_file", "last_timestamp", "frozen", "_pending", "_deleted")

    def __init__(self, path: str, *, frozen: bool, files: OpenFiles) -> None:
        self.path = path
        self.frozen = frozen
        self._deleted = False
        self._file = PooledFile(files, path, os.O_RDWR | os.O_APPEND, create=not frozen)
        self._pending = bytearray()
        self.last_timestamp = self._read_last()

    def _read_last(self) -> int:
        """Timestamp of the last whole entry on disk (-1 when none), without reading the whole file (through the
        active index's own descriptor: a roll opens no other)."""
        try:
            if self.frozen:
                with open(self.path, "rb") as f:
                    return _last_timestamp(f.fileno())
            handle = self._file.handle()
            return _last_timestamp(handle.fd)
        except FileNotFoundError:
            return -1

    def entries(self) -> list[tuple[int, int]]:
        if self._deleted:  # (the name may be another segment's by now: see `OffsetIndex.delete`)
            return []
        write_behind(self)
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        data = data[: len(data) - len(data) % TIME_ENTRY.size] + self._pending  # (what a full disk kept back)
        return list(TIME_ENTRY.iter_unpack(data))

    def maybe_append(self, timestamp: int, rel: int) -> None:
        if timestamp > self.last_timestamp and not self.frozen:
            self._pending += TIME_ENTRY.pack(timestamp, rel)
            self.last_timestamp = timestamp
            if len(self._pending) >= WRITE_BEHIND_BYTES:
                write_behind(self)

    def flush(self) -> None:
        _write_pending(self._file, self._pending)

    def sanity_check(self, index: OffsetIndex) -> None:
        """Raise IndexCorrupt unless the file holds whole entries and a sample of them (first, last, a few
        between) has strictly increasing timestamps, non-decreasing relative offsets, and relative offsets that
        are offset-index entries (time entries are only ever written at index points). A garbage time index
        would otherwise misplace timestamp lookups and let retention delete a segment early."""
        write_behind(self)
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            return
        if size % TIME_ENTRY.size:
            raise IndexCorrupt(f"{self.path}: size {size} is not a multiple of {TIME_ENTRY.size}")
        previous = None
        with open(self.path, "rb") as f:
            for i in sample_points(size // TIME_ENTRY.size):
                f.seek(i * TIME_ENTRY.size)
                ts, rel = TIME_ENTRY.unpack(f.read(TIME_ENTRY.size))
                if not len(index) or index.floor_offset(rel)[0] != rel:
                    raise IndexCorrupt(f"{self.path}: entry {i} names relative offset {rel}, not an index point")
                if ts < 0 or previous is not None and (ts <= previous[0] or rel < previous[1]):
                    raise IndexCorrupt(f"{self.path}: entries are out of order")
                previous = ts, rel

    def floor_before(self, timestamp: int) -> int:
        """Relative offset of the last entry with a timestamp < `timestamp` (0 when none)."""
        best = 0
        for ts, rel in self.entries():
            if ts < timestamp:
                best = rel
            else:
                break
        return best

    def sync(self) -> None:
        self.flush()
        sync_file(self.path)

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole index and sync it (on a full disk: see `_rewrite`)."""
        self._pending.clear()
        self._file.close()
        _rewrite(self.path, b"".join(TIME_ENTRY.pack(t, r) for t, r in entries), self._pending)
        self.last_timestamp = entries[-1][0] if entries else -1

    def freeze(self) -> None:
        self.close()
        self.frozen = True

    def close(self) -> None:
        write_behind(self)
        self._file.close()

    def delete(self) -> None:
        self._pending.clear()
        self._file.close()
        _unlink(self.path)
        self._deleted = True


def _last_timestamp(fd: int) -> int:
    """The timestamp of the last whole time-index entry of the open file `fd`, or -1."""
    size = os.fstat(fd).st_size
    size -= size % TIME_ENTRY.size
    if not size:
        return -1
    return TIME_ENTRY.unpack(os.pread(fd, TIME_ENTRY.size, size - TIME_ENTRY.size))[0]


def _rewrite(path: str, data: bytes, pending: bytearray) -> bool:
    """Replace an index file with `data`, synced. On a full disk (or quota, or a device failing writes) the file is
    left empty and `data` put in `pending`, for the next write, `sync` or `close` to write when the file system
    takes it: a rebuilt index is derived data, and recovery — or cutting a log back after a failed sync — must not
    fail for it (nor the start of a gateway whose disk filled up). False then."""
    try:
        write_synced(path, data)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            raise
        os.truncate(path, 0)
        pending[:] = data
        return False
    return True


def _write_pending(file: PooledFile, pending: bytearray) -> None:
    """Append `pending` to the file, taking off what was written: after a short write (a disk that filled up) the
    rest, written later, completes the entry it cut."""
    if pending:
        handle = file.handle()
        with named(file.path):
            while pending:
                del pending[:os.write(handle.fd, pending)]


def write_behind(index: "OffsetIndex | TimeIndex") -> None:
    """Write an index's pending entries if the file system takes them now; if not (disk full, out of
    descriptors, an I/O error), they stay pending for the next write, `sync` or `close`. An index is derived data:
    an append, a roll or a close does not fail for it (recovery rebuilds whatever never reached the file), while a
    sync, which vouches for the index, does."""
    try:
        index.flush()
    except OSError:
        pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
