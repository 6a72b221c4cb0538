"""Transcoded batches shared by the readers that ask for them in the same format.

A reader that asks for another format than the stored one (every native reader; a TANK consumer of a Kafka topic, a
Kafka consumer of a TANK topic) costs a decode of the stored batches and an encode into its format — 5–10× the
CPU of handing out the stored bytes. Readers of a partition mostly read the same batches: consumers at the tail all
read the newest ones, consumers walking the log read the same batches a little earlier or later — each from its own
offset, with its own byte budget, so their slices rarely line up while their batches do. `TranscodedReads` therefore
transcodes a slice batch by batch and keeps each stored batch's transcoded part (least recently used out first)
under `storage.transcode_cache_bytes` of stored bytes (in memory a native part weighs 3–4× its stored bytes: its
byte arrays are JSON numbers); a read joins its batches' parts (`ReadFormat.join`). A part is keyed by what
determines it: the batch (segment, its generation, position), the format, and the offset asked for when it falls
inside the batch (records before it are left out). A read joined from several parts is kept too, under its slice
(segment, generation, position, length) and offset: readers walking the log from the same offset with the same
byte budget ask for the same slices, and find the joined answer without reading the slice's bytes. A part is what
the reader is handed (bytes, `codecs.native.EncodedRecords`, …) with its record count and first and last offsets —
not the decoded records: thousands of live `Record` objects would only lengthen the cyclic garbage collector's
passes.

A part encoded on its own reads as if it followed the previous part; where a format must say that it does not (a
TANK bundle after a gap in the offsets — a transaction marker, aborted records left out — is sparse: it names its
first sequence number), the part is kept in that form too, under its own key (`ReadFormat.gap_sensitive`).

A batch's bytes do not change while its segment lives: appends only add past the visible end; bytes of a failed append
that are cut again (`Segment.rollback`) bump the segment's generation, so nothing derived from them is found again; a
segment that recovery rewrites or retention deletes is a new `Segment` object, with its own `uid` (the key holds that,
not the name — nor the object: a segment retention deleted keeps its file's disk space for as long as something holds
it, and an idle cache would). Parts are shared: readers must not change them (`formats.RECORDS` hands out a tuple,
`EncodedRecords` are immutable).
"""

from __future__ import annotations

from collections import OrderedDict

from .formats import ReadFormat

__all__ = ["STEP_BYTES", "TranscodedReads"]

#: `transcode_in_steps` yields after decoding about this many stored bytes: a few milliseconds of decoding and
#: encoding, the most one read may hold the event loop in one go.
STEP_BYTES = 128 * 1024
#: A read joined from its parts copies this many bytes per step at most (a memory copy of a few MiB is a
#: millisecond or two; an answer of 32 MiB copied in one go held the event loop for tens of milliseconds).
JOIN_STEP_BYTES = 2 * 1024 * 1024


