"""The log of one topic partition: an ordered list of segments, the last one active.

On disk: the partition directory `<data>/topics/<topic>/<partition>/` holds the segments' files (see
`logway.storage.segment`) and `recovery-point`: the base offset (decimal text) below which every segment and its
indexes are known to be synced — written, atomically, by the first sync after a roll. After an unclean stop,
segments from there on are recovered in full (every batch checksummed, indexes rebuilt): a power cut may have
left holes or garbage anywhere in what was never synced; older segments only have their tails checked.
`log-start-offset` (decimal text, present once records were deleted with `delete_records`): records below it are
gone even where their segment still holds them — written durably (a synced temporary file renamed into place, the
directory synced) before `delete_records` returns, read at open; segments wholly below it are deleted then too.

Offsets are contiguous from the log start offset (the first segment's base offset, or `log-start-offset` when that
is further on) to the log end offset (the next offset to assign).

Visibility: readers see every append, or — with `reads_need_sync`, which the gateway sets under `flush: always` —
only what `sync()` made durable (the *high watermark*, Kafka's name for the end of what consumers may read). Then
no consumer reads, and commits an offset past, a record that a power cut could still take back.

A failed sync: the kernel may have dropped what it could not write (Linux marks those pages clean, so no later sync
writes them: PostgreSQL's "fsyncgate"), and anything appended after it would sit behind bytes that may never reach
the disk. With `reads_need_sync` nothing past the durable end was acknowledged, so the log is cut back there
(`cuts` counts it; a caller that began waiting for a sync before a cut must not take a later sync for its own, see
`cuts`); what comes next is written again from that point, fresh pages the next sync writes. If even the cut fails,
the partition refuses appends (`broken`) until it is opened again; its close then counts as unclean.

Compaction (topics with `cleanup.policy` compact): the log cleaner (`logway.storage.cleaner`) replaces runs of
frozen segments with cleaned ones (`install_cleaned`); a swap it committed but did not finish before a crash is
finished when the partition is opened (`_finish_cleaning`). `cleaner-offset` holds where the part not yet cleaned
begins.

Thread-safety: appends, rolls, retention and sync bookkeeping hold `lock`; reads work on a snapshot of the
segment list and of the visible end, so a reader in a worker thread never blocks an append. What takes segments out
of the log — retention, `delete_records`, the cleaner's swap — also holds `_trim_lock` meanwhile (it removes files
outside `lock`), and the cleaner holds `_clean_lock` while it cleans the partition (`stop_cleaning` waits for it).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, NamedTuple

from .config import TopicConfig
from .errors import (BatchTooLarge, CleaningStopped, CorruptBatch, InvalidBatchOffset, InvalidRecord,
                     OffsetOutOfRange, StorageError, StorageIOError)
from .files import fsync_dir, makedirs_durably, quarantine, write_synced
from .formats import BatchFormat
from .openfiles import FileHandle, OpenFiles
from .segment import (CLEANED, MAX_JUMP_OFFSET, MAX_OFFSET, MAX_RELATIVE_OFFSET, Lookups, Segment, read_cleaned_end,
                      segment_name)
from .txnindex import INDEX_NAME as TXN_INDEX, TxnIndex
from .cleaner import CLEANER_OFFSET, SWAP, CleanedSegment

log = logging.getLogger("logway.storage")

#: Errors of a sync that fail it before anything reached the device (no descriptor, no memory to open the file):
#: nothing the kernel held was dropped, so nothing is cut for them.
NOTHING_WRITTEN = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})

RECOVERY_POINT = "recovery-point"
LOG_START = "log-start-offset"
#: The files of a segment, by extension (`<base>.<ext>`).
SEGMENT_FILES = ("log", "index", "timeindex", "checksums", CLEANED[1:])
#: An empty file in a partition of a format with side checksums: every segment of it has its `.checksums` file, so
#: one without is unverifiable (emptied), never a partition of an older logway (rebuilt from its data).
CHECKSUMMED = "checksummed"


class AppendResult(NamedTuple):
    base_offset: int  # offset of the first record appended
    last_offset: int  # offset of the last record appended
    log_append_time_ms: int


@dataclass(slots=True, frozen=True)
class ReadSlice:
    """Whole batches of a partition: a byte range of one segment file — send it with os.sendfile or pread it — or,
    from a backend that keeps no files (PostgreSQL, logway.storage.pg), bytes in memory (`data`; `file` is None).

    `file` (the segment's data file) stays open while the slice is in use, even if retention deletes the segment or
    the engine's `OpenFiles` lets the file go meanwhile. What is derived from a slice's bytes is known by `segment`
    (its `uid` and `generation`) and `position`: a `Segment` and a file position, or in a backend without files the
    partition's byte stream and a position in it (every byte the partition ever stored counted once).
    """

    segment: Segment
    file: FileHandle | None
    position: int
    length: int
    first_offset: int  # first offset of the first batch in the range (may be below the requested offset)
    end_offset: int  # offset just after the last batch in the range
    data: bytes | memoryview | None = None  # the range's bytes, when in memory (a segment's last batch; no file)

    def fileno(self) -> int:
        return self.file.fd

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        return os.pread(self.file.fd, self.length, self.position)

    def head(self, n: int) -> bytes:
        """The first `n` bytes of the range (a batch header, without reading the whole range)."""
        if self.data is not None:
            return self.data[:n]
        return os.pread(self.file.fd, min(n, self.length), self.position)


@dataclass(slots=True)
class RecoveryReport:
    truncated_bytes: int = 0
    segments_dropped: int = 0
    unclean: bool = False
    indexes_rebuilt: int = 0  # segments whose offset and time indexes recovery rewrote


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, fmt: BatchFormat, config: TopicConfig,
                 *, clean_shutdown: bool, clock: Callable[[], float] = time.time,
                 quarantine_dir: str | None = None, reads_need_sync: bool = False, lookups: Lookups,
                 files: OpenFiles) -> None:
        """`quarantine_dir`: where recovery moves what it cannot use (segments after a hole in the log, entries of
        the wrong kind); without one, dropped segments are deleted and odd entries renamed `*.corrupt-<hex>`.
        `reads_need_sync`: readers see only what `sync()` made durable (see the module docstring). `lookups`: the
        bound on the lookups its segments remember, and `files` the budget of open files they open theirs through,
        both shared with other partitions (the engine's)."""
        self.directory = directory
        self.quarantine_dir = quarantine_dir
        self.topic = topic
        self.partition = partition
        self.fmt = fmt
        self.config = config
        self.clock = clock
        self.lock = threading.Lock()
        self._sync_lock = threading.Lock()  # one sync of this partition at a time (the syncs run outside `lock`)
        self.explicit_offsets = bool(getattr(fmt, "explicit_offsets", False))
        self.recovery = RecoveryReport(unclean=not clean_shutdown)
        self._unsynced: list[Segment] = []  # rolled segments whose data may not be synced yet
        self._dir_dirty = False
        self._first_offset: tuple[Segment, int] | None = None  # (first segment, its first offset)
        self.reads_need_sync = reads_need_sync
        self._lookups = lookups
        self._files = files
        # (end offset, its segment, that segment's size then): everything before it is on stable storage.
        self._durable: tuple[int, Segment | None, int] = (0, None, 0)
        self._log_start = 0  # records below this were deleted (`delete_records`); see `log_start_offset`
        #: How many times a failed sync cut the log back to its durable end (see the module docstring): a writer that
        #: reads it before appending and finds it changed once its sync is done was cut, or may have been — its
        #: write is not durable, whatever that sync says.
        self.cuts = 0
        #: The failed sync that made the last cut (what a writer whose append it cut is answered).
        self.cut_error: OSError | None = None
        #: The failed sync whose cut failed too: appends are refused with it until the partition is opened again.
        self.broken: OSError | None = None
        self._trim_lock = threading.Lock()  # held while segments are taken out (retention, delete_records, cleaning)
        self._clean_lock = threading.Lock()  # held by the cleaner while it cleans this partition
        self._retiring = False  # closing or deleted: the cleaner stops (`stop_cleaning`)
        #: A cleaned segment's swap committed but could not be finished (an I/O error): the next open finishes it;
        #: until then nothing more is taken out of the log.
        self._swap_incomplete = False
        makedirs_durably(directory)
        self.segments: list[Segment] = self._load(clean_shutdown)
        try:
            self._open(clean_shutdown)
        except BaseException:  # nothing of this partition stays open
            for seg in self.segments:
                seg.close()
            if getattr(self, "txns", None) is not None:
                self.txns.close()
            raise

    def _open(self, clean_shutdown: bool) -> None:
        """The rest of opening, once the segments are: the log start, the transaction index, what a crash left."""
        directory = self.directory
        self._open_log_start()
        # Transactional writes; entries past what recovery kept are cut (their batches were lost).
        self.txns = TxnIndex(directory, self.log_start_offset, self.log_end_offset, self._files)
        if self._dir_dirty:  # a new segment's files (or recovery's changes) exist durably before any append
            fsync_dir(directory)
            self._dir_dirty = False
        active = self.segments[-1]
        if clean_shutdown:
            self._durable = (active.next_offset, active, active.size)
        else:
            # What a killed process wrote and recovery kept is served from now on: make it durable first.
            self._unsynced = [s for s in self.segments[:-1] if s.base_offset >= self._recovery_point]
            self.sync()

    # -- opening and recovery ----------------------------------------------------------------------------
    def _read_recovery_point(self) -> int:
        try:
            with open(os.path.join(self.directory, RECOVERY_POINT), "rb") as f:
                text = f.read(32).strip()
        except OSError:
            return 0  # none yet (or unreadable): every segment is recovered in full after an unclean stop
        return int(text) if text.isdigit() else 0

    def _write_recovery_point(self, base: int) -> None:
        path = os.path.join(self.directory, RECOVERY_POINT)
        write_synced(path + ".tmp", b"%d\n" % base)
        os.replace(path + ".tmp", path)  # the caller fsyncs the directory
        self._recovery_point = base

    def _load(self, clean: bool) -> list[Segment]:
        self._recovery_point = self._read_recovery_point()
        self._finish_cleaning()
        self.cleaned_upto = self._read_offset_file(CLEANER_OFFSET)
        bases = []
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            stem, dot, ext = name.partition(".")
            if ext in SEGMENT_FILES and len(stem) == 20 and stem.isdigit():
                if not os.path.isfile(path):
                    self._set_aside(path, "not a regular file")
                elif int(stem) > MAX_JUMP_OFFSET:
                    self._set_aside(path, f"base offset beyond {MAX_JUMP_OFFSET}, the furthest a batch may reach "
                                          f"with offsets of its own (a sequence number an older logway let through)")
                elif ext == "log":
                    bases.append(int(stem))
            elif name.endswith((".tmp", ".deleted")) and os.path.isfile(path):
                os.unlink(path)
            elif name not in (RECOVERY_POINT, LOG_START, TXN_INDEX, CHECKSUMMED, CLEANER_OFFSET):
                log.warning("%s: ignoring unknown file %s", self.directory, name)
        bases.sort()
        now = self._now_ms()
        # Orphan index files (their data file is gone) are stale: remove them.
        for name in os.listdir(self.directory):
            stem, _, ext = name.partition(".")
            path = os.path.join(self.directory, name)
            if (ext in SEGMENT_FILES[1:] and stem.isdigit() and int(stem) not in bases
                    and os.path.isfile(path)):
                os.unlink(path)
        marked = os.path.exists(os.path.join(self.directory, CHECKSUMMED))
        segments: list[Segment] = []
        try:
            return self._open_segments(bases, segments, marked, clean, now)
        except BaseException:  # (out of descriptors, space, ...): nothing of this partition stays open
            for seg in segments:
                seg.close()
            raise

    def _open_segments(self, bases: list[int], segments: list[Segment], marked: bool, clean: bool,
                       now: int) -> list[Segment]:
        """Open and recover the segments based at `bases` (a new empty one when there is none), each added to
        `segments` as soon as it is open (the caller closes them if this fails)."""
        if not bases:
            segments.append(self._new_segment(0, now))
            self._mark_checksummed(segments[0], marked)
            return segments
        for i, base in enumerate(bases):
            last = i == len(bases) - 1
            created = now
            if last:
                created = int(os.path.getmtime(os.path.join(self.directory, segment_name(base) + ".log")) * 1000)
            seg = self._segment(base, active=last, created_ms=created)
            segments.append(seg)
        # Frozen segments: their batches were complete when they rolled; check the tail after the last index
        # entry and the index itself. The active one is fully checksummed after an unclean shutdown.
        older_has_checksums = False  # a segment missing side checksums after one that has them is unverifiable
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            legacy = not (marked or older_has_checksums)
            older_has_checksums = older_has_checksums or (seg.checksums is not None and seg.checksums.found)
            full = not clean and (last or seg.base_offset >= self._recovery_point)
            if seg.checksums is not None and not seg.checksums.found:
                # Recovery (or opening, for the active segment) creates the checksum file: its name must be
                # durable before anything appended to the segment is acknowledged, or a power cut would leave
                # that data unverifiable (and emptied).
                self._dir_dirty = True
            dropped = seg.recover(full=full, legacy_checksums=legacy)
            self.recovery.truncated_bytes += dropped
            self.recovery.indexes_rebuilt += seg.indexes_rebuilt
            expected_end = segments[i + 1].base_offset if not last else None
            # A segment may end below the next one's base only where the next begins with a batch that names that
            # base itself (a far jump of a format with explicit offsets); otherwise what is missing is a hole.
            hole = expected_end is not None and seg.next_offset != expected_end and not (
                self.explicit_offsets and seg.next_offset < expected_end and segments[i + 1].starts_at_own_base())
            if expected_end is not None and (dropped or hole):
                # A hole inside the log: keep the consistent prefix, drop what follows (as Kafka does).
                later = segments[i + 1:]
                log.error("%s: segment %s ends at offset %d but the next starts at %d; dropping %d later segment(s)",
                          self.directory, segment_name(seg.base_offset), seg.next_offset, expected_end, len(later))
                for other in later:
                    self.recovery.truncated_bytes += other.size
                    other.close()
                    if self.quarantine_dir is None:
                        other.delete()
                    else:
                        for path in (other.log_path, *other.side_paths()):
                            if os.path.lexists(path):
                                self._set_aside(path, f"dropped after the hole at offset {seg.next_offset}")
                self.recovery.segments_dropped += len(later)
                self._dir_dirty = True  # the deletions durable before new segments take their place
                del segments[i + 1:]
                seg.close()
                seg = self._segment(seg.base_offset, active=True, created_ms=now)
                seg.recover(full=False)
                segments[i] = seg
                break
        if self.recovery.truncated_bytes:
            log.warning("%s-%d: recovery dropped %d bytes", self.topic, self.partition, self.recovery.truncated_bytes)
        self._mark_checksummed(segments[0], marked)
        return segments

    def _mark_checksummed(self, first: Segment, marked: bool) -> None:
        """Write the CHECKSUMMED marker of a side-checksum format's partition that lacks it (a new one, or one of an
        older logway whose checksums recovery just rebuilt); durable with the directory before any append."""
        if first.checksums is not None and not marked:
            write_synced(os.path.join(self.directory, CHECKSUMMED), b"")
            self._dir_dirty = True

    def _finish_cleaning(self) -> None:
        """Finish what a cleaning left when the process stopped (see logway.storage.cleaner): a swap that reached its
        commit point (`<base>.log.swap` exists) is completed — the segments it replaces, based in (base, its end),
        are removed and its files renamed into place, the data file last — and the files of one that did not are
        removed (those still `*.tmp` go with the other leftovers in `_load`)."""
        names = os.listdir(self.directory)
        swaps = [n for n in names if n.endswith(SWAP) and n[:20].isdigit() and n[20:21] == "."]
        if not swaps:
            return
        committed = {n[:20] for n in swaps if n == n[:20] + ".log" + SWAP}
        for stem in sorted(committed):
            marker = os.path.join(self.directory, stem + CLEANED)
            end = read_cleaned_end(marker + SWAP if os.path.exists(marker + SWAP) else marker)
            if end is None:  # (written synced before the commit point: only damage gets here)
                log.error("%s: the cleaned segment %s names no end: it is discarded", self.directory, stem)
                committed.discard(stem)
                continue
            base = int(stem)
            for name in names:  # the segments it replaces
                other, _, ext = name.partition(".")
                if ext in SEGMENT_FILES and other.isdigit() and len(other) == 20 and base < int(other) < end:
                    os.unlink(os.path.join(self.directory, name))
            for ext in SEGMENT_FILES[1:] + SEGMENT_FILES[:1]:  # the data file last
                path = os.path.join(self.directory, f"{stem}.{ext}")
                if os.path.exists(path + SWAP):
                    os.replace(path + SWAP, path)
            log.warning("%s: finished swapping in the cleaned segment %s (the process stopped during the swap)",
                        self.directory, stem)
        for name in swaps:
            if name[:20] not in committed and os.path.exists(os.path.join(self.directory, name)):
                os.unlink(os.path.join(self.directory, name))  # never committed: the old segments stand
        fsync_dir(self.directory)

    def _set_aside(self, path: str, why: str) -> None:
        """Move one file (or an entry of the wrong kind) out of the partition directory, with an error log line."""
        if self.quarantine_dir is not None:
            dest = quarantine(path, self.quarantine_dir, f"{self.topic}-{self.partition}.{os.path.basename(path)}")
        else:
            dest = f"{path}.corrupt-{uuid.uuid4().hex[:8]}"
            os.rename(path, dest)
        log.error("%s: %s: moved to %s", path, why, dest)

    def _segment(self, base: int, *, active: bool, created_ms: int) -> Segment:
        return Segment(self.directory, base, self.fmt, active=active, index_interval=self.config.index_interval_bytes,
                       created_ms=created_ms, lookups=self._lookups, files=self._files)

    def _new_segment(self, base: int, now_ms: int) -> Segment:
        seg = self._segment(base, active=True, created_ms=now_ms)
        seg.next_offset = base
        if seg.checksums is not None:  # made with its data file, not left by an older logway (see `recover`)
            seg.checksums.found = True
        self._dir_dirty = True
        return seg

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- state -------------------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        """The first offset a reader may ask for: the first segment's base, or further on after `delete_records`."""
        base = self.segments[0].base_offset
        return base if base >= self._log_start else self._log_start

    @property
    def first_offset(self) -> int:
        """The offset of the first record actually present: the log start offset, or further on when the log
        begins with a gap (formats with explicit offsets); the log end offset when the log is empty."""
        first = self.segments[0]
        start = self.log_start_offset
        cached = self._first_offset
        if cached is not None and cached[0] is first and cached[1] >= start:
            return cached[1]
        rng = self.read(start, 1)
        value = max(rng.first_offset, start) if rng is not None else self.high_watermark
        if rng is not None:
            self._first_offset = (first, value)
        return value

    @property
    def log_end_offset(self) -> int:
        """The next offset an append gets (what was appended, synced or not)."""
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        """The end of what readers see: the log end offset, or with `reads_need_sync` the durable end."""
        return self._durable[0] if self.reads_need_sync else self.segments[-1].next_offset

    @property
    def durable_offset(self) -> int:
        """Every offset below this is known to be on stable storage."""
        return self._durable[0]

    def watermark(self) -> tuple[int, int, int]:
        """(high watermark, the base offset of the segment it ends in, that segment's size then): what a reader
        parked at the end compares later snapshots with (a different base means a roll). Plain numbers: a parked
        reader holds no segment."""
        _, end, segment, size = self._visible()
        return end, (segment.base_offset if segment is not None else -1), size

    def _visible(self) -> tuple[list[Segment], int, Segment | None, int]:
        """(segments, visible end offset, the segment holding that end, its size then): one consistent view."""
        segments = self.segments
        if self.reads_need_sync:
            end, seg, size = self._durable
            return segments, end, seg, size
        active = segments[-1]
        end = active.next_offset  # read before the size: an append sets the size first
        return segments, end, active, active.size

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp in the log, as its segments know it (-1: none); `offset_for_timestamp` of it
        is the first record that has it."""
        return max((seg.max_timestamp for seg in self.segments), default=-1)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    # -- appending ---------------------------------------------------------------------------------------
    def append(self, data, *, producer: tuple[int, int] | None = None, infos=None) -> AppendResult:
        """Validate and append one or more whole batches; all of them or none are written.

        Offsets are assigned here: each batch is stamped with its base offset (formats with explicit offsets
        keep theirs, which may skip ahead). Raises CorruptBatch, BatchTooLarge or InvalidBatchOffset without writing
        anything; an OSError (e.g. disk full) leaves the log as it was. `producer` = (producer id, epoch): the
        batches belong to that producer's open transaction (recorded in `txns` before they are written). `infos`:
        what `fmt.scan` would say of each batch, in order, when the caller parsed the headers already (see
        `scan_batches`).
        """
        batches = scan_batches(self.fmt, self.config, self.topic, data, infos)
        with self.lock:
            return self._append_locked(batches, producer)

    def _batches(self, data) -> tuple:
        return scan_batches(self.fmt, self.config, self.topic, data)

    def _append_locked(self, batches, producer: tuple[int, int] | None) -> AppendResult:
        """Write validated `batches` (the caller holds `lock`)."""
        if self.broken is not None:
            raise _io_error(f"{self.directory}: a sync failed and its unsynced tail could not be cut: appends are "
                            f"refused until the gateway restarts", self.broken)
        fmt = self.fmt
        now = int(self.clock() * 1000)
        cfg = self.config
        seg = self.segments[-1]
        base = offset = seg.next_offset
        undo = (self.segments, seg.size, seg.next_offset)
        if producer is not None:  # transactional: consecutive offsets (no format with explicit ones is)
            self.txns.add_data(producer[0], producer[1], base, base + sum(b[3] + 1 for b in batches) - 1)
            if self.reads_need_sync:
                # The entry durable before the batch can be: written back early, or kept by a power cut, a
                # batch without its entry would pass for committed data (TANK bundles do not say whose they are).
                self._sync_txn_index()
        try:
            for batch, size, explicit, delta, max_ts in batches:
                start = batch_offset(offset, explicit, delta, self.explicit_offsets)
                if offset == base:
                    base = start
                offset = start  # (past a gap, with offsets of its own: offsets up to here are never used)
                if offset + delta - seg.base_offset > MAX_RELATIVE_OFFSET:
                    seg = self._roll(now, offset)  # a far jump: a new segment based where the batch starts
                elif seg.size and (seg.size + size > cfg.segment_bytes or now - seg.created_ms >= cfg.roll_ms):
                    seg = self._roll(now)
                seg.append(fmt.stamp(batch, offset), size, offset, offset + delta, max_ts)
                offset += delta + 1
        except BaseException:  # disk full, a refused offset, anything: the log stays as it was
            self._undo(undo)
            if producer is not None:
                self.txns.undo_data(producer[0])
            raise
        return AppendResult(base, offset - 1, now)

    # -- transactions ------------------------------------------------------------------------------------
    def _sync_txn_index(self) -> None:
        if self.txns.sync():  # a new file: its name durable too
            fsync_dir(self.directory)

    def end_transaction(self, producer_id: int, epoch: int, *, committed: bool, marker=None) -> bool:
        """End the producer's open transaction here: append its `marker` batch when the format has one (a Kafka
        control batch), then record the end. False when the producer has no open transaction here (already
        ended: a completion that is repeated after a crash writes nothing twice).

        The marker and the end entry are written under one hold of `lock`, so the index's entries stay in offset
        order (an append in between would put its entry before this end: loading drops every entry after one
        whose batch a crash lost, and would forget this end with it)."""
        batches = self._batches(marker) if marker is not None else None
        with self.lock:
            if not self.txns.is_open(producer_id):
                return False
            if batches is not None:
                offset = self._append_locked(batches, None).base_offset
                return self.txns.end(producer_id, epoch, committed=committed, offset=offset, marker=True)
            return self.txns.end(producer_id, epoch, committed=committed, offset=self.log_end_offset, marker=False)

    @property
    def last_stable_offset(self) -> int:
        """Where the oldest open transaction begins (readers of committed data stop there); the high watermark
        when no transaction is open."""
        return self.stable_bounds()[0]

    def stable_bounds(self) -> tuple[int, int]:
        """(last stable offset, high watermark) of one instant. Read apart, the two can straddle a transaction's
        end and the sync that makes its marker visible (with `reads_need_sync`), e.g. an LSO already past a
        transaction that just ended with a high watermark read after the marker became visible."""
        if not self.txns.has_open:  # the usual case, without the lock: only appends, in the caller's thread (the
            # event loop's), open transactions; worker threads only end them. `high_watermark` and
            # `log_start_offset` written out: every read and every parked poll's check asks this.
            hw = self._durable[0] if self.reads_need_sync else self.segments[-1].next_offset
            start = self.segments[0].base_offset
            if start < self._log_start:
                start = self._log_start
            return (hw if hw > start else start), hw
        with self.lock:  # transactions end in worker threads: no end, append or sync half seen
            hw = self.high_watermark
            return max(self.txns.last_stable_offset(hw), self.log_start_offset), hw

    def _undo(self, undo) -> None:
        """Put the log back as it was before a failed append: drop segments it created, reopen the active one
        (frozen or replaced by a roll) and cut it back to its old size."""
        original, size, next_offset = undo
        kept = {id(s) for s in original}
        for extra in self.segments:
            if id(extra) not in kept:
                extra.close()
                extra.delete()
        active = original[-1]
        if not active.active or not os.path.exists(active.log_path):
            replaced = active
            active.close()
            active = self._segment(active.base_offset, active=True, created_ms=active.created_ms)
            end, seg, synced = self._durable
            if seg is replaced:  # the visible end stays where it was, in the reopened segment
                self._durable = (end, active, synced)
        self.segments = original[:-1] + [active]
        self._unsynced = [s for s in self._unsynced if s is not active]
        active.rollback(size)
        active.recover(full=False)
        active.next_offset = next_offset

    def _roll(self, now_ms: int, base: int | None = None) -> Segment:
        """Freeze the active segment and start a new one at `base` (default: where the log ends). An empty
        active segment is replaced rather than frozen."""
        old = self.segments[-1]
        base = old.next_offset if base is None else base
        if old.size == 0:
            old.close()
            old.delete()
            seg = self._new_segment(base, now_ms)
            self.segments = self.segments[:-1] + [seg]
            return seg
        old.freeze()
        self._unsynced.append(old)
        seg = self._new_segment(base, now_ms)
        self.segments = self.segments + [seg]  # a new list: readers iterate their own snapshot
        return seg

    def roll(self) -> None:
        """Force a roll of a non-empty active segment (tests, admin)."""
        with self.lock:
            if self.segments[-1].size:
                self._roll(self._now_ms())

    # -- reading -----------------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, until: int | None = None, wait: bool = True) -> ReadSlice | None:
        """The byte range of whole batches starting with the batch that holds `offset`. (`wait`: for a backend
        whose reads may wait for their bytes, which raises `ReadWouldWait` without it; a range of a file is read
        later, through the slice.)

        At least one whole batch is returned when one exists, even if larger than max_bytes; the range never
        crosses a segment boundary nor the high watermark, nor `until` (e.g. the last stable offset: a batch
        start). None at or past the high watermark (up to the log end: appended, not yet visible) or `until`.
        OffsetOutOfRange below the log start or past the log end (the error carries the high watermark as the
        end a client may know). A tailing reader (`offset` in the last batch appended, which ends at the visible
        end) gets that batch from the segment's memory of it, without a lookup.
        """
        segments, end_offset, last, last_size = self._visible()
        if until is not None and until < end_offset:
            if offset >= until:
                return None if offset <= end_offset else self.read(offset, max_bytes)  # (the same error)
            return self._read_until(offset, max_bytes, until)
        tail = last.last_batch if last is not None else None
        if (tail is not None and tail[1] <= offset <= tail[3] and tail[0] + tail[2] == last_size
                and offset >= self._log_start):
            # A tailing reader: the batch holding `offset` is the last appended and ends at the visible end.
            return ReadSlice(last, last.handle(), tail[0], tail[2], tail[1], end_offset, tail[4])
        start = max(segments[0].base_offset, self._log_start)
        if offset < start or offset > max(end_offset, self.log_end_offset):
            raise OffsetOutOfRange(f"offset {offset} is outside [{start}, {end_offset}]",
                                   log_start=start, log_end=end_offset)
        if offset >= end_offset:
            return None
        i = _find_segment(segments, offset)
        while i < len(segments):
            seg = segments[i]
            if seg is last:
                end, end_off = last_size, end_offset
            elif seg.base_offset >= end_offset:
                return None  # rolled after the visible end
            else:
                end, end_off = seg.size, seg.next_offset
            found = seg.locate(offset, end) if end else None
            if found is not None:
                position, first = found
                stop, stop_offset = seg.range_end(position, first, max(max_bytes, 1), end)
                if stop_offset < 0:
                    stop_offset = end_off
                last_batch = seg.last_batch
                if last_batch is not None and last_batch[0] == position and last_batch[2] == stop - position:
                    return ReadSlice(seg, seg.handle(), position, stop - position, first, stop_offset, last_batch[4])
                return ReadSlice(seg, seg.handle(), position, stop - position, first, stop_offset)
            if seg is last:
                return None
            i += 1  # nothing at or after offset in this segment (e.g. a gap): try the next one
        return None

    def _read_until(self, offset: int, max_bytes: int, until: int) -> ReadSlice | None:
        """`read` bounded by `until` (< the visible end): the slice cut before the batch that holds `until`."""
        rng = self.read(offset, max_bytes)
        if rng is None or rng.end_offset <= until:
            return rng
        seg = rng.segment
        found = seg.locate(until, rng.position + rng.length)
        if found is None or found[0] <= rng.position:
            return None  # the first batch already reaches `until`
        return ReadSlice(seg, rng.file, rng.position, found[0] - rng.position, rng.first_offset, found[1])

    def aborted(self, start: int, end: int):
        """The aborted transactions with data in [start, end) (see logway.storage.txnindex)."""
        return self.txns.aborted(start, end)

    def tail_offset(self, max_bytes: int) -> int:
        """The first offset of the batch that starts about `max_bytes` before the end of the log (an index
        point, so possibly a little further back); the log start offset when the log is smaller."""
        remaining = max_bytes
        segments = self.segments
        for seg in reversed(segments):
            size = seg.size
            if size >= remaining:
                rel, _ = seg.index.floor_position(size - remaining)
                return max(seg.base_offset + rel, self._log_start)
            remaining -= size
        return self.log_start_offset

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first visible offset whose record timestamp is >= timestamp, or None when there is none."""
        segments, end_offset, last, last_size = self._visible()
        for seg in segments:
            if seg.base_offset >= end_offset and seg is not last:
                break
            if seg.max_timestamp < timestamp:
                continue
            end = last_size if seg is last else seg.size
            found = seg.time_lookup(timestamp, end)
            if found is None:
                continue
            position, first, size = found
            refine = getattr(self.fmt, "offset_for_timestamp", None)
            if refine is not None:
                exact = refine(memoryview(seg.pread(position, size)), first, timestamp)
                if exact is not None:
                    first = exact
            if first < self._log_start:  # in a batch that straddles the log start: its deleted part is not served
                first = self._log_start
                if first >= end_offset:
                    return None
            return first
        return None

    # -- durability --------------------------------------------------------------------------------------
    def sync(self) -> int:
        """Make every append made before this call durable (fdatasync); returns the durable end offset.

        Safe to call from a worker thread while appends continue: the syncs run outside the lock. Segments rolled
        since the last sync are synced with their indexes, and new segment files' names with the directory.
        """
        with self._sync_lock:
            return self._sync()

    def _sync(self) -> int:
        with self.lock:
            active = self.segments[-1]
            target, size = active.next_offset, active.size
            if target <= self._durable[0] and not self._dir_dirty and not self.txns.dirty:
                return self._durable[0]
            pending, self._unsynced = self._unsynced, []
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        try:
            # Transaction entries first: a batch is never durable without the entry that says whose it is.
            if self.txns.sync():
                dir_dirty = True
            for seg in pending:
                seg.sync(indexes=True)
            active.sync()
            if pending:  # every segment before the active one is now synced, indexes included
                self._write_recovery_point(active.base_offset)
                dir_dirty = True
            if dir_dirty:
                fsync_dir(self.directory)
        except BaseException as exc:
            with self.lock:  # the next sync tries again
                self._unsynced = pending + self._unsynced
                self._dir_dirty = self._dir_dirty or dir_dirty
                if self.reads_need_sync and isinstance(exc, OSError) and exc.errno not in NOTHING_WRITTEN:
                    self._cut_to_durable(exc)
            raise
        with self.lock:
            if target > self._durable[0]:
                self._durable = (target, active, size)
        return target

    def _cut_to_durable(self, exc: OSError) -> None:
        """A sync failed with `exc` (`reads_need_sync`: nothing past the durable end was acknowledged): cut the log
        back to its durable end, so that what comes next is not written behind bytes the kernel may have dropped
        (the caller holds `lock`). If that fails too, the partition is `broken`."""
        end, seg, size = self._durable
        if seg is None:  # nothing synced since the partition was opened, on an empty log
            seg, size, end = self.segments[0], 0, self.segments[0].base_offset
        try:
            if not any(s is seg for s in self.segments):
                raise OSError(exc.errno, f"the durable end's segment {segment_name(seg.base_offset)} is gone")
            kept = self.segments[:next(i for i, s in enumerate(self.segments) if s is seg) + 1]
            dropped = self.segments[-1].next_offset - end
            self._undo((kept, size, end))
            self._unsynced = [s for s in self._unsynced if any(s is k for k in kept)]
            if self.txns.exists:  # its entries past the new end describe nothing; its unsynced ones may be lost
                self.txns.close()
                self.txns = TxnIndex(self.directory, self.log_start_offset, end, self._files)
                self.txns.rewrite()
            self._dir_dirty = True
        except Exception as cut_exc:
            self.broken = exc
            log.error("%s: a sync failed (%s) and cutting the log back to its durable end failed too (%s): appends "
                      "are refused until the gateway restarts", self.directory, exc, cut_exc)
            return
        self.cuts += 1
        self.cut_error = _io_error(f"{self.directory}: a sync failed ({exc.strerror or exc}): what was written since "
                                   f"the last sync was cut back, nothing of it acknowledged", exc)
        log.warning("%s: a sync failed (%s): cut the log back to its durable end, offset %d (%d unacknowledged "
                    "offset(s) dropped; their writers got the error)", self.directory, exc, end, dropped)

    # -- deleting records (the log start offset) -----------------------------------------------------------
    def _read_offset_file(self, name: str) -> int:
        """The offset a small file of the partition holds (`log-start-offset`, `cleaner-offset`); 0 when there is
        none, or — with an error line — when it holds no offset."""
        try:
            with open(os.path.join(self.directory, name), "rb") as f:
                text = f.read(32).strip()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            log.error("%s: cannot read %s (%s): taken as 0", self.directory, name, exc)
            return 0
        if not text.isdigit() or int(text) > MAX_JUMP_OFFSET:
            log.error("%s: %s holds %r, not an offset: taken as 0", self.directory, name, text[:32])
            return 0
        return int(text)

    def _open_log_start(self) -> None:
        """At open: honour `log-start-offset` — drop segments wholly below it (a crash may have come between the
        file and their deletion) and, when the whole log lies below it (records a power cut took back, or an
        empty log), start an empty log there, so an offset below the start is never handed out again."""
        start = self._log_start = self._read_offset_file(LOG_START)
        segments = self.segments
        if start <= segments[0].base_offset:
            return
        if start > segments[-1].next_offset or (start == segments[-1].next_offset and segments[-1].size):
            if start > segments[-1].next_offset:
                log.warning("%s-%d: the log ends at %d, below its log start offset %d: it restarts empty there",
                            self.topic, self.partition, segments[-1].next_offset, start)
            for seg in segments:
                seg.close()
                seg.delete()
            self.segments = [self._new_segment(start, self._now_ms())]
            return
        keep = _below(segments, start)
        for seg in segments[:keep]:
            seg.close()
            seg.delete()
        if keep:
            self.segments = segments[keep:]
            self._dir_dirty = True

    def delete_records(self, offset: int) -> int:
        """Delete every record below `offset` (-1: the high watermark), Kafka's DeleteRecords: the log start offset
        moves there, durably — what lies below it is synced first, then `log-start-offset` is written (a synced
        temporary file renamed into place, the directory synced) — and segments wholly below it are deleted, the
        active one too when every record is below it (it is rolled first). Reads below the new start get
        OffsetOutOfRange. Returns the log start offset after the call (the current one when `offset` is not past
        it). OffsetOutOfRange for an offset past the high watermark or negative (other than -1)."""
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        # No sync meanwhile (the active segment may be rolled and deleted here), nor a cleaner's swap.
        with self._sync_lock, self._trim_lock:
            if self._swap_incomplete:
                raise StorageError(f"{self.topic}-{self.partition}: a cleaned segment could not be swapped in; "
                                   f"records can be deleted again once the gateway restarted")
            end = self.high_watermark
            if offset == -1:
                offset = end
            if offset < 0 or offset > end:
                start = self.log_start_offset
                raise OffsetOutOfRange(f"cannot delete records below offset {offset}: the partition holds "
                                       f"[{start}, {end})", log_start=start, log_end=end)
            if offset <= self.log_start_offset:
                return self.log_start_offset
            # Everything below the new start durable first: a power cut can never leave the log ending below it.
            self._sync()
            path = os.path.join(self.directory, LOG_START)
            write_synced(path + ".tmp", b"%d\n" % offset)
            os.replace(path + ".tmp", path)
            fsync_dir(self.directory)
            self._log_start = offset
            doomed = self._drop_below_start(offset)
            for seg in doomed:
                seg.delete()
                log.info("%s-%d: deleted segment %s (below the log start offset %d)", self.topic, self.partition,
                         segment_name(seg.base_offset), offset)
            if doomed:
                fsync_dir(self.directory)  # the deletions, and the roll's new segment files if it rolled
        return self.log_start_offset

    def _drop_below_start(self, start: int) -> list[Segment]:
        """Take the segments wholly below `start` out of the log (rolling the active one when every record is
        below it); the caller deletes their files."""
        with self.lock:
            active = self.segments[-1]
            if active.size and start >= active.next_offset:
                self._roll(self._now_ms())
            segments = self.segments
            keep = _below(segments, start)
            if not keep:
                return []
            doomed = self._take_out(keep)
            self.txns.prune(start)
            return doomed

    def _take_out(self, count: int) -> list[Segment]:
        """Take the first `count` segments out of the log (the caller holds `lock`, and deletes their files): no
        longer unsynced, nor what the visible end or the first offset refer to — the visible end then is the base of
        the first kept segment. (A deleted segment keeps its data descriptor, and so the disk space of its file, until
        nothing holds it.)"""
        doomed = self.segments[:count]
        self.segments = self.segments[count:]
        self._unsynced = [s for s in self._unsynced if s not in doomed]
        self._first_offset = None  # (it names the first segment)
        end, seg, _size = self._durable
        if seg is not None and seg in doomed:
            self._durable = (end, self.segments[0], 0)
        return doomed

    # -- configuration -----------------------------------------------------------------------------------
    def apply_config(self, config: TopicConfig) -> None:
        """Take a topic's altered configuration live: the next append, roll and retention run use it (the
        storage format never changes)."""
        if config.format != self.config.format:
            raise ValueError("a partition's storage format cannot change")
        with self.lock:
            self.config = config
            self.segments[-1].index_interval = config.index_interval_bytes

    # -- retention ---------------------------------------------------------------------------------------
    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old segments beyond retention_ms / retention_bytes; never the active one (nor any of a topic
        whose cleanup.policy is compact alone)."""
        if not self.config.delete:
            return 0
        with self._trim_lock:
            return 0 if self._swap_incomplete else self._retain(now_ms)

    def _retain(self, now_ms: int | None) -> int:
        now_ms = self._now_ms() if now_ms is None else now_ms
        cfg = self.config
        doomed: list[Segment] = []
        with self.lock:
            segments = self.segments
            total = sum(s.size for s in segments)
            keep_from = 0
            for seg in segments[:-1]:
                expired = cfg.retention_ms >= 0 and now_ms - self.segment_time(seg) > cfg.retention_ms
                oversize = (cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
                            and total > cfg.retention_bytes)
                if not (expired or oversize):
                    break
                total -= seg.size
                keep_from += 1
            if keep_from:
                doomed = self._take_out(keep_from)
                self.txns.prune(self.log_start_offset)
        for seg in doomed:
            seg.delete()
            log.info("%s-%d: retention deleted segment %s", self.topic, self.partition, segment_name(seg.base_offset))
        if doomed:
            fsync_dir(self.directory)  # the log start never moves back after a power cut
        return len(doomed)

    @staticmethod
    def segment_time(seg: Segment) -> int:
        """The newest record timestamp of the segment (its file's modification time when none is known), in ms:
        what retention.ms and the compaction lags measure."""
        if seg.max_timestamp >= 0:
            return seg.max_timestamp
        try:
            return int(os.path.getmtime(seg.log_path) * 1000)
        except FileNotFoundError:
            return 0

    # -- compaction (the log cleaner's side: see logway.storage.cleaner) ------------------------------------
    @property
    def cleaning_stopped(self) -> bool:
        """Closing or deleted (`stop_cleaning`), or a swap is left unfinished: nothing is cleaned any more."""
        return self._retiring or self._swap_incomplete

    def cleaning_view(self) -> tuple[list[Segment], list[Segment], int]:
        """(segments, those not synced yet, log start offset) of one instant between syncs (a sync under way takes
        the segments it syncs out of the unsynced ones before it has synced them)."""
        with self._sync_lock, self.lock:
            return self.segments, list(self._unsynced), self.log_start_offset

    @contextmanager
    def cleaning(self):
        """Held by the cleaner while it cleans this partition; yields the check it calls between batches, which
        raises CleaningStopped once the partition is closing or deleted."""
        with self._clean_lock:
            self._check_cleaning()
            yield self._check_cleaning

    def _check_cleaning(self) -> None:
        if self._retiring:
            raise CleaningStopped(f"{self.topic}-{self.partition} is closing")

    def stop_cleaning(self) -> None:
        """Tell a cleaner at work on this partition to stop, and wait until it has (it discards what it was
        writing); none starts again. Called before the partition is closed or deleted."""
        self._retiring = True
        with self._clean_lock:
            pass

    def resume_cleaning(self) -> None:
        """Undo `stop_cleaning` (the partition was not closed or deleted after all)."""
        self._retiring = False

    def set_cleaned_upto(self, offset: int) -> None:
        """Record where the part not cleaned yet begins (`cleaner-offset`: a hint, written whole, not synced with
        the directory — without it the whole log counts as dirty once)."""
        path = os.path.join(self.directory, CLEANER_OFFSET)
        write_synced(path + ".tmp", b"%d\n" % offset)
        os.replace(path + ".tmp", path)
        self.cleaned_upto = offset

    def install_cleaned(self, old: list[Segment], new: CleanedSegment, forget=()) -> bool:
        """Swap the cleaned segment `new` (written and synced, see `logway.storage.cleaner.CleanedSegment`) in for
        the consecutive frozen segments `old`, durably; first forget, durably, the aborted transactions in `forget`
        (their abort markers are not in `new`). False (nothing done, `new` discarded) when the log no longer holds
        `old` as they were — retention or `delete_records` took some out — or is closing. Readers holding an old
        segment keep reading it."""
        with self._trim_lock:
            segments = self.segments
            i = next((k for k, seg in enumerate(segments) if seg is old[0]), None)
            if (self.cleaning_stopped or i is None or i + len(old) >= len(segments)
                    or any(a is not b for a, b in zip(segments[i:i + len(old)], old))
                    or any(self._durable[1] is seg for seg in old)):
                new.discard()
                return False
            if forget:
                with self.lock:  # (durable with the directory sync of the commit, before the commit point)
                    self.txns.forget_aborted(forget)
            try:
                new.commit()
                for seg in old:
                    seg.delete()  # (its data file stays open for its readers)
                new.install()
                cleaned = self._segment(new.base, active=False, created_ms=self._now_ms())
            except BaseException:
                # Committed or not, the disk may now hold what the next open finishes or drops: until then, no
                # segment of this partition is taken out (it could be one the swap would bring back).
                self._swap_incomplete = True
                log.error("%s-%d: the cleaned segment %s could not be swapped in; nothing more is cleaned or deleted "
                          "in this partition until the gateway restarts (which finishes or drops the swap)",
                          self.topic, self.partition, segment_name(new.base))
                raise
            cleaned.next_offset = old[-1].next_offset
            with self.lock:
                current = self.segments
                i = next(k for k, seg in enumerate(current) if seg is old[0])
                self.segments = current[:i] + [cleaned] + current[i + len(old):]
                self._first_offset = None
        return True

    # -- lifecycle ---------------------------------------------------------------------------------------
    def close(self, *, durable: bool = False) -> None:
        """Close every segment; with `durable` (a clean shutdown, which recovery will trust), the active segment's
        data, its indexes (as far as the disk has room: see `Segment.sync_indexes_if_room`) and the transaction
        index are synced first. Every segment is closed even when that sync fails (the OSError is raised after).
        A cleaner at work on it stops first."""
        self.stop_cleaning()
        with self.lock:
            try:
                if durable and self.broken is not None:
                    raise self.broken  # (recovery checks the tail at the next start)
                if durable:
                    active = self.segments[-1]
                    active.sync()
                    active.sync_indexes_if_room()
                    self.txns.sync()
            finally:
                for seg in self.segments:
                    seg.close()
                self.txns.close()

    def delete(self) -> None:
        self.stop_cleaning()
        with self.lock:
            for seg in self.segments:
                seg.close()
                seg.delete()
            self.txns.close()


def _find_segment(segments: list[Segment], offset: int) -> int:
    """Index of the last segment whose base offset is <= offset."""
    lo, hi = 0, len(segments)
    while lo < hi:
        mid = (lo + hi) >> 1
        if segments[mid].base_offset <= offset:
            lo = mid + 1
        else:
            hi = mid
    return max(lo - 1, 0)


def _below(segments: list[Segment], start: int) -> int:
    """How many leading segments hold only offsets below `start` (the next one begins at or before it); never the
    last one."""
    keep = 0
    while keep + 1 < len(segments) and segments[keep + 1].base_offset <= start:
        keep += 1
    return keep


def scan_batches(fmt: BatchFormat, config: TopicConfig, topic: str, data, infos=None) -> tuple | list:
    """The whole batches of `data` (an append to a partition of `topic`), scanned and validated: (batch, size,
    explicit offset, last offset delta, max timestamp) each. Raises CorruptBatch, BatchTooLarge or InvalidRecord
    (a record without a key in a compacted topic). `infos`: the `BatchInfo` of each batch when the caller has read
    the headers already (a Kafka produce, whose handler needs its producers' fields): used in place of `fmt.scan`
    — every batch is still validated whole, and sizes that do not add up to `data` are a truncated batch."""
    view = memoryview(data)
    total = len(view)
    max_batch = config.max_batch_bytes
    try:
        if infos is None:
            info = fmt.scan(view, 0)
        else:
            info = infos[0] if len(infos) == 1 else None
        if info is not None and info[0] == total and total <= max_batch:  # the usual case: one batch
            fmt.validate(view)
            batches = ((view, total, info[1], info[2], info[3]),)
        else:
            batches = _split(fmt, view, max_batch, infos)
        if config.compact:
            for batch in batches:
                if not fmt.all_keyed(batch[0]):
                    raise InvalidRecord(f"topic {topic!r} is compacted (cleanup.policy "
                                        f"{config.cleanup_policy}): every record needs a key")
    except ValueError as exc:
        raise CorruptBatch(str(exc)) from None
    if not batches:
        raise CorruptBatch("no batch to append")
    return batches


def _split(fmt: BatchFormat, view: memoryview, max_batch: int, infos=None) -> list:
    """Scan (or take from `infos`) and validate every batch of `view`; (batch, size, explicit offset,
    last_offset_delta, max_timestamp) each."""
    total = len(view)
    batches = []
    pos = 0
    given = None if infos is None else iter(infos)
    while pos < total:
        info = fmt.scan(view, pos) if given is None else next(given, None)
        if info is None:
            raise CorruptBatch(f"truncated batch: {total - pos} bytes left at position {pos}")
        size = info[0]
        if size <= 0 or pos + size > total:
            raise CorruptBatch(f"truncated batch: {size} bytes declared, {total - pos} present")
        if size > max_batch:
            raise BatchTooLarge(f"batch of {size} bytes exceeds max_batch_bytes {max_batch}")
        batch = view[pos:pos + size]
        fmt.validate(batch)
        batches.append((batch, size, info[1], info[2], info[3]))
        pos += size
    return batches


def batch_offset(offset: int, explicit: int | None, delta: int, explicit_offsets: bool) -> int:
    """The first offset of a batch appended where the log ends at `offset`: there, or — a format with offsets of
    its own (`explicit_offsets`) — the one it names (`explicit`, past a gap). InvalidBatchOffset when it names one
    below the log end, or reaches past what a batch may reach (MAX_JUMP_OFFSET with offsets of its own, else
    MAX_OFFSET: the log end, last + 1, must stay a valid offset too)."""
    if explicit is not None and explicit_offsets:
        if explicit < offset:
            raise InvalidBatchOffset(f"batch starts at offset {explicit}, the log is at {offset}")
        if explicit + delta > MAX_JUMP_OFFSET:
            raise InvalidBatchOffset(f"batch reaches offset {explicit + delta}, beyond {MAX_JUMP_OFFSET}: "
                                     f"the furthest a batch may reach with offsets of its own")
        offset = explicit
    if offset + delta >= MAX_OFFSET:
        raise InvalidBatchOffset(f"batch reaches offset {offset + delta}, beyond {MAX_OFFSET - 1}")
    return offset


def _io_error(message: str, cause: OSError) -> StorageIOError:
    """A StorageIOError with the errno and the file of the OSError that caused it."""
    err = StorageIOError(cause.errno, message)
    err.filename = cause.filename
    return err
