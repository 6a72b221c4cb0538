"""Transcoded reads shared by the readers that ask for the same thing.

A reader that asks for another format than the stored one (every native reader; a TANK consumer of a Kafka topic, a
Kafka consumer of a TANK topic) costs a decode of the stored batches and an encode into its format — 5–10× the
CPU of handing out the stored bytes. Readers of a partition mostly ask for the same slices: consumers at the tail
all read the newest batches, and consumers that walk the log from the same offset with the same byte budget read
the same slices in the same order. `TranscodedReads` keeps the last transcoded slices (least recently used out
first) under `storage.transcode_cache_bytes` of stored bytes (in memory a native answer weighs 3–4× its stored
bytes: its byte arrays are JSON numbers), keyed by what determines the answer: the slice (segment, its generation,
position, length), the first offset asked for (records before it are left out) and the format. An answer is what
the reader is handed (bytes, `codecs.native.EncodedRecords`, …) with its record count and first offset — not the
decoded records: thousands of live `Record` objects would only lengthen the cyclic garbage collector's passes.

A slice's bytes do not change while its segment lives: appends only add past the visible end; bytes of a failed
append that are cut again (`Segment.rollback`) bump the segment's generation, so nothing derived from them is found
again; a segment that recovery rewrites or retention deletes is a new `Segment` object (the key holds the object,
not its name). Entries are shared: readers must not change them (`formats.RECORDS` hands out a tuple,
`EncodedRecords` are immutable).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["TranscodedReads"]


class TranscodedReads:
    """An LRU map (slice, first offset, format) → an answer, bounded by the stored bytes of its slices."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()

    def get(self, key: tuple) -> Any:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[0]

    def put(self, key: tuple, answer: Any, stored_bytes: int) -> None:
        if stored_bytes > self.max_bytes:
            return
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        entries[key] = (answer, stored_bytes)
        self.bytes += stored_bytes
        while self.bytes > self.max_bytes:
            _, (_, size) = entries.popitem(last=False)
            self.bytes -= size

    def __len__(self) -> int:
        return len(self._entries)
