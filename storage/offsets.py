"""Committed consumer offsets for every protocol: (group, topic, partition) → `CommittedOffset`.

An append-only log of framed records, replayed into an in-memory map on open and compacted now and then.
`commit()` is one `os.write` (cheap, not yet durable); `sync()` makes every record written so far durable with
one `fdatasync`, so a caller running `sync()` in a worker thread group-commits any number of commits per sync.
`written_seq` / `synced_seq` tell a caller whether its commit is covered by a finished sync.

On-disk format (all integers big-endian) — directory holds:

    offsets.log          the live log
    offsets.log.compact  a compaction (or a repair) in progress; a leftover one is deleted on open
    offsets.lock         flock()ed while a store has the directory open (one store per directory)

    offsets.log := file_header record*
    file_header := magic "LOGWAYOF" (8 bytes) | version u32 (= 1)
    record      := a CRC-framed payload (logway.storage.framing), MIN_PAYLOAD_BYTES <= length <= MAX_RECORD_BYTES
    payload     := op u8 | body
      op 1 COMMIT        group_len u16 | count u32 | group utf-8
                         | count × (partition i32 | offset i64 | commit_time_ms i64 | topic_len u16
                                    | metadata_len u16 | topic utf-8 | metadata utf-8)
      op 2 DELETE_GROUP  group_len u16 | group utf-8
      op 3 DELETE_TOPIC  topic_len u16 | topic utf-8     (removes the topic's offsets in every group)
      op 4 DELETE_OFFSETS  group_len u16 | count u32 | group utf-8
                         | count × (partition i32 | topic_len u16 | topic utf-8)   (those offsets of the group)

Op 4 came later than the others: a build that does not know it stops reading the log at the first one (and drops
what follows), so going back to such a build is safe only after a compaction (which writes COMMIT records only).

Every commit / commit_many / delete_* / delete writes exactly one record with one `os.write` on an `O_APPEND` descriptor
(a short write, e.g. on a nearly full disk, is finished or cut back off before the call returns), so a record is
all-or-nothing: recovery applies a record only when it is complete, its CRC matches and it decodes fully.
Recovery reads records in order and stops at the first torn or corrupt one (short read, length out of bounds,
CRC mismatch, undecodable payload), truncates the file there, fsyncs, and logs how many bytes it dropped.

Compaction (when more than `compact_after` records, and more than twice the live keys, were written since the
last snapshot) runs from `sync()` — i.e. on the caller's worker thread — or from `compact()`. It copies the live
map under the lock, writes it as COMMIT records (one per group, split to stay under MAX_RECORD_BYTES) into
`offsets.log.compact` without holding the lock (commits meanwhile go to the old log *and* a rewrite buffer),
then under the lock appends the buffered records, fsyncs, `os.replace`s it over `offsets.log` and fsyncs the
directory. A crash at any point leaves either the old or the new log complete.

I/O failures (disk full, EIO) raise `StorageIOError` (a `StorageError` and an `OSError`); the record is not
acknowledged and the store recovers by itself once the file system does:
- a failed or short write is cut back off the file (`ftruncate` to the last whole record), and the store goes on;
- after a failed `fdatasync` (or a failed cut / directory sync) the store is *failed*: the file's contents are
  unknown (the kernel may have dropped the dirty pages and marked them clean; retrying the fsync would be a
  guess, PostgreSQL's "fsyncgate"), so it is never trusted again. Every later write or sync first tries to
  *repair*: rewrite the whole in-memory map as a fresh snapshot (exactly as compaction writes one), fsync it,
  rename it over `offsets.log` and fsync the directory. Until that succeeds (e.g. while the disk stays full)
  writes raise `StorageIOError`; after it, the store works as before. Reads keep working throughout. Commits whose
  sync failed stay in the map (their callers got an error: outcome unknown, as a timed-out Kafka commit) and the
  repair makes them durable. A repair costs what a compaction costs, once per failure, in the writing thread
  under the lock; `close()` tries one too, so a store closed after space returned leaves a synced log.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import threading
import time
from pathlib import Path
from typing import Iterable, NamedTuple


from .errors import NotAnOffsetLog, StorageClosed, StorageError, StorageIOError
from .files import fsync_dir, makedirs_durably
from .framing import Frames, frame

__all__ = [
    "CommittedOffset",
    "OffsetMap",
    "OffsetStore",
    "RecoveryReport",
    "MAX_GROUP_BYTES",
    "MAX_TOPIC_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_RECORD_BYTES",
]

logger = logging.getLogger("logway.storage.offsets")

LOG_NAME = "offsets.log"
COMPACT_NAME = "offsets.log.compact"
LOCK_NAME = "offsets.lock"

FILE_MAGIC = b"LOGWAYOF"
FORMAT_VERSION = 1
_FILE_HEADER = struct.Struct(">8sI")  # magic, version
FILE_HEADER = _FILE_HEADER.pack(FILE_MAGIC, FORMAT_VERSION)

_COMMIT_HEAD = struct.Struct(">BHI")  # op, group length, entry count; then group bytes
_ENTRY = struct.Struct(">iqqHH")  # partition, offset, commit_time_ms, topic length, metadata length
_NAME_HEAD = struct.Struct(">BH")  # op, name length; then name bytes (the two tombstones)
_KEY = struct.Struct(">iH")  # partition, topic length (DELETE_OFFSETS entries); then topic bytes

OP_COMMIT = 1
OP_DELETE_GROUP = 2
OP_DELETE_TOPIC = 3
OP_DELETE_OFFSETS = 4

# Kafka's STRING is int16-length-prefixed, so 32767 bytes is the longest group id any Kafka client can send;
# a smaller bound would refuse valid clients. (It still fits the u16 length field.)
MAX_GROUP_BYTES = 32767
# Kafka topic names are at most 249 characters of [a-zA-Z0-9._-]; TANK's topic length is a u8 (255).
MAX_TOPIC_BYTES = 255
# Kafka's broker default offset.metadata.max.bytes is 4096 (it answers OFFSET_METADATA_TOO_LARGE above it).
MAX_METADATA_BYTES = 4096
# The largest record this module writes: commit_many refuses a bigger one (ValueError) and compaction splits
# groups into records below it. So a larger length read back can only be corruption, and refusing it keeps a
# flipped bit in a length field from making recovery allocate up to 4 GiB. 16 MiB is ~600k partitions with
# short topic names in one atomic commit — far beyond any real OffsetCommit.
MAX_RECORD_BYTES = 16 * 1024 * 1024
# The smallest valid payload is a tombstone with a 1-byte name. Requiring at least this also rejects the
# all-zero frame (length 0, crc32c(b"") == 0) that some filesystems leave in a file's tail after power loss.
MIN_PAYLOAD_BYTES = _NAME_HEAD.size + 1

MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

# Compaction writes the new file in chunks of about this size (it is not the live log, so several writes are fine).
_COMPACT_CHUNK_BYTES = 1024 * 1024

_fdatasync = getattr(os, "fdatasync", os.fsync)


class CommittedOffset(NamedTuple):
    offset: int
    metadata: str
    commit_time_ms: int


class RecoveryReport(NamedTuple):
    """What opening the store found: records replayed, live keys, bytes truncated from the tail and why."""

    records: int
    live_keys: int
    bytes_dropped: int
    reason: str | None
    removed_compact_file: bool


# ---------------------------------------------------------------------------------------------- validation


def _encode_name(value: object, what: str, limit: int) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a str, not {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid unicode (lone surrogate?)") from None
    if not raw:
        raise ValueError(f"{what} must not be empty")
    if len(raw) > limit:
        raise ValueError(f"{what} is {len(raw)} bytes in UTF-8; the limit is {limit}")
    return raw


def _encode_metadata(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"metadata must be a str, not {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("metadata is not valid unicode (lone surrogate?)") from None
    if len(raw) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is {len(raw)} bytes in UTF-8; the limit is {MAX_METADATA_BYTES}")
    return raw


def _check_int(value: object, what: str, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{what} {value} is outside {lo}..{hi}")
    return value


def _commit_time(value: object) -> int:
    if value is None:
        return time.time_ns() // 1_000_000
    return _check_int(value, "commit_time_ms", _I64_MIN, _I64_MAX)


# ---------------------------------------------------------------------------------------------- encoding


def _group_head(payload: bytes, entry_size: int) -> tuple[str, int, int]:
    """(group, entry count, position of the first entry) of a COMMIT or DELETE_OFFSETS payload; the count is
    bounded by the bytes present (`entry_size` each at least) before anyone loops over it."""
    _, glen, count = _COMMIT_HEAD.unpack_from(payload, 0)
    pos = _COMMIT_HEAD.size
    end = pos + glen
    if not 0 < glen <= MAX_GROUP_BYTES or end > len(payload):
        raise ValueError(f"bad group length {glen}")
    if count == 0 or count > (len(payload) - end) // entry_size:
        raise ValueError(f"bad entry count {count}")
    return str(payload[pos:end], "utf-8"), count, end


def _decode(payload: bytes) -> tuple[int, str, list | None]:
    """(op, group-or-topic, [(key, CommittedOffset)] (COMMIT), [key] (DELETE_OFFSETS) or None). Raises ValueError /
    struct.error on garbage."""
    op = payload[0]
    n = len(payload)
    if op == OP_COMMIT:
        group, count, pos = _group_head(payload, _ENTRY.size)
        items = []
        for _ in range(count):
            partition, offset, ts, tlen, mlen = _ENTRY.unpack_from(payload, pos)
            pos += _ENTRY.size
            mid = pos + tlen
            end = mid + mlen
            if end > n or not 0 < tlen <= MAX_TOPIC_BYTES or mlen > MAX_METADATA_BYTES:
                raise ValueError("bad entry lengths")
            if partition < 0 or offset < 0:
                raise ValueError("negative partition or offset")
            items.append(
                ((str(payload[pos:mid], "utf-8"), partition),
                 CommittedOffset(offset, str(payload[mid:end], "utf-8"), ts))
            )
            pos = end
        if pos != n:
            raise ValueError(f"{n - pos} trailing bytes")
        return op, group, items
    if op == OP_DELETE_OFFSETS:
        group, count, pos = _group_head(payload, _KEY.size)
        keys = []
        for _ in range(count):
            partition, tlen = _KEY.unpack_from(payload, pos)
            pos += _KEY.size
            end = pos + tlen
            if end > n or not 0 < tlen <= MAX_TOPIC_BYTES or partition < 0:
                raise ValueError("bad entry")
            keys.append((str(payload[pos:end], "utf-8"), partition))
            pos = end
        if pos != n:
            raise ValueError(f"{n - pos} trailing bytes")
        return op, group, keys
    if op == OP_DELETE_GROUP or op == OP_DELETE_TOPIC:
        _, nlen = _NAME_HEAD.unpack_from(payload, 0)
        limit = MAX_GROUP_BYTES if op == OP_DELETE_GROUP else MAX_TOPIC_BYTES
        if not 0 < nlen <= limit or _NAME_HEAD.size + nlen != n:
            raise ValueError(f"bad name length {nlen}")
        return op, str(payload[_NAME_HEAD.size :], "utf-8"), None
    raise ValueError(f"unknown op {op}")


def _io_error(message: str, cause: BaseException | None) -> StorageIOError:
    """A StorageIOError carrying the errno of the OSError that caused it (if any)."""
    err = StorageIOError(message)
    err.errno = getattr(cause, "errno", None)
    return err


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# ---------------------------------------------------------------------------------------------- the store


class OffsetMap:
    """The committed offsets in memory — (group, topic, partition) → `CommittedOffset` — and the API that changes
    them, whatever keeps them durable: each change is checked, encoded as one record (the format above) and handed to
    `_append` (under `_lock`), then applied to the map. `OffsetStore` appends the records to its file;
    `logway.storage.pg.offsets.PgOffsetStore` keeps the map in a table. A subclass also provides `sync()` and
    `close()`, and names itself in `where` (for messages)."""

    where = "offset store"
    #: Why the last commit did not make this map's changes durable though it returned (a postgres cluster member
    #: that stopped coordinating: `PgOffsetStore.lost`); None here.
    lost: Exception | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the map and what the subclass keeps beside it
        self._groups: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self._live = 0
        self._closed = False

    def _append(self, frame: bytes) -> None:
        """Keep one record durable with the next `sync()` (the caller holds the lock)."""
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _apply(self, op: int, name: str, items: list | None) -> None:
        if op == OP_COMMIT:
            entries = self._groups.get(name)
            if entries is None:
                entries = self._groups[name] = {}
            before = len(entries)
            entries.update(items)
            self._live += len(entries) - before
        elif op == OP_DELETE_GROUP:
            entries = self._groups.pop(name, None)
            if entries:
                self._live -= len(entries)
        elif op == OP_DELETE_OFFSETS:
            entries = self._groups.get(name)
            if entries:
                for key in items:
                    if entries.pop(key, None) is not None:
                        self._live -= 1
                if not entries:
                    del self._groups[name]
        else:  # OP_DELETE_TOPIC
            for group in list(self._groups):
                entries = self._groups[group]
                doomed = [key for key in entries if key[0] == name]
                for key in doomed:
                    del entries[key]
                self._live -= len(doomed)
                if not entries:
                    del self._groups[group]

    def commit(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        metadata: str = "",
        commit_time_ms: int | None = None,
    ) -> None:
        g = _encode_name(group, "group", MAX_GROUP_BYTES)
        t = _encode_name(topic, "topic", MAX_TOPIC_BYTES)
        m = _encode_metadata(metadata)
        _check_int(partition, "partition", 0, MAX_PARTITION)
        _check_int(offset, "offset", 0, MAX_OFFSET)
        ts = _commit_time(commit_time_ms)
        payload = b"".join(
            (_COMMIT_HEAD.pack(OP_COMMIT, len(g), 1), g, _ENTRY.pack(partition, offset, ts, len(t), len(m)), t, m)
        )
        record = frame(payload)
        value = CommittedOffset(offset, metadata, ts)
        with self._lock:
            self._append(record)
            self._apply(OP_COMMIT, group, [((topic, partition), value)])

    def commit_many(
        self,
        group: str,
        entries: Iterable[tuple[str, int, int, str]],
        commit_time_ms: int | None = None,
    ) -> None:
        """Commit (topic, partition, offset, metadata) entries as one record: after a crash, all or none.

        A later entry for the same (topic, partition) wins. No entries: nothing is written. A record over
        MAX_RECORD_BYTES raises ValueError (split it into several commits if atomicity across them is not needed).
        """
        g = _encode_name(group, "group", MAX_GROUP_BYTES)
        ts = _commit_time(commit_time_ms)
        parts: list[bytes] = [b"", g]
        items = []
        size = _COMMIT_HEAD.size + len(g)
        for entry in entries:
            try:
                topic, partition, offset, metadata = entry
            except (TypeError, ValueError):
                raise ValueError(f"each entry must be (topic, partition, offset, metadata), got {entry!r}") from None
            t = _encode_name(topic, "topic", MAX_TOPIC_BYTES)
            m = _encode_metadata(metadata)
            _check_int(partition, "partition", 0, MAX_PARTITION)
            _check_int(offset, "offset", 0, MAX_OFFSET)
            parts += (_ENTRY.pack(partition, offset, ts, len(t), len(m)), t, m)
            size += _ENTRY.size + len(t) + len(m)
            if size > MAX_RECORD_BYTES:
                raise ValueError(f"commit_many record exceeds MAX_RECORD_BYTES ({MAX_RECORD_BYTES}); split it")
            items.append(((topic, partition), CommittedOffset(offset, metadata, ts)))
        if not items:
            return
        parts[0] = _COMMIT_HEAD.pack(OP_COMMIT, len(g), len(items))
        record = frame(b"".join(parts))
        with self._lock:
            self._append(record)
            self._apply(OP_COMMIT, group, items)

    def delete_group(self, group: str) -> int:
        """Forget every offset of `group` (a tombstone, durable like a commit: after the next `sync()`). Returns
        how many offsets it had."""
        g = _encode_name(group, "group", MAX_GROUP_BYTES)
        record = frame(_NAME_HEAD.pack(OP_DELETE_GROUP, len(g)) + g)
        with self._lock:
            self._append(record)
            removed = len(self._groups.get(group, ()))
            self._apply(OP_DELETE_GROUP, group, None)
        return removed

    def delete(self, group: str, keys: Iterable[tuple[str, int]], *, committed_before: int | None = None) -> int:
        """Forget `group`'s offsets of the given (topic, partition) pairs as one record (durable like a commit:
        after the next `sync()`; all or none after a crash). With `committed_before` (ms), only those committed
        before then (a commit that came in meanwhile stays). Returns how many of them were forgotten; when none,
        nothing is written. ValueError for a malformed group, topic or partition, or a record over
        MAX_RECORD_BYTES."""
        g = _encode_name(group, "group", MAX_GROUP_BYTES)
        wanted: dict[tuple[str, int], bytes] = {}
        size = _COMMIT_HEAD.size + len(g)
        for key in keys:
            try:
                topic, partition = key
            except (TypeError, ValueError):
                raise ValueError(f"each key must be (topic, partition), got {key!r}") from None
            t = _encode_name(topic, "topic", MAX_TOPIC_BYTES)
            _check_int(partition, "partition", 0, MAX_PARTITION)
            if (topic, partition) not in wanted:
                wanted[(topic, partition)] = _KEY.pack(partition, len(t)) + t
                size += _KEY.size + len(t)
                if size > MAX_RECORD_BYTES:
                    raise ValueError(f"delete record exceeds MAX_RECORD_BYTES ({MAX_RECORD_BYTES}); split it")
        with self._lock:
            entries = self._groups.get(group, {})
            present = [key for key in wanted if key in entries
                       and (committed_before is None or entries[key].commit_time_ms < committed_before)]
            if not present:
                self._check_open()
                return 0
            record = frame(_COMMIT_HEAD.pack(OP_DELETE_OFFSETS, len(g), len(present)) + g
                           + b"".join(wanted[key] for key in present))
            self._append(record)
            self._apply(OP_DELETE_OFFSETS, group, present)
        return len(present)

    def delete_topic(self, topic: str) -> None:
        """Forget `topic`'s offsets in every group (a durable tombstone). Costs O(live keys) under the lock."""
        t = _encode_name(topic, "topic", MAX_TOPIC_BYTES)
        record = frame(_NAME_HEAD.pack(OP_DELETE_TOPIC, len(t)) + t)
        with self._lock:
            self._append(record)
            self._apply(OP_DELETE_TOPIC, topic, None)

    # -------------------------------------------------------------------------------------------- reading

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosed(f"{self.where} is closed")

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        with self._lock:
            self._check_open()
            entries = self._groups.get(group)
            return None if entries is None else entries.get((topic, partition))

    def fetch_group(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        """A copy of the group's offsets keyed by (topic, partition); empty for an unknown group."""
        with self._lock:
            self._check_open()
            return dict(self._groups.get(group, ()))

    def groups(self) -> list[str]:
        """Groups with at least one committed offset, sorted."""
        with self._lock:
            self._check_open()
            return sorted(self._groups)

    @property
    def live_keys(self) -> int:
        return self._live


class OffsetStore(OffsetMap):
    """Durable committed offsets; see the module docstring for the on-disk format and the guarantees.

    Thread-safety: every method may be called from any thread; one `threading.Lock` guards the file and the map.
    `sync()` does its `fdatasync` outside that lock, so commits from one thread proceed while another syncs.
    `fetch*` return what was *written* (possibly not yet synced); a caller that acknowledges commits waits until
    `synced_seq` reaches the `written_seq` it saw right after its commit.
    """

    def __init__(self, directory: str | Path, *, compact_after: int = 100_000) -> None:
        super().__init__()  # (its `_lock` guards the file and the counters too)
        self._compact_after = _check_int(compact_after, "compact_after", 1, _I64_MAX)
        self._dir = Path(directory)
        self.where = f"offset store {self._dir}"
        self._log_path = self._dir / LOG_NAME
        self._compact_path = self._dir / COMPACT_NAME
        self._compact_lock = threading.Lock()  # one compaction at a time; close() waits for it
        self._records = 0  # records in the current file
        self._snapshot_records = 0  # records the last compaction wrote (0 after open: unknown)
        self._retry_compaction_at = 0  # after a failed compaction, records count before trying again
        self._rewrite: list[bytes] | None = None  # frames written while a compaction runs
        self._written_seq = 0
        self._synced_seq = 0
        self._compactions = 0
        self._size = 0
        self._failed: BaseException | None = None
        self._fd = -1

        makedirs_durably(self._dir)
        self._lock_fd = os.open(self._dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StorageError(f"offset store {self._dir} is already open (by this or another process)") from None
            self.recovery = self._open_and_recover()
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            os.close(self._lock_fd)
            raise

    # -------------------------------------------------------------------------------------------- recovery

    def _open_and_recover(self) -> RecoveryReport:
        removed = False
        try:
            os.unlink(self._compact_path)
            removed = True
            logger.warning("offset store %s: removed a leftover %s (interrupted compaction)", self._dir, COMPACT_NAME)
        except FileNotFoundError:
            pass
        for name in sorted(os.listdir(self._dir)):
            if name not in (LOG_NAME, COMPACT_NAME, LOCK_NAME):
                logger.warning("offset store %s: ignoring unknown file %s", self._dir, name)
        if not self._log_path.exists():
            self._create_empty_log()
        self._fd = os.open(self._log_path, os.O_WRONLY | os.O_APPEND)
        records, good_end, size, reason = self._replay()
        dropped = size - good_end
        if dropped:
            logger.warning(
                "offset store %s: dropped %d bytes at position %d of %s (%s); kept %d records",
                self._dir, dropped, good_end, LOG_NAME, reason, records,
            )
            os.ftruncate(self._fd, good_end)
        # Also makes durable what a killed process wrote but never synced, before anyone acts on it.
        os.fsync(self._fd)
        if removed:
            fsync_dir(self._dir)
        self._size = good_end
        self._records = records
        logger.info("offset store %s: recovered %d records, %d live keys", self._dir, records, self._live)
        return RecoveryReport(records, self._live, dropped, reason if dropped else None, removed)

    def _create_empty_log(self) -> None:
        # Through a temporary name, so offsets.log never exists without its complete header.
        fd = os.open(self._compact_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, FILE_HEADER)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self._compact_path, self._log_path)
        fsync_dir(self._dir)

    def _replay(self) -> tuple[int, int, int, str | None]:
        """Apply every valid record; return (records, end of the last valid record, file size, reason)."""
        size = os.fstat(self._fd).st_size
        with open(self._log_path, "rb") as f:
            head = f.read(_FILE_HEADER.size)
            if len(head) < _FILE_HEADER.size:
                if not FILE_HEADER.startswith(head):
                    raise NotAnOffsetLog(f"{self._log_path} is not an offset log (bad header {head!r})")
                # An empty or torn header (never written by us; only by hand or a filesystem bug): start over.
                os.ftruncate(self._fd, 0)
                _write_all(self._fd, FILE_HEADER)
                return 0, _FILE_HEADER.size, _FILE_HEADER.size, None
            magic, version = _FILE_HEADER.unpack(head)
            if magic != FILE_MAGIC:
                raise NotAnOffsetLog(f"{self._log_path} is not an offset log (magic {magic!r})")
            if version != FORMAT_VERSION:
                raise NotAnOffsetLog(
                    f"{self._log_path} has format version {version}; this build reads {FORMAT_VERSION}")
            frames = Frames(f, _FILE_HEADER.size, size, min_payload=MIN_PAYLOAD_BYTES, max_payload=MAX_RECORD_BYTES)
            records = 0
            apply = self._apply
            for payload in frames:
                try:
                    op, name, items = _decode(payload)
                except (ValueError, struct.error) as exc:
                    frames.stop(f"undecodable record: {exc}")
                    break
                apply(op, name, items)
                records += 1
            pos, reason = frames.end, frames.reason
        return records, pos, size, reason

    # -------------------------------------------------------------------------------------------- the map

    # -------------------------------------------------------------------------------------------- writing

    def _check_usable(self) -> None:
        """Raise unless the store is open and not failed. Caller holds the lock."""
        if self._closed:
            raise StorageClosed(f"offset store {self._dir} is closed")
        if self._failed is not None:
            raise _io_error(f"offset store {self._dir} failed after an I/O error ({self._failed})", self._failed)

    def _check_writable(self) -> None:
        """Like _check_usable, but a failed store first tries to repair itself. Caller holds the lock."""
        if self._failed is not None and not self._closed:
            # Never block on the compaction lock (compaction takes it before this lock); a compaction that runs
            # now sees the failure and stops, so the next write repairs.
            if not self._compact_lock.acquire(blocking=False):
                raise _io_error(f"offset store {self._dir} failed after an I/O error ({self._failed}); "
                                f"it is rewritten on the next write", self._failed)
            try:
                self._repair_locked()
            except OSError as exc:
                raise _io_error(f"offset store {self._dir} failed after an I/O error ({self._failed}) and cannot "
                                f"rewrite its log yet: {exc}", exc) from exc
            finally:
                self._compact_lock.release()
        self._check_usable()

    def _fail(self, exc: BaseException) -> None:
        if self._failed is None:
            self._failed = exc
            logger.error("offset store %s: I/O failure; writes are refused until the log is rewritten (tried on "
                         "each write): %s", self._dir, exc)

    def _repair_locked(self) -> None:
        """Replace the untrusted log with a fresh, synced snapshot of the map (see the module docstring).

        Caller holds both locks, so no compaction runs and nothing is written meanwhile. Raises OSError and
        leaves the store failed (and the old file in place) when any step fails."""
        cause = self._failed
        fd = -1
        try:
            fd = os.open(self._compact_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            size, records = self._write_snapshot(fd, [(g, list(e.items())) for g, e in self._groups.items()])
            _fdatasync(fd)
            os.replace(self._compact_path, self._log_path)
            fsync_dir(self._dir)
        except OSError:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(self._compact_path)  # a partial snapshot: give its space back
            except OSError:
                pass
            raise
        old_fd, self._fd = self._fd, fd
        try:
            os.close(old_fd)  # a concurrent sync() works on its own dup
        except OSError:
            pass
        self._size = size
        self._records = self._snapshot_records = records
        self._retry_compaction_at = 0
        self._synced_seq = self._written_seq  # everything in the map is in the synced new file
        self._failed = None
        logger.warning("offset store %s: recovered from the I/O failure (%s): rewrote %d live keys as %d records "
                       "(%d bytes); writes accepted again", self._dir, cause, self._live, records, size)

    def _append(self, frame: bytes) -> None:
        """Write one record (one os.write; a short write is finished or cut off). Caller holds the lock."""
        self._check_writable()
        try:
            written = os.write(self._fd, frame)
            if written != len(frame):  # disk nearly full: finish it, or learn why not (ENOSPC) and cut it off
                _write_all(self._fd, memoryview(frame)[written:])
        except OSError as exc:
            self._undo_partial_write()
            raise _io_error(f"writing {self._log_path} failed: {exc}", exc) from exc
        self._size += len(frame)
        self._records += 1
        self._written_seq += 1
        if self._rewrite is not None:
            self._rewrite.append(frame)

    def _undo_partial_write(self) -> None:
        # A torn record left in place would make recovery drop every record after it: cut it off, or give up.
        try:
            os.ftruncate(self._fd, self._size)
        except OSError as exc:
            self._fail(exc)

    # -------------------------------------------------------------------------------------------- reading

    @property
    def written_seq(self) -> int:
        """Records written in this session (each commit, commit_many and delete is one)."""
        return self._written_seq

    @property
    def synced_seq(self) -> int:
        """The written_seq that the last finished sync (or compaction) made durable."""
        return self._synced_seq

    @property
    def compactions(self) -> int:
        """Compactions finished in this session."""
        return self._compactions

    @property
    def directory(self) -> Path:
        return self._dir

    # -------------------------------------------------------------------------------------------- durability

    def sync(self) -> None:
        """Make every record written so far durable (fdatasync), then compact if due.

        Meant for a worker thread; commits from other threads proceed meanwhile (the fdatasync runs on a dup of
        the descriptor, outside the lock). A sync with nothing new to cover returns without a syscall.
        """
        with self._lock:
            self._check_writable()
            target = self._written_seq
            fd = os.dup(self._fd) if target > self._synced_seq else -1
        if fd >= 0:
            try:
                _fdatasync(fd)
            except OSError as exc:
                with self._lock:
                    self._fail(exc)
                raise _io_error(f"fdatasync of {self._log_path} failed: {exc}", exc) from exc
            finally:
                os.close(fd)
            with self._lock:
                if target > self._synced_seq:
                    self._synced_seq = target
        if self.compaction_due:
            self._maybe_compact()

    @property
    def compaction_due(self) -> bool:
        since = self._records - self._snapshot_records
        return since > self._compact_after and since > 2 * self._live and self._records >= self._retry_compaction_at

    def _maybe_compact(self) -> None:
        if not self._compact_lock.acquire(blocking=False):
            return  # another thread is compacting (or closing)
        try:
            if self._closed or not self.compaction_due:
                return
            try:
                self._compact_locked()
            except StorageClosed:
                return
            except Exception as exc:
                if self._failed is not None:
                    raise
                # The log is intact and still in use; try again after another compact_after records.
                self._retry_compaction_at = self._records + self._compact_after
                logger.warning("offset store %s: compaction failed, will retry later: %s", self._dir, exc)
        finally:
            self._compact_lock.release()

    def compact(self) -> None:
        """Rewrite the log as one snapshot of the live map (normally `sync()` does this when due)."""
        with self._compact_lock:
            self._compact_locked()

    def _compact_locked(self) -> None:
        with self._lock:
            if self._failed is not None and not self._closed:
                try:
                    self._repair_locked()
                except OSError:
                    pass
                self._check_usable()
                return  # the repair wrote a fresh snapshot: nothing left to compact
            self._check_usable()
            snapshot = [(group, list(entries.items())) for group, entries in self._groups.items()]
            self._rewrite = []
        tmp_fd = -1
        installed = False
        try:
            tmp_fd = os.open(self._compact_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            size, records = self._write_snapshot(tmp_fd, snapshot)
            del snapshot
            _fdatasync(tmp_fd)  # the bulk, without holding the lock
            with self._lock:
                self._check_usable()
                tail = b"".join(self._rewrite)
                tail_records = len(self._rewrite)
                self._rewrite = None
                _write_all(tmp_fd, tail)
                _fdatasync(tmp_fd)
                os.replace(self._compact_path, self._log_path)
                installed = True
                # Until the directory is synced a power loss may bring back the old name; nothing new is written
                # (or acknowledged) to the new file before that.
                try:
                    fsync_dir(self._dir)
                except OSError as exc:
                    self._fail(exc)
                    raise _io_error(f"fsync of directory {self._dir} failed: {exc}", exc) from exc
                old_fd, self._fd, tmp_fd = self._fd, tmp_fd, -1
                os.close(old_fd)  # a concurrent sync works on its own dup
                self._size = size + len(tail)
                self._records = records + tail_records
                self._snapshot_records = records
                self._retry_compaction_at = 0
                self._synced_seq = self._written_seq  # everything is in the synced new file
                self._compactions += 1
            logger.info(
                "offset store %s: compacted to %d records (%d bytes), %d live keys",
                self._dir, self._records, self._size, self._live,
            )
        except BaseException:
            with self._lock:
                self._rewrite = None
            if not installed:
                try:
                    os.unlink(self._compact_path)
                except OSError:
                    pass
            raise
        finally:
            if tmp_fd >= 0:
                os.close(tmp_fd)

    @staticmethod
    def _write_snapshot(fd: int, snapshot: list) -> tuple[int, int]:
        """Write header + one COMMIT record per group (split under MAX_RECORD_BYTES); return (bytes, records)."""
        out = bytearray(FILE_HEADER)
        total = 0
        records = 0
        limit = MAX_RECORD_BYTES
        pack = _ENTRY.pack
        for group, items in snapshot:
            g = group.encode("utf-8")
            start = _COMMIT_HEAD.size + len(g)
            parts: list[bytes] = []
            count = 0
            size = start
            for (topic, partition), value in items:
                t = topic.encode("utf-8")
                m = value.metadata.encode("utf-8")
                entry_size = _ENTRY.size + len(t) + len(m)
                if size + entry_size > limit:
                    out += frame(_COMMIT_HEAD.pack(OP_COMMIT, len(g), count) + g + b"".join(parts))
                    records += 1
                    parts, count, size = [], 0, start
                parts += (pack(partition, value.offset, value.commit_time_ms, len(t), len(m)), t, m)
                count += 1
                size += entry_size
            if count:
                out += frame(_COMMIT_HEAD.pack(OP_COMMIT, len(g), count) + g + b"".join(parts))
                records += 1
            if len(out) >= _COMPACT_CHUNK_BYTES:
                _write_all(fd, out)
                total += len(out)
                out.clear()
        _write_all(fd, out)
        total += len(out)
        return total, records

    def close(self) -> None:
        """Sync and close. Waits for a running compaction. Later calls (except close) raise StorageClosed."""
        with self._compact_lock, self._lock:
            if self._closed:
                return
            if self._failed is not None:
                try:  # space may have returned since the last write: leave a complete, synced log behind
                    self._repair_locked()
                except OSError:
                    pass
            self._closed = True
            failed = self._failed
            error: OSError | None = None
            try:
                if failed is None:
                    _fdatasync(self._fd)
                    self._synced_seq = self._written_seq
            except OSError as exc:
                error = exc
            finally:
                os.close(self._fd)
                self._fd = -1
                os.close(self._lock_fd)  # releases the flock
        if failed is not None:
            raise StorageError(f"offset store {self._dir} was closed after an I/O failure: {failed}") from failed
        if error is not None:
            raise StorageError(f"final fdatasync of {self._log_path} failed: {error}") from error

    def __enter__(self) -> OffsetStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("failed" if self._failed else "open")
        return (f"<OffsetStore {str(self._dir)!r} {state} keys={self._live} written={self._written_seq} "
                f"synced={self._synced_seq}>")