class TranscodedReads:
    """An LRU map (batch, offset asked inside it, format[, after a gap]) → its transcoded part, and (slice, offset
    asked, format) → a read joined from several parts, bounded by the stored bytes of the batches and slices.
    `hits`/`misses` count reads (a miss: at least one batch was decoded for it), `batches_shared`/`batches_decoded`
    count batches."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.batches_shared = 0
        self.batches_decoded = 0
        #: key -> (a batch's (part, count, first offset, last offset) or a slice's (answer, count, first offset),
        #: stored bytes)
        self._entries: OrderedDict[tuple, tuple[tuple, int]] = OrderedDict()

    def shared(self, rng, offset: int, as_):
        """What `transcode` answered for the same slice (`storage.ReadSlice`) from the same offset in the same
        format, or None."""
        key = _slice_key(rng, offset, as_)
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[0]

    def transcode(self, rng, data, min_offset: int, stored, as_):
        """The records from `min_offset` of the slice `rng` (`storage.ReadSlice`, its bytes `data`: whole batches
        in storage format `stored`) as (answer in format `as_`, count, first offset or None), joined from its
        batches' parts. Raises what decoding or encoding raises (RecordFormatError); nothing is kept for that
        batch."""
        steps = self.transcode_in_steps(rng, data, min_offset, stored, as_)
        try:
            while True:
                next(steps)
        except StopIteration as done:
            return done.value

    def transcode_in_steps(self, rng, data, min_offset: int, stored, as_):
        """`transcode` as a generator that yields (None) after each `STEP_BYTES` or so of stored bytes decoded, so
        that the caller can let others run between the steps; its return value is `transcode`'s. The cache may be
        used by others between the steps: each batch's part is looked up and kept on its own."""
        segment, position, first_offset = rng.segment, rng.position, rng.first_offset
        generation, uid = segment.generation, segment.uid
        view = memoryview(data)
        scan = stored.scan
        gap_sensitive = as_.gap_sensitive
        parts = []
        count = 0
        first = prev_end = None
        decoded = self.batches_decoded
        pos, offset, n = 0, first_offset, len(view)
        step_end = STEP_BYTES
        try:
            while pos < n:
                if pos >= step_end:
                    step_end = pos + STEP_BYTES
                    yield
                info = scan(view, pos)
                if info is None or info[0] <= 0 or pos + info[0] > n:  # not whole batches: decoded as one part,
                    size, base, key = n - pos, offset, None  # not kept
                else:
                    size, base, delta = info[0], info[1], info[2]
                    if base is None:
                        base = offset
                    offset = base + delta + 1
                    if offset <= min_offset:  # wholly before the offset asked for
                        pos += size
                        continue
                    key = (uid, generation, position + pos, min_offset if min_offset > base else -1, as_)
                part = self._part(key, view, pos, size, base, min_offset, stored, as_, False)
                if part[1]:
                    if gap_sensitive and prev_end is not None and part[2] != prev_end:
                        part = self._part(key and key + (True,), view, pos, size, base, min_offset, stored, as_,
                                          True)
                    parts.append(part[0])
                    count += part[1]
                    if first is None:
                        first = part[2]
                    prev_end = part[3] + 1
                pos += size
        except Exception:  # (a batch that does not decode: a failed read counts as one that transcoded)
            self.misses += 1
            raise
        if self.batches_decoded > decoded:
            self.misses += 1
        else:
            self.hits += 1
        read = (yield from _join_in_steps(as_, parts)), count, first
        if len(parts) > 1:  # (one part is kept as its batch already)
            self._put(_slice_key(rng, min_offset, as_), read, rng.length)
        return read

    def _part(self, key: tuple | None, view, pos: int, size: int, base: int, min_offset: int, stored, as_,
              after_gap: bool):
        """The part of one stored batch (`size` bytes at `pos` of `view`, its first offset `base`): the one kept
        under `key`, else decoded and encoded now and kept (unless `key` is None)."""
        if key is not None:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.batches_shared += 1
                return entry[0]
        self.batches_decoded += 1
        records = stored.decode(view[pos:pos + size], first_offset=base, min_offset=min_offset)
        if records:
            part = (as_.encode_part(records, after_gap), len(records), records[0].offset, records[-1].offset)
        else:
            part = (None, 0, 0, 0)
        if key is not None:
            self._put(key, part, size)
        return part

    def _put(self, key: tuple, entry: tuple, stored_bytes: int) -> None:
        if stored_bytes > self.max_bytes:
            return
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        entries[key] = (entry, stored_bytes)
        self.bytes += stored_bytes
        while self.bytes > self.max_bytes:
            _, (_, size) = entries.popitem(last=False)
            self.bytes -= size

    def __len__(self) -> int:
        return len(self._entries)


def _slice_key(rng, offset: int, as_) -> tuple:
    """The key of a read joined from several parts: the slice (segment uid, generation, position, length), the
    offset asked for, the format."""
    seg = rng.segment
    return seg.uid, seg.generation, rng.position, rng.length, max(offset, rng.first_offset), as_


def _join_in_steps(as_, parts: list):
    """`as_.join(parts)`, as a generator that yields after each `JOIN_STEP_BYTES` copied when the format's join is
    the plain concatenation (a bytearray filled part by part); other joins are done at once."""
    if len(parts) < 2 or type(as_).join is not ReadFormat.join:
        return as_.join(parts)
    total = sum(memoryview(p).nbytes for p in parts)
    if total <= JOIN_STEP_BYTES:
        return as_.join(parts)
    out = bytearray(total)
    view = memoryview(out)
    pos = copied = 0
    for part in parts:
        n = memoryview(part).nbytes
        view[pos:pos + n] = part
        pos += n
        copied += n
        if copied >= JOIN_STEP_BYTES:
            copied = 0
            yield
    view.release()
    return out
