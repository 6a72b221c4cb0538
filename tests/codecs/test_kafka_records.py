"""Kafka record sets: RecordBatch v2, legacy MessageSets, compression, zigzag varints and the storage adapter.

Golden inputs are the real-client captures in `fixtures/kafka/`; kafka-python's own record classes serve as an
independent implementation to cross-check what we encode and decode.
"""

from __future__ import annotations

import ast
import struct
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from logway.codecs.errors import RecordFormatError
from logway.codecs import compression
from logway.codecs.kafka.legacy import decode_message_set, encode_message_set, message_set_to_batch
from logway.codecs.kafka.record_set import record_set_magic
from logway.codecs.kafka.records import (
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    MAX_RECORDS_PER_BATCH,
    KafkaFormat,
    decode_batch,
    decode_records,
    encode_batch,
    encode_control_batch,
    iter_batches,
    parse_control_marker,
    parse_header,
)
from logway.codecs.records import Record
from logway.codecs.varint import (
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
)
from logway.storage.formats import BatchInfo

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "kafka"
VALUE = b"hello world " * 50  # what every fixture record carries (600 bytes)
NOW = 1_700_000_000_000

# fixture -> (codec, key)
V2_FIXTURES = {
    "aiokafka-gzip-1rec.bin": (1, b"k"),
    "kafka-python-gzip-1rec.bin": (1, b"k"),
    "kafka-python-uncompressed.bin": (0, b"k"),
    "kafkajs-gzip-1rec.bin": (1, b"k"),
    "librdkafka202-gzip-1rec.bin": (1, None),
    "librdkafka202-uncompressed.bin": (0, None),
    "librdkafka216-gzip-1rec.bin": (1, b"k"),
}
MAGIC0_FIXTURE = "librdkafka216-messageset-magic0.bin"
FMT = KafkaFormat()


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def recrc(batch: bytes | bytearray) -> bytes:
    """Recompute the CRC-32C of a hand-patched batch."""
    b = bytearray(batch)
    b[17:21] = struct.pack(">I", crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def sample_records() -> list[Record]:
    return [
        Record(b"v0", b"k0", NOW + 5),
        Record(b"v1", None, NOW),  # null key
        Record(None, b"tombstone", NOW + 1),  # null value
        Record(b"", b"", None),  # empty key and value; default timestamp
        Record(b"x" * 9000, b"big", NOW + 2, (("trace-id", b"abc"), ("nul", None), ("ключ", b"\x00\xff"))),
        Record(bytes(range(256)) * 300, None, NOW + 100_000, (("h", b""),)),  # 76 KiB: several LZ4 blocks
    ]


def assert_same_records(got: list[Record], want: list[Record], base_offset: int = 0, default_ts: int = NOW):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.value == w.value
        assert g.key == w.key
        assert g.timestamp == (default_ts if w.timestamp is None else w.timestamp)
        assert g.headers == tuple(w.headers)
        assert g.offset == base_offset + i


# --- fixtures from real clients ---------------------------------------------------------------------------


def test_fixture_set_is_complete():
    names = sorted(p.name for p in FIXTURES.glob("*.bin"))
    assert names == sorted([*V2_FIXTURES, MAGIC0_FIXTURE])
    readme = (FIXTURES / "README.md").read_text()
    assert all(name in readme for name in names)


@pytest.mark.parametrize("name", sorted(V2_FIXTURES))
def test_v2_fixture_parses_validates_and_decodes(name):
    raw = fixture(name)
    codec, key = V2_FIXTURES[name]
    assert record_set_magic(raw) == 2
    h = parse_header(raw)
    assert (h.base_offset, h.magic, h.size, h.compression, h.producer_id) == (0, 2, len(raw), codec, -1)
    assert (h.records_count, h.last_offset_delta, h.timestamp_type) == (1, 0, 0)
    assert not h.is_control and not h.is_transactional
    assert h.base_timestamp == h.max_timestamp > 1_600_000_000_000

    info = BatchInfo(*FMT.scan(memoryview(raw), 0))
    assert info == BatchInfo(len(raw), 0, 0, h.max_timestamp)
    FMT.validate(memoryview(raw))

    header, records = decode_batch(raw)
    assert header == h
    assert len(records) == 1
    (r,) = records
    assert (r.key, r.value, r.timestamp, r.headers, r.offset) == (key, VALUE, h.base_timestamp, (), 0)

    # kafka-python's independent decoder agrees.
    (theirs,) = list(DefaultRecordBatch(raw))
    assert (theirs.key, theirs.value, theirs.timestamp) == (r.key, r.value, r.timestamp)

    assert [bytes(b) for b in iter_batches(raw)] == [raw]
    assert decode_records(raw) == records


def test_kafka_python_uncompressed_fixture_bytes():
    raw = fixture("kafka-python-uncompressed.bin")
    # The 600-byte value sits verbatim in the batch, right after its varint length (zigzag 600 = b"\xb0\x09").
    assert raw.find(b"\xb0\x09" + VALUE) > BATCH_HEADER_SIZE
    (r,) = decode_batch(raw)[1]
    assert len(r.value) == 600 and r.value.startswith(b"hello world hello") and r.key == b"k"


@pytest.mark.parametrize("name", sorted(V2_FIXTURES))
def test_every_flipped_byte_after_21_fails_validate(name):
    raw = fixture(name)
    for i in range(21, len(raw)):
        bad = bytearray(raw)
        bad[i] ^= 0x01
        with pytest.raises(RecordFormatError):
            FMT.validate(memoryview(bad))
        with pytest.raises(RecordFormatError):
            decode_batch(bytes(bad))
    # The CRC does not cover baseOffset or partitionLeaderEpoch: brokers rewrite them.
    for i in (*range(8), *range(12, 16)):
        ok = bytearray(raw)
        ok[i] ^= 0x01
        FMT.validate(memoryview(ok))


def test_validate_rejects_wrong_size_and_magic():
    raw = fixture("kafka-python-uncompressed.bin")
    with pytest.raises(RecordFormatError, match="bytes"):
        FMT.validate(memoryview(raw + b"\x00"))
    with pytest.raises(RecordFormatError):
        FMT.validate(memoryview(raw[:-1]))
    with pytest.raises(RecordFormatError):
        FMT.validate(memoryview(raw[:40]))
    bad = bytearray(raw)
    bad[16] = 1
    with pytest.raises(RecordFormatError, match="magic"):
        FMT.validate(memoryview(bad))


def test_validate_requires_one_offset_per_record():
    batch = bytearray(encode_batch([Record(b"a"), Record(b"b")], default_timestamp=NOW))
    batch[23:27] = struct.pack(">i", 5)  # lastOffsetDelta 5 for 2 records
    with pytest.raises(RecordFormatError, match="lastOffsetDelta"):
        FMT.validate(memoryview(recrc(batch)))


# --- encode / decode round trips --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_every_codec(codec):
    records = sample_records()
    batch = encode_batch(records, base_offset=100, default_timestamp=NOW, compression=codec)
    FMT.validate(memoryview(batch))
    header, got = decode_batch(batch)
    assert header.compression == codec
    assert header.base_offset == 100
    assert header.records_count == len(records) and header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == NOW and header.max_timestamp == NOW + 100_000
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert header.partition_leader_epoch == -1
    assert_same_records(got, records, base_offset=100)
    if codec:
        assert len(batch) < sum(len(r.value or b"") for r in records)  # really compressed


@pytest.mark.parametrize("codec", [0, 1])
def test_kafka_python_reads_what_we_write(codec):
    records = sample_records()
    batch = encode_batch(records, default_timestamp=NOW, compression=codec, producer_id=7, producer_epoch=2,
                         base_sequence=40, partition_leader_epoch=3)  # fmt: skip
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 2, 40)
    got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in theirs]
    want = [(i, NOW if r.timestamp is None else r.timestamp, r.key, r.value, list(r.headers))
            for i, r in enumerate(records)]  # fmt: skip
    assert got == want


