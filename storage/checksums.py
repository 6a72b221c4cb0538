"""Side checksums for storage formats whose batches carry none (TANK bundles): one CRC-32C per stored batch.

On disk, beside a segment's data file: `<base>.checksums`, entries of `position u32 | crc32c u32` (little-endian,
8 bytes), one per batch in file order — position is where the batch starts in the data file, crc32c covers its
bytes as stored. An entry is written with each append (so a process crash keeps it with the page cache, like the
data) and made durable by the same sync as the data. Recovery accepts a batch only when its entry is there and
matches, so a bundle torn by a power cut, or garbage that a file system left where the file grew, is cut off like a
torn Kafka batch (whose own CRC does that job) instead of being served as a real bundle.

A partition without the `checksummed` marker file (written, durably, when a partition is created or first opened
by a logway that keeps side checksums) whose segments have no checksum files was written by an older logway:
recovery rebuilds them from the data. A segment without one in a marked partition, or after an older segment that
has one, never had its names synced, so nothing in it was acknowledged and nothing in it can be verified: recovery
empties it.
"""

from __future__ import annotations

import bisect
import errno
import operator
import os
import struct
import sys
from array import array
from typing import Iterator

from .files import named, sync_file, write_synced
from .openfiles import OpenFiles, PooledFile

ENTRY = struct.Struct("<II")


class Checksums:
    """The `.checksums` file of one segment. `found`: the file existed when the segment was opened. Opened through
    the engine's `OpenFiles` (see `logway.storage.openfiles`)."""

    __slots__ = ("path", "_file", "found", "frozen")

    def __init__(self, path: str, *, frozen: bool, files: OpenFiles) -> None:
        self.path = path
        self.found = os.path.exists(path)
        self.frozen = frozen
        self._file = PooledFile(files, path, os.O_RDWR | os.O_APPEND, create=not frozen)

    def append(self, position: int, crc: int) -> None:
        """One entry, whole or not at all (a short write on a full disk is taken back)."""
        handle = self._file.handle()
        with named(self.path):
            written = os.write(handle.fd, ENTRY.pack(position, crc))
        if written != ENTRY.size:
            os.ftruncate(handle.fd, os.fstat(handle.fd).st_size - written)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)

    def _load(self) -> array:
        """Every entry up to the first that does not follow its predecessor (positions strictly increase), as a
        flat array pos0, crc0, pos1, crc1 …: after a power cut the unsynced tail of the file may hold zeros or
        garbage between good entries, and nothing from there on is trusted. Read whole, like an index check."""
        entries = array("I")
        try:
            with open(self.path, "rb") as f, named(self.path):
                data = f.read()
        except FileNotFoundError:
            return entries
        entries.frombytes(data[: len(data) - len(data) % ENTRY.size])
        if sys.byteorder != "little":
            entries.byteswap()
        positions = entries[0::2]
        if not all(map(operator.lt, positions[:-1], positions[1:])):  # C speed; the slow scan only on damage
            good = next(i for i in range(1, len(positions)) if positions[i] <= positions[i - 1])
            del entries[2 * good:]
        return entries

    def entries_from(self, position: int) -> Iterator[tuple[int, int]]:
        """(position, crc) of every trusted entry from the first one at or after `position`, in file order."""
        entries = self._load()
        first = bisect.bisect_left(entries[0::2], position)
        return zip(entries[2 * first::2], entries[2 * first + 1::2])

    def cut(self, size: int) -> None:
        """Keep only the trusted entries of batches below `size` (the data file was cut back there)."""
        entries = self._load()
        keep = bisect.bisect_left(entries[0::2], size) * ENTRY.size
        try:
            if os.path.getsize(self.path) != keep:
                os.truncate(self.path, keep)
        except FileNotFoundError:
            self.reset([])

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace every entry (a rebuild from the data) and sync the file."""
        write_synced(self.path, b"".join(ENTRY.pack(p, c) for p, c in entries))
        self.found = True

    def sync(self) -> None:
        if self.frozen:
            sync_file(self.path)
        else:
            handle = self._file.handle()
            with named(self.path):
                os.fdatasync(handle.fd)

    def close(self) -> None:
        """Let go of the file; the next append (an active segment's) opens it again."""
        self._file.close()

    def freeze(self) -> None:
        self.close()
        self.frozen = True

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
