"""The engine's budget of open segment files: each opened when used, let go when others were used since.

Every file of a segment — its data file, offset index, time index and side checksums, and a frozen segment's
memory-mapped offset index — is opened through the engine's `OpenFiles` when first needed (`open`, `map`), and
counts against `limit` while the pool holds it. When more than `limit` are held, the ones used least recently (a
clock sweep: each use sets a bit, the sweep clears it once before letting a file go) are let go, so the number of
open files follows what is used, not how many segments or partitions exist — the active segment of a partition
being appended to stays open because it is used, an idle partition's or a frozen segment's files close. Brokers
do the same (Kafka's and TANK's keep only recently used segment files open).

Letting go never closes a descriptor someone is using: the pool and its users share `FileHandle`s (a mapping's
`Mapped`), the owner of a file keeps only a weak reference to its handle, and a user holds the handle itself while
it works — a read, a `sendfile` from a file range (`ReadSlice` holds the handle of its segment's data file), an
append. The descriptor is closed (the mapping unmapped) when the last holder drops it, so a descriptor number is
never reused under a reader, and an evicted file a reader still sends from stays readable for it. Such handles are
outside the count for as long as their readers hold them (a few per connection at most).

Running out anyway (EMFILE, ENFILE: other descriptors, a limit lowered under the process) is answered here: the
pool lets go of half of what it holds, lowers its own limit to what it then holds, and tries once more; a second
failure goes to the caller as what it is (an OSError with its errno).

Thread-safe: segments are opened and read from the event loop's thread and from worker threads at once.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
import weakref
from collections import OrderedDict

log = logging.getLogger("logway.storage")

#: The fewest segment files the pool keeps open, whatever it is told or runs into: enough for a few active segments
#: (each has a data file, two indexes and for some formats a checksum file) and the readers of older ones.
MIN_OPEN_FILES = 16
#: The errors that say the process (EMFILE) or the system (ENFILE) has no descriptor left.
OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})


class FileHandle:
    """One open descriptor of a segment file, closed when the last holder drops the handle."""

    __slots__ = ("fd", "used", "__weakref__")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.used = True  # the clock sweep's bit: set by every use, cleared by a sweep that passes it

    def fileno(self) -> int:
        return self.fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class Mapped:
    """A read-only memory mapping of a whole file and a view of it as `cast` items; unmapped when the last holder
    of the handle or of `view` (a reader's) drops it — never explicitly, which would fail under a reader. It holds a
    descriptor too (Python's mmap keeps a duplicate of the file's), so it counts like an open file."""

    __slots__ = ("view", "used", "__weakref__")

    def __init__(self, path: str, size: int, cast: str) -> None:
        with open(path, "rb") as f:  # (the mapping outlives the descriptor)
            self.view = memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)).cast(cast)
        self.used = True


def not_open() -> None:
    """The weak reference of a file not open (yet, or any more)."""
    return None


class PooledFile:
    """One file of a segment, opened through the pool when used: `handle()` (hold it while working with the
    descriptor), `close()` when the segment is done with it. `flags` open it again after the pool let it go (without
    O_CREAT: a file deleted meanwhile is not made again); `create` (or `create()`) opens it at once with O_CREAT (a
    new segment's files exist, and their names can be synced, before anything is appended). `keep()` takes the
    handle out of the pool and keeps it for as long as this object lives (a deleted segment's data file, for the
    readers that hold the segment)."""

    __slots__ = ("path", "flags", "files", "_ref", "_kept")

    def __init__(self, files: "OpenFiles", path: str, flags: int, *, create: bool = False) -> None:
        self.path = path
        self.flags = flags
        self.files = files
        self._ref = not_open
        self._kept: FileHandle | None = None
        if create:
            self.create()

    def create(self) -> None:
        """Open the file with O_CREAT: it exists from now on."""
        self._ref = weakref.ref(self.files.open(self.path, self.flags | os.O_CREAT))

    def handle(self) -> FileHandle:
        handle = self._ref()
        if handle is None:
            handle = self.files.open(self.path, self.flags)
            self._ref = weakref.ref(handle)
        handle.used = True
        return handle

    def keep(self) -> None:
        handle = self.handle()
        self._kept = handle
        self.files.forget(handle)

    def close(self) -> None:
        """Let the file go: closed now, or when the readers holding its handle drop it."""
        self.files.forget(self._ref())
        self._ref = not_open
        self._kept = None


class OpenFiles:
    """The pool (see the module docstring). `opened` and `let_go` count what it did, for metrics and tests."""

    __slots__ = ("limit", "_held", "_lock", "opened", "let_go")

    def __init__(self, limit: int) -> None:
        self.limit = max(int(limit), MIN_OPEN_FILES)
        self._held: OrderedDict[FileHandle | Mapped, None] = OrderedDict()  # the order of the clock
        self._lock = threading.Lock()
        self.opened = 0
        self.let_go = 0

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, handle) -> bool:
        """Whether the pool holds `handle` (counts it against the limit)."""
        return handle in self._held

    def open(self, path: str, flags: int, mode: int = 0o644) -> FileHandle:
        """A new handle of `path` opened with `flags`, held by the pool (the caller keeps a weak reference)."""
        try:
            fd = os.open(path, flags, mode)
        except OSError as exc:
            if exc.errno not in OUT_OF_DESCRIPTORS or not self._shed(exc, path):
                raise
            fd = os.open(path, flags, mode)
        return self._hold(FileHandle(fd))

    def map(self, path: str, size: int, cast: str) -> Mapped:
        """A new read-only mapping of the first `size` bytes of `path`, held by the pool."""
        try:
            mapped = Mapped(path, size, cast)
        except OSError as exc:  # (ENOMEM: too many mappings, the same remedy)
            if exc.errno not in OUT_OF_DESCRIPTORS | {errno.ENOMEM} or not self._shed(exc, path):
                raise
            mapped = Mapped(path, size, cast)
        return self._hold(mapped)

    def _hold(self, handle):
        with self._lock:
            held = self._held
            held[handle] = None
            self.opened += 1
            while len(held) > self.limit:
                oldest, _ = held.popitem(last=False)
                if oldest.used:  # used since the sweep last passed: it goes round once more
                    oldest.used = False
                    held[oldest] = None
                else:
                    self.let_go += 1  # (closed once its last user drops it)
        return handle

    def forget(self, handle) -> None:
        """Stop holding `handle` (its owner closed or deleted the file, or keeps the handle itself)."""
        if handle is not None:
            with self._lock:
                self._held.pop(handle, None)

    def _shed(self, exc: OSError, path: str) -> bool:
        """Out of descriptors: let go of half of what is held and hold no more than that from now on. False when
        nothing was held (the descriptors went elsewhere: the caller's error stands)."""
        with self._lock:
            held = self._held
            if not held:
                return False
            keep = len(held) // 2
            for _ in range(len(held) - keep):
                held.popitem(last=False)
                self.let_go += 1
            self.limit = max(keep, MIN_OPEN_FILES)
        log.error("out of file descriptors opening %s (%s): let go of half the open segment files; at most %d are "
                  "kept open from now on (limits.open_segment_files). Raise the descriptor limit (ulimit -n, "
                  "LimitNOFILE=) or lower limits.max_connections", path, exc.strerror, self.limit)
        return True