def test_we_read_what_kafka_python_writes():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)  # fmt: skip
    for i in range(300):
        builder.append(i, timestamp=NOW + i, key=b"k%d" % i if i % 3 else None, value=b"v" * i,
                       headers=[("n", b"%d" % i)] if i % 2 else [])  # fmt: skip
    raw = bytes(builder.build())
    FMT.validate(memoryview(raw))
    _, got = decode_batch(raw)
    assert len(got) == 300
    for i, r in enumerate(got):
        assert (r.offset, r.timestamp, r.value) == (i, NOW + i, b"v" * i)
        assert r.key == (b"k%d" % i if i % 3 else None)
        assert r.headers == ((("n", b"%d" % i),) if i % 2 else ())


def test_large_batch_uses_multibyte_varints():
    records = [Record(b"%d" % i, None, NOW + i * 1000) for i in range(10_000)]  # offset deltas > 8191
    _, got = decode_batch(encode_batch(records, default_timestamp=NOW))
    assert [r.offset for r in got] == list(range(10_000))
    assert got[-1].timestamp == NOW + 9_999_000 and got[-1].value == b"9999"


def test_encode_batch_argument_checks():
    with pytest.raises(ValueError):
        encode_batch([], default_timestamp=NOW)
    with pytest.raises(ValueError):
        encode_batch([Record(b"x")], default_timestamp=NOW, compression=5)
    with pytest.raises(ValueError):
        encode_batch([Record(b"x")], default_timestamp=NOW, producer_epoch=1 << 20)


