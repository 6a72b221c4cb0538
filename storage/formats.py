"""The contract between the log engine and a storage format (Kafka RecordBatch v2, TANK bundles, ...).

The engine never parses batches itself: a `BatchFormat` adapter, registered by name when the engine is built,
tells it where each batch ends and which offsets and timestamps it covers. Adapters live with the codecs
(`logway.codecs.kafka.records.KafkaFormat`); storage only states the shape it needs, so it imports no codec.

An adapter raises `ValueError` (codecs raise `RecordFormatError`, a subclass) for garbage; the engine turns that
into `CorruptBatch` on append and into a truncation during recovery.

A format whose topics may be compacted (`cleanup.policy=compact`) also implements `CompactionFormat`: the log
cleaner (`logway.storage.cleaner`) reads each batch's keys and producer through it, and has it write a batch again
with fewer records — still without knowing the format.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence


class BatchInfo(NamedTuple):
    """What `BatchFormat.scan` reports about one stored batch.

    size: bytes of the whole batch as stored (including any length prefix).
    base_offset: the first offset the batch itself records, or None when offsets are implicit (the engine then
        continues from the previous batch).
    last_offset_delta: offsets the batch covers minus one (a batch covers base .. base + last_offset_delta).
    max_timestamp: the largest record timestamp in ms, or -1 when unknown.
    """

    size: int
    base_offset: int | None
    last_offset_delta: int
    max_timestamp: int


class BatchFormat(Protocol):
    name: str
    #: bytes that must be available at `pos` for `scan` to read a header (it may need fewer).
    header_size: int
    #: True when a non-None `base_offset` from `scan` is authoritative on append (TANK sparse bundles carry
    #: their own sequence numbers and may leave gaps); False when the engine assigns every base offset (Kafka
    #: producers send 0 there). Optional attribute; absent means False.
    explicit_offsets: bool
    #: True when `validate` checks a checksum the batch carries itself (Kafka's CRC-32C); False makes storage keep
    #: a side checksum per batch (`logway.storage.checksums`), so recovery can tell a torn or garbage tail from a
    #: real batch. Optional attribute; absent means True.
    checksummed: bool

    def scan(self, buf: memoryview, pos: int) -> BatchInfo | tuple | None:
        """Parse the header of the batch starting at `pos`.

        Returns None when `buf` ends before the header does. Does not require the whole batch to be present;
        the caller compares `pos + size` with what it has. Raises ValueError when the header is garbage.
        """

    def validate(self, batch: memoryview) -> None:
        """Check one whole batch (e.g. its CRC); raise ValueError when it is corrupt."""

    def stamp(self, batch: memoryview, base_offset: int) -> Sequence[bytes | memoryview]:
        """Return the pieces to write so the stored batch carries `base_offset` (written with writev)."""

    # Optional: refine a timestamp lookup inside one batch.
    # def offset_for_timestamp(self, batch: memoryview, base_offset: int, timestamp: int) -> int | None


class BatchKeys(NamedTuple):
    """What `CompactionFormat.batch_keys` reports about one stored batch: of each record (in offset order) its
    offset, its key (None: no key) and whether it is a tombstone (a null value: the deletion of its key); and of
    the batch, the idempotent or transactional producer that wrote it (-1 for none: its last batch keeps the
    producer's sequence numbers), whether it was written in a transaction, and for a transaction marker (a batch
    with no records) True when it commits, False when it aborts (None for data)."""

    offsets: Sequence[int]
    keys: Sequence[bytes | None]
    tombstones: Sequence[bool]
    producer_id: int
    transactional: bool
    marker: bool | None


class CompactionFormat(Protocol):
    """What the log cleaner needs of a format, besides `BatchFormat`."""

    def batch_keys(self, batch: memoryview, base_offset: int) -> BatchKeys | tuple:
        """The records of one whole stored batch whose first offset is `base_offset`, as far as the cleaner looks
        at them (no value is decoded); ValueError for garbage."""

    def retained_batch(self, batch: memoryview, base_offset: int, keep: Sequence[int]) -> bytes:
        """The batch as stored with only the records at the offsets `keep` (in order) — the same offsets,
        producer, sequence numbers and compression; with none (asked only of a batch with a producer) a batch
        that keeps the producer's offsets and sequence numbers and holds nothing."""

    def validate_cleaned(self, batch: memoryview) -> None:
        """`validate` for a batch the cleaner wrote (it may hold fewer records than the offsets it covers)."""

    def all_keyed(self, batch: memoryview) -> bool:
        """Whether every record of a whole batch has a key (what a compacted topic requires of an append);
        ValueError for garbage."""


FormatRegistry = dict[str, BatchFormat]
