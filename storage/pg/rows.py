"""Rows of the `batches` table in memory: `Row` (consecutive whole batches of one partition, as stored) and
`RowCache`, the rows kept for readers across partitions under a byte budget.

Every row a gateway commits goes into the cache (its bytes were in memory anyway); rows a reader fetched from the
database go in too. When the budget is spent the rows put in longest ago go first (first in, first out: a
consumer at the log end reads what was committed last). A partition's cached rows are found by offset: the row
that holds it, then the cached rows that follow it without a gap in between.

Thread-safe (one lock): the event loop reads, the commit and read threads put.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict

__all__ = ["Row", "RowCache"]


class Row:
    """One row of a partition's log: `data` holds whole stored batches covering [base, end); the log held nothing
    in [start, base) (a format with offsets of its own may skip some), and its bytes begin at `pos` of the
    partition's byte stream. `bounds` lists each batch as (position in `data`, first offset, end offset)."""

    __slots__ = ("start", "base", "end", "pos", "data", "max_ts", "time_ms", "_bounds")

    def __init__(self, start: int, base: int, end: int, pos: int, data: bytes, max_ts: int, time_ms: int,
                 bounds: list[tuple[int, int, int]] | None = None) -> None:
        self.start, self.base, self.end, self.pos, self.data = start, base, end, pos, data
        self.max_ts, self.time_ms = max_ts, time_ms
        self._bounds = bounds

    @property
    def size(self) -> int:
        return len(self.data)

    def bounds(self, fmt) -> list[tuple[int, int, int]]:
        """(position, first offset, end offset) of each batch, scanned with the storage format once."""
        if self._bounds is None:
            out, view, pos, offset = [], memoryview(self.data), 0, self.base
            while pos < len(view):
                size, base, delta = fmt.scan(view, pos)[:3]
                first = offset if base is None else base
                offset = first + delta + 1
                out.append((pos, first, offset))
                pos += size
            self._bounds = out
        return self._bounds


class _Rows:
    """One partition's cached rows, by end offset."""

    __slots__ = ("ends", "rows")

    def __init__(self) -> None:
        self.ends: list[int] = []
        self.rows: dict[int, Row] = {}


class RowCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._parts: dict[object, _Rows] = {}
        self._order: OrderedDict[tuple[int, int], object] = OrderedDict()  # (id(partition), end) → partition

    def put(self, part: object, rows: list[Row]) -> None:
        """Keep `rows` of partition `part` (in offset order), making room by letting the oldest go."""
        if self.max_bytes <= 0:
            return
        with self._lock:
            cached = self._parts.get(part)
            if cached is None:
                cached = self._parts[part] = _Rows()
            for row in rows:
                if row.size > self.max_bytes or row.end in cached.rows:
                    continue
                if not cached.ends or row.end > cached.ends[-1]:
                    cached.ends.append(row.end)
                else:
                    bisect.insort(cached.ends, row.end)
                cached.rows[row.end] = row
                self._order[(id(part), row.end)] = part
                self.bytes += row.size
            while self.bytes > self.max_bytes:
                (_, end), owner = self._order.popitem(last=False)
                self._forget(self._parts[owner], end, owner)

    def _forget(self, cached: _Rows, end: int, part: object) -> None:
        row = cached.rows.pop(end)
        del cached.ends[bisect.bisect_left(cached.ends, end)]
        self.bytes -= row.size
        if not cached.rows:
            del self._parts[part]

    def rows_from(self, part: object, offset: int, max_bytes: int) -> list[Row] | None:
        """The cached row of `part` that holds `offset` (starting at or before it, ending after it) and the cached
        rows right after it while they follow without a gap and `max_bytes` is not reached; None when that row is
        not cached."""
        with self._lock:
            cached = self._parts.get(part)
            if cached is not None:
                ends = cached.ends
                i = bisect.bisect_right(ends, offset)
                if i < len(ends):
                    row = cached.rows[ends[i]]
                    if row.start <= offset:
                        out = [row]
                        size = row.size
                        while size < max_bytes and i + 1 < len(ends):
                            nxt = cached.rows[ends[i + 1]]
                            if nxt.start != row.end:
                                break
                            out.append(nxt)
                            size += nxt.size
                            row, i = nxt, i + 1
                        self.hits += 1
                        return out
            self.misses += 1
            return None

    def drop(self, part: object, below: int | None = None) -> None:
        """Forget `part`'s rows (those ending at or below `below`, when given)."""
        with self._lock:
            cached = self._parts.get(part)
            if cached is None:
                return
            doomed = cached.ends if below is None else cached.ends[:bisect.bisect_right(cached.ends, below)]
            for end in list(doomed):
                self._order.pop((id(part), end), None)
                self._forget(cached, end, part)