def test_log_append_time_batch_gives_every_record_max_timestamp():
    batch = encode_batch(sample_records(), default_timestamp=NOW, timestamp_type=1)
    header, got = decode_batch(batch)
    assert header.timestamp_type == 1
    assert {r.timestamp for r in got} == {header.max_timestamp}


def test_control_batch_yields_no_records():
    batch = bytearray(encode_batch([Record(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x00")], default_timestamp=NOW))
    batch[21:23] = struct.pack(">h", 0x30)  # transactional + control
    batch = recrc(batch)
    header, got = decode_batch(batch)
    assert header.is_control and header.is_transactional and got == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.builds(
            Record,
            value=st.none() | st.binary(max_size=300),
            key=st.none() | st.binary(max_size=40),
            timestamp=st.none() | st.integers(0, 1 << 45),
            headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3).map(
                tuple
            ),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([0, 1, 2, 3, 4]),
    st.integers(0, 1 << 40),
)
def test_round_trip_property(records, codec, base_offset):
    batch = encode_batch(records, base_offset=base_offset, default_timestamp=NOW, compression=codec)
    FMT.validate(memoryview(batch))
    assert_same_records(decode_batch(batch)[1], records, base_offset=base_offset)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corrupted_records_raise_only_record_format_error(data):
    codec = data.draw(st.sampled_from([0, 0, 1, 2, 3, 4]))
    batch = bytearray(encode_batch(sample_records()[:4], default_timestamp=NOW, compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(BATCH_HEADER_SIZE - 4, len(batch) - 1))
        batch[i] = data.draw(st.integers(0, 255))
    try:
        decode_batch(bytes(batch), verify_crc=False)
    except RecordFormatError:
        pass


# --- snappy framing and compression bounds ----------------------------------------------------------------


def xerial(data: bytes, block: int = 1000) -> bytes:
    import cramjam

    out = [compression.XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), block):
        b = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += (struct.pack(">i", len(b)), b)
    return b"".join(out)


def test_xerial_snappy_batch_decodes():
    records = sample_records()
    plain = encode_batch(records, default_timestamp=NOW)
    framed = xerial(plain[BATCH_HEADER_SIZE:])
    assert framed.startswith(b"\x82SNAPPY\x00")
    batch = bytearray(plain[:BATCH_HEADER_SIZE] + framed)
    batch[8:12] = struct.pack(">i", len(batch) - 12)
    batch[21:23] = struct.pack(">h", 2)
    batch = recrc(batch)
    FMT.validate(memoryview(batch))
    assert_same_records(decode_batch(batch)[1], records)
    assert compression.decompress(2, framed) == plain[BATCH_HEADER_SIZE:]


def test_truncated_xerial_and_garbage_raise():
    framed = xerial(b"abc" * 1000)
    for cut in (10, 17, 21, len(framed) - 1):
        with pytest.raises(RecordFormatError):
            compression.decompress(2, framed[:cut])
    for codec in (1, 2, 3, 4):
        with pytest.raises(RecordFormatError):
            compression.decompress(codec, b"\x00garbage that is not compressed at all")


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_decompression_is_bounded(codec):
    bomb = compression.compress(codec, b"\x00" * 2_000_000)
    assert compression.decompress(codec, bomb, max_size=2_000_000) == b"\x00" * 2_000_000
    with pytest.raises(RecordFormatError, match="beyond|exceeds|more than"):
        compression.decompress(codec, bomb, max_size=100_000)


def test_concatenated_gzip_members():
    data = compression.compress(1, b"abc") + compression.compress(1, b"def")
    assert compression.decompress(1, data) == b"abcdef"


def test_lz4_legacy_header_checksum_is_repaired():
    # Kafka 0.8/0.9 (magic 0) computed the LZ4 frame header checksum over the magic too (KAFKA-3160).
    good = bytearray(compression.compress(3, b"legacy " * 100))
    good[6] = (compression._xxh32(bytes(good[0:6])) >> 8) & 0xFF
    with pytest.raises(RecordFormatError):
        compression.decompress(3, bytes(good))
    assert compression.decompress(3, bytes(good), legacy_lz4_checksum=True) == b"legacy " * 100


def test_we_write_independent_lz4_blocks():
    frame = compression.compress(3, bytes(200_000))
    assert frame[4] & 0x20  # FLG.B.Indep: Kafka's Java LZ4 stream cannot read linked blocks


# --- stamp / scan / offset_for_timestamp ------------------------------------------------------------------


def test_stamp_patches_only_the_base_offset_without_copying():
    raw = fixture("kafka-python-uncompressed.bin")
    mv = memoryview(raw)
    pieces = FMT.stamp(mv, 1234567)
    assert len(pieces) == 2
    assert bytes(pieces[0]) == struct.pack(">q", 1234567)
    assert isinstance(pieces[1], memoryview) and pieces[1].obj is raw  # a view of the caller's buffer
    stamped = b"".join(pieces)
    assert stamped[8:] == raw[8:] and len(stamped) == len(raw)
    FMT.validate(memoryview(stamped))
    (r,) = decode_batch(stamped)[1]
    assert r.offset == 1234567
    assert FMT.scan(memoryview(stamped), 0)[1] == 1234567


def test_scan_needs_a_header_and_rejects_garbage():
    raw = fixture("kafkajs-gzip-1rec.bin")
    buf = memoryview(b"\x00" * 5 + raw)
    assert FMT.scan(buf, 5) == (len(raw), 0, 0, parse_header(raw).max_timestamp)
    assert FMT.scan(buf, len(buf) - 60) is None
    assert FMT.scan(memoryview(raw[:60]), 0) is None
    assert FMT.scan(memoryview(raw[:61]), 0) is not None  # the records need not be present
    with pytest.raises(RecordFormatError, match="magic"):
        FMT.scan(memoryview(bytes(100)), 0)
    bad = bytearray(raw)
    bad[8:12] = struct.pack(">i", 48)
    with pytest.raises(RecordFormatError, match="batchLength"):
        FMT.scan(memoryview(bad), 0)
    assert FMT.name == "kafka" and FMT.header_size == 61


def test_offset_for_timestamp():
    records = [Record(b"a", None, 100), Record(b"b", None, 300), Record(b"c", None, 200)]
    batch = memoryview(encode_batch(records, default_timestamp=NOW))
    assert FMT.offset_for_timestamp(batch, 50, 0) == 50
    assert FMT.offset_for_timestamp(batch, 50, 150) == 51
    assert FMT.offset_for_timestamp(batch, 50, 250) == 51
    assert FMT.offset_for_timestamp(batch, 50, 300) == 51
    assert FMT.offset_for_timestamp(batch, 50, 301) is None


# --- bounds: absurd counts and lengths --------------------------------------------------------------------


def test_absurd_records_count_raises_without_allocating():
    batch = bytearray(encode_batch([Record(b"x")], default_timestamp=NOW))
    for count in (2**31 - 1, MAX_RECORDS_PER_BATCH + 1, 1000):
        batch[57:61] = struct.pack(">i", count)
        batch[23:27] = struct.pack(">i", count - 1)
        bad = recrc(batch)
        tracemalloc.start()
        try:
            with pytest.raises(RecordFormatError):
                decode_batch(bad)
            with pytest.raises(RecordFormatError):
                FMT.validate(memoryview(bad))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 * 1024


def test_negative_records_count_and_unknown_codec_rejected():
    batch = bytearray(encode_batch([Record(b"x")], default_timestamp=NOW))
    neg = bytearray(batch)
    neg[57:61] = struct.pack(">i", -1)
    with pytest.raises(RecordFormatError):
        parse_header(neg)
    codec7 = bytearray(batch)
    codec7[21:23] = struct.pack(">h", 7)
    with pytest.raises(RecordFormatError, match="codec"):
        parse_header(codec7)
    with pytest.raises(RecordFormatError, match="codec"):
        FMT.validate(memoryview(recrc(codec7)))


def test_huge_value_length_in_tiny_batch():
    batch = bytearray(encode_batch([Record(b"abcdef", b"k")], default_timestamp=NOW))
    # record: length, attrs, tsDelta, offsetDelta, keyLen(1 -> 0x02), 'k', valueLen (6 -> 0x0c)
    i = batch.index(b"\x0c" + b"abcdef")
    batch[i : i + 1] = encode_varint(2**30)  # the batch grows by 4 bytes: fix batchLength too
    batch[8:12] = struct.pack(">i", len(batch) - 12)
    with pytest.raises(RecordFormatError):
        decode_batch(recrc(batch))


def test_trailing_bytes_after_records_rejected():
    batch = bytearray(encode_batch([Record(b"abc")], default_timestamp=NOW) + b"\x00\x00")
    batch[8:12] = struct.pack(">i", len(batch) - 12)
    with pytest.raises(RecordFormatError, match="left after"):
        decode_batch(recrc(batch))


# --- iter_batches / decode_records ------------------------------------------------------------------------


def three_batches() -> tuple[bytes, list[bytes]]:
    batches = [
        encode_batch([Record(b"a%d" % i) for i in range(3)], base_offset=0, default_timestamp=NOW),
        encode_batch([Record(b"b%d" % i) for i in range(2)], base_offset=3, default_timestamp=NOW, compression=1),
        encode_batch([Record(b"c%d" % i) for i in range(4)], base_offset=5, default_timestamp=NOW),
    ]
    return b"".join(batches), batches


def test_iter_batches_stops_silently_at_a_truncated_last_batch():
    buf, batches = three_batches()
    ends = [sum(map(len, batches[: i + 1])) for i in range(3)]
    for cut in range(len(buf) + 1):
        got = [bytes(b) for b in iter_batches(buf[:cut])]
        assert got == [b for b, e in zip(batches, ends) if e <= cut]
        decode_records(buf[:cut])  # never raises on a partial tail


def test_iter_batches_rejects_garbage():
    buf, _ = three_batches()
    with pytest.raises(RecordFormatError, match="magic"):
        list(iter_batches(buf + struct.pack(">qiib", 0, 100, 0, 1)))  # a magic-1 entry after v2 batches
    with pytest.raises(RecordFormatError, match="batchLength"):
        list(iter_batches(buf + bytes(30)))
    with pytest.raises(RecordFormatError, match="batchLength"):
        list(iter_batches(buf + struct.pack(">qi", 0, 3)))
    with pytest.raises(RecordFormatError):
        list(iter_batches(fixture(MAGIC0_FIXTURE)))


def test_decode_records_min_offset():
    buf, _ = three_batches()
    assert [r.offset for r in decode_records(buf)] == list(range(9))
    assert [r.value for r in decode_records(buf, min_offset=4)] == [b"b1", b"c0", b"c1", b"c2", b"c3"]
    assert decode_records(buf, min_offset=9) == []


# --- legacy MessageSet ------------------------------------------------------------------------------------


def test_magic0_fixture_decodes():
    raw = fixture(MAGIC0_FIXTURE)
    assert record_set_magic(raw) == 0
    (r,) = decode_message_set(raw)
    assert (r.key, r.value, r.timestamp, r.offset, r.headers) == (b"k", VALUE, None, 0, ())
    (theirs,) = list(LegacyRecordBatch(raw[:], 0))
    assert (theirs.key, theirs.value) == (r.key, r.value)
    for i in range(16, len(raw)):  # CRC-32 covers magic..end
        bad = bytearray(raw)
        bad[i] ^= 0x40
        with pytest.raises(RecordFormatError):
            decode_message_set(bytes(bad))


def test_magic0_fixture_converts_to_one_v2_batch():
    batch = message_set_to_batch(fixture(MAGIC0_FIXTURE), NOW)
    FMT.validate(memoryview(batch))
    header, (r,) = decode_batch(batch)
    assert (header.records_count, header.compression, header.base_timestamp) == (1, 0, NOW)
    assert (r.key, r.value, r.timestamp, r.offset) == (b"k", VALUE, NOW, 0)
    assert message_set_to_batch(b"", NOW) == b""


@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_gzip_wrapper(magic):
    builder = LegacyRecordBatchBuilder(magic, 1, 1 << 20)
    for i in range(5):
        builder.append(i, NOW + i if magic else None, b"k%d" % i, b"v%d" % i)
    raw = bytes(builder.build())
    got = decode_message_set(raw)
    assert [(r.offset, r.key, r.value) for r in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]
    assert [r.timestamp for r in got] == ([NOW + i for i in range(5)] if magic else [None] * 5)
    batch = message_set_to_batch(raw, NOW - 1)
    header, converted = decode_batch(batch)
    assert header.compression == 1  # the wrapper's codec is kept
    assert [(r.offset, r.value, r.timestamp) for r in converted] == [
        (i, b"v%d" % i, NOW + i if magic else NOW - 1) for i in range(5)
    ]
    assert decode_batch(message_set_to_batch(raw, NOW, compression=0))[0].compression == 0


def test_magic1_wrapper_relative_offsets_and_other_codecs():
    inner = encode_message_set([Record(b"v%d" % i, None, NOW + i, (), i) for i in range(3)], 1)
    for codec in (2, 3, 4):
        value = compression.compress(codec, inner)
        body = struct.pack(">bbqi", 1, codec, NOW, -1) + struct.pack(">i", len(value)) + value
        wrapper = struct.pack(">qiI", 1002, len(body) + 4, zlib.crc32(body)) + body  # last inner is offset 1002
        got = decode_message_set(wrapper)
        assert [(r.offset, r.value, r.timestamp) for r in got] == [(1000 + i, b"v%d" % i, NOW + i) for i in range(3)]
        # LogAppendTime wrapper: inner messages take the wrapper's timestamp
        body = struct.pack(">bbqi", 1, codec | 0x08, NOW + 77, -1) + struct.pack(">i", len(value)) + value
        wrapper = struct.pack(">qiI", 1002, len(body) + 4, zlib.crc32(body)) + body
        assert {r.timestamp for r in decode_message_set(wrapper)} == {NOW + 77}


@pytest.mark.parametrize("magic", [0, 1])
def test_encode_message_set_round_trip(magic):
    records = [Record(b"v%d" % i, b"k" if i % 2 else None, NOW + i, (), 40 + i) for i in range(4)]
    records.append(Record(None, b"gone", None, (), 50))
    raw = encode_message_set(records, magic)
    got = decode_message_set(raw)
    assert [(r.offset, r.key, r.value) for r in got] == [(r.offset, r.key, r.value) for r in records]
    assert [r.timestamp for r in got] == ([r.timestamp for r in records] if magic else [None] * 5)
    theirs = [rec for rec in LegacyRecordBatch(raw[: 12 + struct.unpack_from(">i", raw, 8)[0]], magic)]
    assert (theirs[0].offset, theirs[0].value) == (40, b"v0")


def test_encode_message_set_refuses_headers_unless_dropped():
    rec = [Record(b"v", None, NOW, (("h", b"x"),), 0)]
    with pytest.raises(ValueError, match="headers"):
        encode_message_set(rec, 1)
    assert decode_message_set(encode_message_set(rec, 1, drop_headers=True))[0].value == b"v"
    with pytest.raises(ValueError):
        encode_message_set(rec, 2)


def test_truncated_message_set():
    raw = encode_message_set([Record(b"a" * 20, None, NOW, (), i) for i in range(3)], 1)
    one = len(raw) // 3  # all three messages have the same size
    for cut in range(1, len(raw)):
        assert len(decode_message_set(raw[:cut], allow_partial=True)) == cut // one
        if cut % one == 0:
            assert len(decode_message_set(raw[:cut])) == cut // one
        else:
            with pytest.raises(RecordFormatError):
                decode_message_set(raw[:cut])


def test_message_set_rejects_v2_and_nested_compression():
    with pytest.raises(RecordFormatError, match="magic 2"):
        decode_message_set(fixture("kafka-python-uncompressed.bin"))
    inner_wrapper = LegacyRecordBatchBuilder(1, 1, 1 << 20)
    inner_wrapper.append(0, NOW, None, b"x")
    value = compression.compress(1, bytes(inner_wrapper.build()))
    body = struct.pack(">bbqi", 1, 1, NOW, -1) + struct.pack(">i", len(value)) + value
    outer = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(RecordFormatError, match="nested"):
        decode_message_set(outer)


# --- varints ----------------------------------------------------------------------------------------------


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n):
    enc = encode_varint(n)
    assert 1 <= len(enc) <= 5
    assert decode_varint(b"\xff" + enc + b"\x00", 1) == (n, 1 + len(enc))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n):
    enc = encode_varlong(n)
    assert 1 <= len(enc) <= 10
    assert decode_varlong(enc) == (n, len(enc))


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(n):
    assert decode_unsigned_varint(encode_unsigned_varint(n)) == (n, len(encode_unsigned_varint(n)))


def test_varint_known_encodings():
    assert [encode_varint(n) for n in (0, -1, 1, -2, 63, -64, 64)] == [
        b"\x00", b"\x01", b"\x02", b"\x03", b"\x7e", b"\x7f", b"\x80\x01",
    ]  # fmt: skip
    assert encode_varint(300) == b"\xd8\x04"
    assert encode_varint(2**31 - 1) == b"\xfe\xff\xff\xff\x0f"
    assert encode_varint(-(2**31)) == b"\xff\xff\xff\xff\x0f"


def test_varint_bounds():
    with pytest.raises(RecordFormatError, match="longer than 5"):
        decode_varint(b"\x80\x80\x80\x80\x80\x00")  # overlong: 6 bytes for zero
    with pytest.raises(RecordFormatError, match="32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x1f")  # 5 bytes, but 33 bits
    with pytest.raises(RecordFormatError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x00")
    with pytest.raises(RecordFormatError, match="truncated"):
        decode_varint(b"\x80\x80")
    with pytest.raises(RecordFormatError, match="truncated"):
        decode_varlong(b"")
    for bad in (2**31, -(2**31) - 1):
        with pytest.raises(ValueError):
            encode_varint(bad)
    with pytest.raises(ValueError):
        encode_varlong(2**63)
    with pytest.raises(ValueError):
        encode_unsigned_varint(-1)


def test_overlong_varint_inside_a_record_is_rejected():
    batch = bytearray(encode_batch([Record(b"abc")], default_timestamp=NOW))
    # offsetDelta 0 (b"\x00") becomes six bytes: record length and batchLength grow by 5
    rec = BATCH_HEADER_SIZE
    length, _ = decode_varint(batch, rec)
    body = batch[rec + 1 :]
    body[2:3] = b"\x80\x80\x80\x80\x80\x00"
    batch = batch[:rec] + encode_varint(length + 5) + body
    batch[8:12] = struct.pack(">i", len(batch) - 12)
    with pytest.raises(RecordFormatError, match="longer than 5"):
        decode_batch(recrc(batch))


# --- layering ---------------------------------------------------------------------------------------------


def test_codecs_import_no_storage_trio_sockets_clock_or_files():
    root = Path(__file__).resolve().parent.parent.parent / "codecs"
    forbidden = {"socket", "trio", "time", "datetime", "os", "io", "pathlib", "storage", "logway.storage"}
    for path in [*sorted((root / "kafka").glob("*.py")), root / "varint.py", root / "compression.py"]:
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path.name} has no module docstring"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not {name, name.split(".")[0], name.split(".")[-1]} & forbidden, f"{path.name}: {name}"
    code = (
        "import sys, logway.codecs.kafka, logway.codecs.kafka.records, logway.codecs.varint;"
        "print([m for m in ('logway.storage', 'trio', 'codecs.kafka') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _codec_import_graph() -> dict[str, set[str]]:
    """Module-level imports between the modules of logway.codecs ("kafka.records" -> {"kafka.record_set", ...})."""
    root = Path(__file__).resolve().parent.parent.parent / "codecs"
    names = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__").removesuffix("__init__")
             : p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, set())
        for node in ast.parse(path.read_text()).body:  # lazy imports inside functions cannot form a cycle
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] if package else [])
                    base = ".".join(p for p in (base, node.module or "") if p)
                elif (node.module or "").startswith("logway.codecs"):
                    base = node.module.removeprefix("logway.codecs").lstrip(".")
                else:
                    continue
                for alias in node.names:
                    target = f"{base}.{alias.name}" if base else alias.name
                    edges.add(target if target in names else base)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("logway.codecs."):
                        edges.add(alias.name.removeprefix("logway.codecs."))
        edges.discard(name)
    return graph


