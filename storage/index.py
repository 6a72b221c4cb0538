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
not grow with the size of the log.
"""

from __future__ import annotations

import mmap
import operator
import os
import struct
import sys
from array import array

from .files import sync_file, write_synced

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
    """Sparse offset index of one segment. `entries` is a flat sequence rel0, pos0, rel1, pos1, ..."""

    __slots__ = ("path", "_fd", "_entries", "_map", "frozen", "_pending")

    def __init__(self, path: str, *, frozen: bool) -> None:
        self.path = path
        self.frozen = frozen
        self._fd: int | None = None
        self._entries: array | memoryview | None = None
        self._map: mmap.mmap | None = None
        self._pending = bytearray()
        if not frozen:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    # -- loading -----------------------------------------------------------------------------------------
    def _load(self):
        if self._entries is not None:
            return self._entries
        size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
        usable = size - size % ENTRY.size
        if self.frozen and _LITTLE and usable:
            with open(self.path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), usable, access=mmap.ACCESS_READ)
            self._entries = memoryview(self._map).cast("I")
        else:
            arr = array("I")
            if usable:
                with open(self.path, "rb") as f:
                    arr.frombytes(f.read(usable))
                if not _LITTLE:
                    arr.byteswap()
            self._entries = arr
        return self._entries

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
        assert self._fd is not None, "append to a frozen index"
        entries = self._load()
        entries.append(rel)
        entries.append(position)
        pending = self._pending
        pending += ENTRY.pack(rel, position)
        if len(pending) >= WRITE_BEHIND_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the entries that are only in memory so far."""
        if self._pending and self._fd is not None:
            os.write(self._fd, self._pending)
            self._pending.clear()

    def sync(self) -> None:
        """Write what is only in memory and make the file durable (a frozen segment's index is trusted after a
        power cut only when it was synced before anything after the roll was acknowledged)."""
        self.flush()
        sync_file(self.path)

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole index (after a rebuild) and sync it."""
        self._release()
        write_synced(self.path, b"".join(ENTRY.pack(r, p) for r, p in entries))
        if not self.frozen:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND, 0o644)
        self._entries = None

    def sanity_check(self, data_size: int) -> None:
        """Raise IndexCorrupt unless entries strictly increase and point inside the data file."""
        self.flush()
        size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
        if size % ENTRY.size:
            raise IndexCorrupt(f"{self.path}: size {size} is not a multiple of {ENTRY.size}")
        e = self._load()
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
        """The segment was rolled: stop appending and map the file on next use."""
        self._release()
        self.frozen = True

    def _release(self) -> None:
        self.flush()
        entries, mapped = self._entries, self._map
        self._entries = self._map = None
        try:
            if isinstance(entries, memoryview):
                entries.release()
            if mapped is not None:
                mapped.close()
        except BufferError:
            pass  # a reader in another thread still uses the mapping; it is unmapped when that view is dropped
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._release()

    def delete(self) -> None:
        self._release()
        _unlink(self.path)


class TimeIndex:
    """Sparse timestamp index of one segment; lookups read the (small) file, appends keep only the last entry."""

    __slots__ = ("path", "_fd", "last_timestamp", "frozen", "_pending")

    def __init__(self, path: str, *, frozen: bool) -> None:
        self.path = path
        self.frozen = frozen
        self._fd: int | None = None
        self._pending = bytearray()
        if not frozen:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.last_timestamp = self._read_last()

    def _read_last(self) -> int:
        """Timestamp of the last whole entry on disk (-1 when none), without reading the whole file."""
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                size -= size % TIME_ENTRY.size
                if not size:
                    return -1
                f.seek(size - TIME_ENTRY.size)
                return TIME_ENTRY.unpack(f.read(TIME_ENTRY.size))[0]
        except FileNotFoundError:
            return -1

    def entries(self) -> list[tuple[int, int]]:
        self.flush()
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        data = data[: len(data) - len(data) % TIME_ENTRY.size]
        return list(TIME_ENTRY.iter_unpack(data))

    def maybe_append(self, timestamp: int, rel: int) -> None:
        if timestamp > self.last_timestamp and self._fd is not None:
            self._pending += TIME_ENTRY.pack(timestamp, rel)
            self.last_timestamp = timestamp
            if len(self._pending) >= WRITE_BEHIND_BYTES:
                self.flush()

    def flush(self) -> None:
        if self._pending and self._fd is not None:
            os.write(self._fd, self._pending)
            self._pending.clear()

    def sanity_check(self, index: OffsetIndex) -> None:
        """Raise IndexCorrupt unless the file holds whole entries and a sample of them (first, last, a few
        between) has strictly increasing timestamps, non-decreasing relative offsets, and relative offsets that
        are offset-index entries (time entries are only ever written at index points). A garbage time index
        would otherwise misplace timestamp lookups and let retention delete a segment early."""
        self.flush()
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
        self.close()
        self._pending.clear()
        write_synced(self.path, b"".join(TIME_ENTRY.pack(t, r) for t, r in entries))
        if not self.frozen:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND, 0o644)
        self.last_timestamp = entries[-1][0] if entries else -1

    def freeze(self) -> None:
        self.close()
        self.frozen = True

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        _unlink(self.path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
