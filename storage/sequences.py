"""`IdAllocator`: durable, never-repeating 64-bit ids handed out in blocks (Kafka producer ids).

On disk: one small file holding the first id of the next unallocated block as decimal text. Taking a new block
writes the file atomically (temp file, fsync, rename, fsync directory), so after any crash the ids handed out
before it are never handed out again; ids of a block not fully used are skipped, as Kafka's brokers do.
"""

from __future__ import annotations

import os
import threading

from .errors import StorageError
from .files import named, rename_durably, write_synced

#: Ids taken per durable write: one fsync per this many InitProducerId calls.
BLOCK = 1000
MAX_ID = 2**63 - 1


class IdAllocator:
    """`first`: where ids start when the file does not exist yet (the engine passes a time-based floor after it
    set a damaged file aside, so ids handed out before the damage are not handed out again)."""

    def __init__(self, path: str | os.PathLike, *, block: int = BLOCK, first: int = 0) -> None:
        self.path = os.fspath(path)
        self.block = block
        self._lock = threading.Lock()
        try:
            with open(self.path, "rb") as f, named(self.path):
                text = f.read().strip()
        except FileNotFoundError:
            self._next_block = first
        else:
            # Written whole and renamed into place, so an empty file or anything but 0..MAX_ID is damage.
            if not (text.isdigit() and int(text) <= MAX_ID):
                raise StorageError(f"{self.path} does not hold a valid id ({text[:32]!r}); refusing to reuse ids")
            self._next_block = int(text)
        self._next = self._end = self._next_block

    @property
    def reserved(self) -> int:
        """The first id of the next block: no id from here on was ever handed out."""
        with self._lock:
            return self._next_block

    def next_id(self) -> int:
        """A new id, never returned before by this data directory (may block on one fsync per block)."""
        with self._lock:
            if self._next >= self._end:
                start = self._next_block
                if start + self.block > MAX_ID:
                    raise StorageError("id space exhausted")
                tmp = self.path + ".tmp"
                write_synced(tmp, str(start + self.block).encode())
                rename_durably(tmp, self.path)
                self._next_block = start + self.block
                self._next, self._end = start, start + self.block
            value = self._next
            self._next += 1
            return value