def test_codec_modules_import_only_downward():
    """No import circle between the modules of logway.codecs (records <-> legacy, bundle <-> chunk were two)."""
    graph = _codec_import_graph()
    assert graph["kafka.legacy"] >= {"kafka.records", "kafka.record_set"} and "kafka.legacy" not in graph[
        "kafka.records"]
    assert "tank.message_set" in graph["tank.chunk"] and "tank.bundle" not in graph["tank.chunk"]
    assert not any(name.startswith("kafka") for name in graph["tank.bundle"] | graph["tank.message_set"])
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph.get(name, ())):
            if state.get(target) == 1:
                raise AssertionError(f"import circle: {' -> '.join(path[path.index(target):] + [target])}")
            if target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


# ----------------------------------------------------------------------------------- control batches (markers)

@pytest.mark.parametrize("committed", [True, False], ids=["commit", "abort"])
def test_control_batch_is_a_transaction_marker(committed):
    batch = encode_control_batch(4242, 7, committed=committed, timestamp_ms=NOW, coordinator_epoch=3)
    h = parse_header(batch)
    assert (h.base_offset, h.magic, h.records_count, h.last_offset_delta) == (0, 2, 1, 0)
    assert h.is_control and h.is_transactional and h.compression == 0 and h.timestamp_type == 0
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 7, -1)
    assert h.base_timestamp == h.max_timestamp == NOW and h.size == len(batch)
    KafkaFormat().validate(memoryview(batch))  # CRC-32C, size, counts: storable as is
    assert decode_batch(batch) == (h, [])  # no data records
    assert parse_control_marker(batch) is committed
    assert parse_control_marker(memoryview(bytearray(batch))) is committed
    # storage stamps the offset: still a marker
    stamped = b"".join(bytes(p) for p in KafkaFormat().stamp(memoryview(batch), 99))
    assert parse_header(stamped).base_offset == 99 and parse_control_marker(stamped) is committed
    assert decode_records(batch + encode_batch([Record(b"v")], default_timestamp=NOW, base_offset=1)) == [
        Record(b"v", None, NOW, (), 1)]  # a reader skips the marker


@pytest.mark.parametrize("committed", [True, False], ids=["commit", "abort"])
def test_kafka_python_and_aiokafka_read_our_control_batches(committed):
    from aiokafka.record.default_records import DefaultRecordBatch as AioBatch

    batch = encode_control_batch(11, 2, committed=committed, timestamp_ms=NOW, coordinator_epoch=5)
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (11, 2, -1)
    (marker,) = list(theirs)
    assert (marker.version, marker.type, marker.commit, marker.abort) == (0, int(committed), committed,
                                                                          not committed)
    assert (marker.offset, marker.timestamp, marker.value) == (0, NOW, struct.pack(">hi", 0, 5))
    aio = AioBatch(batch)
    assert aio.validate_crc() and aio.is_control_batch and aio.is_transactional
    (record,) = list(aio)
    assert record.key == struct.pack(">hh", 0, CONTROL_COMMIT if committed else CONTROL_ABORT)


def _control(key: bytes | None, value: bytes | None = struct.pack(">hi", 0, 0), **kw) -> bytes:
    return encode_batch([Record(value, key, NOW)], default_timestamp=NOW, producer_id=1, producer_epoch=0,
                        transactional=True, control=True, **kw)


@pytest.mark.parametrize("batch,match", [
    (encode_batch([Record(b"v")], default_timestamp=NOW), "not a control batch"),
    (_control(struct.pack(">hh", 0, 2)), "type 2"),  # LEADER_CHANGE (KRaft): not a transaction marker
    (_control(struct.pack(">hh", -1, 1)), "version -1"),
    (_control(b"\x00\x00\x01"), "shorter"),
    (_control(None), "shorter"),
    (_control(struct.pack(">hh", 0, 1), b"\x00"), "value shorter"),
    (encode_batch([Record(b"a", struct.pack(">hh", 0, 1)), Record(b"b", struct.pack(">hh", 0, 1))],
                  default_timestamp=NOW, transactional=True, control=True), "2 records"),
])
def test_parse_control_marker_refuses_what_is_not_a_transaction_marker(batch, match):
    with pytest.raises(RecordFormatError, match=match):
        parse_control_marker(batch)


def test_parse_control_marker_checks_crc_and_size_and_reads_newer_versions():
    batch = encode_control_batch(1, 0, committed=True, timestamp_ms=NOW)
    flipped = batch[:-1] + bytes([batch[-1] ^ 1])
    with pytest.raises(RecordFormatError, match="CRC"):
        parse_control_marker(flipped)
    with pytest.raises(RecordFormatError, match="header says"):
        parse_control_marker(batch + b"\x00")
    with pytest.raises(RecordFormatError):
        parse_control_marker(batch[:40])
    # a newer marker version with a longer value is still read (Kafka does the same)
    assert parse_control_marker(_control(struct.pack(">hh", 1, 1), struct.pack(">hiq", 1, 0, 9))) is True


@pytest.mark.parametrize("kw", [{"coordinator_epoch": 2**31}, {"coordinator_epoch": -(2**31) - 1}])
def test_encode_control_batch_refuses_fields_out_of_range(kw):
    with pytest.raises(ValueError):
        encode_control_batch(1, 0, committed=False, timestamp_ms=NOW, **kw)
    with pytest.raises(ValueError):
        encode_control_batch(2**63, 0, committed=False, timestamp_ms=NOW)
