"""TANK bundles (spec §7): encode, decode, and `TankFormat`, the storage adapter for topics stored as bundles.

Pure functions over bytes: no sockets, no clock (callers pass "now" as `default_timestamp`), no files.
A bundle is the same bytes on the wire (Produce, Consume chunks) and on disk (segment files)::

    flags u8: bits 0-1 codec (0 none, 1 snappy raw block) | bits 2-5 count when 1..15 | bit 6 SPARSE
              | bit 7 "extra flags" (documented, never implemented: always 0, refused here)
    [msg_count varint]                       only when bits 2-5 are 0
    [first_msg_seq u64 LE                    only when SPARSE
     [last_msg_seq - first_msg_seq - 1 varint]   ... and msg_count != 1]
    message set (the WHOLE set is one snappy block when codec == 1; the header is never compressed):
        msg_flags u8 (1 HaveKey, 2 UseLastSpecifiedTS, 4 SeqNumPrevPlusOne)
        [seq_delta varint]   SPARSE, a middle message, and not SeqNumPrevPlusOne: this.seq - prev.seq - 1
        [timestamp u64 LE]   unless UseLastSpecifiedTS (decoders start with ts 0), milliseconds
        [key_len u8, key]    if HaveKey
        content_len varint, content

Stored and streamed, each bundle is prefixed with its length: `varint bundle_len | bundle` (`wrap`). Sequence
numbers start at 1; a record's logway offset is `seq - 1`. Consume-chunk helpers live in `chunk` and are
re-exported at the end of this module.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

import cramjam

from logway.codecs.kafka.compression import snappy_length_possible

from ..errors import RecordFormatError
from ..records import Record
from .varint import UINT32_MAX, Truncated, decode_varint, encode_varint

__all__ = [
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "FLAG_SPARSE",
    "MSG_HAVE_KEY",
    "MSG_USE_LAST_TS",
    "MSG_SEQ_PREV_PLUS_ONE",
    "MAX_KEY_BYTES",
    "MAX_MESSAGE_SET_BYTES",
    "BundleHeader",
    "parse_bundle_header",
    "choose_codec",
    "encode_bundle",
    "decode_bundle",
    "wrap",
    "TankFormat",
    # re-exported from `chunk` (see the end of this module)
    "ChunkEntry",
    "iter_chunk",
    "count_messages",
    "decode_chunk",
]

# --- layout -------------------------------------------------------------------------------------------------

CODEC_NONE = 0
CODEC_SNAPPY = 1
_CODEC_MASK = 0x03
_COUNT_MASK = 0x3C
FLAG_SPARSE = 0x40
#: Documented as "an extra flags byte follows"; no TANK code writes or reads it, so a set bit 7 is garbage.
_FLAG_EXTRA = 0x80
#: Flag bits that send a header down the full parse: extra flags, sparse, codec 2/3.
_SLOW_FLAGS = _FLAG_EXTRA | FLAG_SPARSE | 0x02

MSG_HAVE_KEY = 1
MSG_USE_LAST_TS = 2
MSG_SEQ_PREV_PLUS_ONE = 4

#: A key is a str8 (u8 length): longer keys cannot be carried and are refused, never truncated.
MAX_KEY_BYTES = 255
#: The C++ client compresses when a bundle has more than this many messages ...
SNAPPY_ABOVE_MESSAGES = 512
#: ... or when its keys and contents add up to more than this many bytes (`choose_compression_codec`).
SNAPPY_ABOVE_BYTES = 1024
#: Bound on a decompressed message set, checked against snappy's own length prefix before decompressing.
#: A bundle travels in one frame and TANK refuses frames over 256 MiB; a set that inflates beyond that is not
#: something a real producer sends, and would let a 1 MiB bundle claim gigabytes of memory.
MAX_MESSAGE_SET_BYTES = 256 * 1024 * 1024
#: Smallest message: msg_flags + a one-byte content_len (UseLastSpecifiedTS, no key, empty content).
_MIN_MESSAGE_BYTES = 2
#: The largest header: flags 1 + count varint 5 + first seq 8 + last-seq delta varint 5.
MAX_BUNDLE_HEADER = 1 + 5 + 8 + 5
UINT64_MAX = (1 << 64) - 1

_U64 = struct.Struct("<Q")
_FLAGS_TS = struct.Struct("<BQ")
_u64_from = _U64.unpack_from


class BundleHeader(NamedTuple):
    codec: int
    count: int
    sparse: bool
    first_seq: int  # sparse only (0 otherwise)
    last_seq: int  # sparse only (0 otherwise)
    size: int  # header bytes: where the message set starts, relative to the bundle


def parse_bundle_header(buf, pos: int = 0, end: int | None = None) -> BundleHeader:
    """Parse the bundle header at `buf[pos]`, reading no further than `end`.

    Raises `Truncated` when the bytes stop inside the header, `RecordFormatError` when it is garbage: codec
    2 or 3, bit 7 set, a count of 0, or sparse seqs that cannot hold `count` increasing seqs below 2**64.
    """
    if end is None:
        end = len(buf)
    if pos >= end:
        raise Truncated(f"bundle at {pos}: no header byte")
    flags = buf[pos]
    p = pos + 1
    codec = flags & _CODEC_MASK
    if codec > CODEC_SNAPPY:
        raise RecordFormatError(f"bundle at {pos}: unknown codec {codec}")
    if flags & _FLAG_EXTRA:
        raise RecordFormatError(f"bundle at {pos}: flag bit 7 (extra flags) is not supported")
    count = (flags & _COUNT_MASK) >> 2
    if not count:
        count, p = decode_varint(buf, p, end)
        if not count:
            raise RecordFormatError(f"bundle at {pos}: message count 0")
    if not flags & FLAG_SPARSE:
        return BundleHeader(codec, count, False, 0, 0, p - pos)
    if p + 8 > end:
        raise Truncated(f"bundle at {pos}: sparse header cut off")
    (first,) = _u64_from(buf, p)
    p += 8
    if count == 1:
        last = first
    else:
        delta, p = decode_varint(buf, p, end)
        last = first + delta + 1
        if last > UINT64_MAX:
            raise RecordFormatError(f"bundle at {pos}: last seq {last} overflows u64")
        if count - 1 > last - first:
            raise RecordFormatError(f"bundle at {pos}: {count} messages cannot have seqs {first}..{last}")
    return BundleHeader(codec, count, True, first, last, p - pos)


def wrap(bundle) -> bytes:
    """`varint bundle_len | bundle`: a bundle as TANK stores and streams it."""
    return encode_varint(len(bundle)) + bytes(bundle)


def choose_codec(records: Sequence[Record]) -> int:
    """The C++ client's rule: snappy when > 512 messages or > 1024 bytes of keys + contents, else none."""
    if len(records) > SNAPPY_ABOVE_MESSAGES:
        return CODEC_SNAPPY
    total = 0
    for r in records:
        total += len(r.value or b"") + len(r.key or b"")
        if total > SNAPPY_ABOVE_BYTES:
            return CODEC_SNAPPY
    return CODEC_NONE


# --- encoding -------------------------------------------------------------------------------------------------

_TABLE = tuple(encode_varint(i) for i in range(1 << 14))  # content lengths below 16 KiB: one lookup
_BYTE = tuple(bytes((i,)) for i in range(256))  # msg_flags and key_len bytes


class _Columns(NamedTuple):
    values: list
    keys: list | None  # None: no message has a (non-empty) key
    stamps: list[int]
    uniform_ts: bool  # every message has stamps[0]


def _columns(records: Sequence[Record], default_timestamp: int | None) -> _Columns:
    """Check what a bundle can carry, column by column with C-level list operations (the producer hot path:
    thousands of records per bundle), and resolve missing timestamps."""
    n = len(records)
    values = [r.value for r in records]
    if None in values:
        i = next(i for i, v in enumerate(values) if v is None)
        raise RecordFormatError(f"record {i} has no value (a null value cannot be carried by a TANK bundle)")
    headers = [r.headers for r in records]
    if headers.count(()) != n:
        for i, h in enumerate(headers):
            if h:
                raise RecordFormatError(f"record {i} has headers, which a TANK bundle cannot carry")
    keys: list | None = [r.key for r in records]
    if keys.count(None) + keys.count(b"") == n:  # like the C++ client, an empty key is no key
        keys = None
    else:
        for i, k in enumerate(keys):
            if k is not None and len(k) > MAX_KEY_BYTES:
                raise RecordFormatError(f"record {i}: key of {len(k)} bytes exceeds TANK's {MAX_KEY_BYTES}")
    stamps = [r.timestamp for r in records]
    ts0 = stamps[0]
    if type(ts0) is int and 0 <= ts0 <= UINT64_MAX and stamps.count(ts0) == n:
        return _Columns(values, keys, stamps, True)
    for i, ts in enumerate(stamps):
        if ts is None or ts < 0:  # None, or Kafka's -1 "no timestamp"
            if default_timestamp is None:
                raise RecordFormatError(f"record {i} has no timestamp and no default_timestamp was given")
            stamps[i] = ts = default_timestamp
        if type(ts) is not int or not 0 <= ts <= UINT64_MAX:
            raise RecordFormatError(f"record {i}: timestamp {ts!r} is not an integer that fits in a u64")
    return _Columns(values, keys, stamps, stamps.count(stamps[0]) == n)


def _uniform_message_set(values: list, keys: list | None, ts0: int) -> bytes:
    """Not sparse, one timestamp (the producer hot path): built column-wise with C-level list operations.

    Every message but the first is `flags(UseLastSpecifiedTS [| HaveKey]) [key_len key] content_len content`.
    """
    n = len(values)
    table = _TABLE
    try:
        lengths = [table[len(v)] for v in values]
    except IndexError:  # a content of 16 KiB or more
        lengths = [encode_varint(len(v)) for v in values]
    if keys is None:
        parts = [b"\x02"] * (3 * n)
        parts[0] = _FLAGS_TS.pack(0, ts0)
        parts[1::3] = lengths
        parts[2::3] = values
        return b"".join(parts)
    byte = _BYTE
    parts = [b""] * (5 * n)
    parts[0::5] = [b"\x03" if k else b"\x02" for k in keys]
    parts[0] = _FLAGS_TS.pack(MSG_HAVE_KEY if keys[0] else 0, ts0)
    parts[1::5] = [byte[len(k)] if k else b"" for k in keys]
    parts[2::5] = [k or b"" for k in keys]
    parts[3::5] = lengths
    parts[4::5] = values
    return b"".join(parts)


def _message_set(cols: _Columns, seqs: list[int] | None) -> bytes:
    parts: list = []
    append = parts.append
    table = _TABLE
    values, stamps = cols.values, cols.stamps
    keys = cols.keys or [None] * len(values)
    last_i = len(values) - 1
    prev_ts = -1
    prev_seq = 0
    for i, value in enumerate(values):
        key = keys[i]
        ts = stamps[i]
        flags = MSG_HAVE_KEY if key else 0  # like the C++ client, an empty key is no key
        delta = 0
        if seqs is not None:
            seq = seqs[i]
            if 0 < i < last_i:
                delta = seq - prev_seq - 1
                if not delta:
                    flags |= MSG_SEQ_PREV_PLUS_ONE
            prev_seq = seq
        if ts == prev_ts:
            append(_BYTE[flags | MSG_USE_LAST_TS])
            if delta:
                append(encode_varint(delta))
        else:
            if delta:
                append(_BYTE[flags])
                append(encode_varint(delta))
                append(_U64.pack(ts))
            else:
                append(_FLAGS_TS.pack(flags, ts))
            prev_ts = ts
        if key:
            append(_BYTE[len(key)])
            append(key)
        n = len(value)
        append(table[n] if n < 16384 else encode_varint(n))
        append(value)
    return b"".join(parts)


def encode_bundle(
    records: Sequence[Record],
    *,
    codec: int | None = None,
    sparse_seqs: Sequence[int] | None = None,
    default_timestamp: int | None = None,
) -> bytes:
    """Encode `records` as one bundle (WITHOUT the varint length prefix; see `wrap`).

    codec: 0 (none), 1 (snappy raw block), or None for the C++ client's rule (`choose_codec`).
    sparse_seqs: one strictly increasing seq (>= 1) per record makes a SPARSE bundle (what ProduceWithSeqnum
        and mirroring tools send); None makes a plain bundle whose seqs the broker assigns.
    default_timestamp: ms used for records whose timestamp is None or negative (Kafka's -1); without it
        such records are refused.
    Raises RecordFormatError for what a bundle cannot carry (a null value, headers, a key over 255 bytes, a
    timestamp outside u64), ValueError for caller mistakes (no records, bad codec or sparse seqs).
    """
    n = len(records)
    if not n:
        raise ValueError("a bundle holds at least one message")
    if n > UINT32_MAX:
        raise ValueError(f"{n} messages do not fit in one bundle")
    if codec is None:
        codec = choose_codec(records)
    elif codec not in (CODEC_NONE, CODEC_SNAPPY):
        raise ValueError(f"TANK bundles support codec 0 (none) or 1 (snappy), not {codec!r}")
    cols = _columns(records, default_timestamp)

    flags = codec
    header = bytearray()
    if sparse_seqs is not None:
        seqs = list(sparse_seqs)
        _check_sparse(seqs, n)
        flags |= FLAG_SPARSE
    else:
        seqs = None
    if n < 16:
        header.append(flags | (n << 2))
    else:
        header.append(flags)
        header += encode_varint(n)
    if seqs is not None:
        header += _U64.pack(seqs[0])
        if n != 1:
            header += encode_varint(seqs[-1] - seqs[0] - 1)

    if seqs is None and cols.uniform_ts:
        body = _uniform_message_set(cols.values, cols.keys, cols.stamps[0])
    else:
        body = _message_set(cols, seqs)
    if codec == CODEC_SNAPPY:
        body = bytes(cramjam.snappy.compress_raw(body))
    return bytes(header) + body


def _check_sparse(seqs: list[int], n: int) -> None:
    if len(seqs) != n:
        raise ValueError(f"sparse_seqs has {len(seqs)} seqs for {n} records")
    prev = 0
    for s in seqs:
        if type(s) is not int or s <= prev:
            raise ValueError(f"sparse_seqs must be strictly increasing ints >= 1, got {s!r} after {prev}")
        prev = s
    if seqs[-1] > UINT64_MAX:
        raise ValueError(f"sparse seq {seqs[-1]} does not fit in a u64")
    if n > 1 and seqs[-1] - seqs[0] - 1 > UINT32_MAX:
        raise ValueError("sparse seqs span more than a varuint32 delta can express")
    for i in range(1, n - 1):  # middle messages carry their gap as a varuint32
        if seqs[i] - seqs[i - 1] - 1 > UINT32_MAX:
            raise ValueError(f"sparse seq gap {seqs[i - 1]} -> {seqs[i]} does not fit in a varuint32 delta")


# --- decoding -------------------------------------------------------------------------------------------------


def _message_set_bytes(bundle: bytes, hdr: BundleHeader, start: int, end: int) -> bytes:
    """The (decompressed) message set of the bundle whose header ends at `start`."""
    if hdr.codec == CODEC_NONE:
        return bundle[start:end]
    claimed, _ = decode_varint(bundle, start, end)  # snappy's own uncompressed-length prefix
    if claimed > MAX_MESSAGE_SET_BYTES:
        raise RecordFormatError(f"snappy message set claims {claimed} bytes, over {MAX_MESSAGE_SET_BYTES}")
    if not snappy_length_possible(claimed, end - start):
        raise RecordFormatError(f"a {end - start}-byte snappy block cannot hold the {claimed} bytes it claims")
    if hdr.count * _MIN_MESSAGE_BYTES > claimed:
        raise RecordFormatError(f"{hdr.count} messages cannot fit in {claimed} decompressed bytes")
    try:
        return bytes(cramjam.snappy.decompress_raw(bundle[start:end]))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise RecordFormatError(f"snappy message set does not decompress: {exc}") from None


def walk_messages(buf: bytes, pos: int, end: int, hdr: BundleHeader, base_seq: int, out: list,
                  partial: bool = False) -> int:
    """Append `(seq, timestamp, key, value)` for each message of a message set to `out`.

    `buf[pos:end]` holds the (decompressed) message set of a bundle with header `hdr`; `base_seq` numbers a
    non-sparse bundle. With `partial` (an uncompressed bundle cut off at the end of a consume chunk) the walk
    stops quietly at the first incomplete message, as the C++ client does; otherwise a short or overlong
    message set raises RecordFormatError. Returns the number of messages appended.
    """
    count = hdr.count
    sparse = hdr.sparse
    first = hdr.first_seq
    last_idx = count - 1
    seq = first - 1 if sparse else base_seq - 1
    ts = 0
    append = out.append
    u64 = _u64_from
    i = 0
    try:
        for i in range(count):
            if pos >= end:
                raise Truncated("message set ended")
            flags = buf[pos]
            pos += 1
            if sparse:
                if flags & MSG_SEQ_PREV_PLUS_ONE:
                    seq = first if i == 0 else seq + 1
                elif i == 0:
                    seq = first
                elif i == last_idx:
                    seq = hdr.last_seq
                else:
                    delta, pos = decode_varint(buf, pos, end)
                    seq += delta + 1
                if i and (seq >= hdr.last_seq if i < last_idx else seq > hdr.last_seq):
                    raise RecordFormatError(f"message {i} has seq {seq}, past the bundle's last {hdr.last_seq}")
            else:
                seq += 1
            if not flags & MSG_USE_LAST_TS:
                if pos + 8 > end:
                    raise Truncated("timestamp cut off")
                (ts,) = u64(buf, pos)
                pos += 8
            if flags & MSG_HAVE_KEY:
                klen = buf[pos]
                kend = pos + 1 + klen
                if kend > end:
                    raise Truncated("key cut off")
                key = buf[pos + 1:kend]
                pos = kend
            else:
                key = None
            length = buf[pos]
            if length < 0x80 and pos < end:
                pos += 1
            else:
                length, pos = decode_varint(buf, pos, end)
            vend = pos + length
            if vend > end:
                raise Truncated("content cut off")
            append((seq, ts, key, buf[pos:vend]))
            pos = vend
    except (Truncated, IndexError):
        if partial:
            return i
        raise RecordFormatError(f"message set ends inside message {i} of {count}") from None
    if pos != end and not partial:
        raise RecordFormatError(f"{end - pos} bytes left after the {count} messages of the bundle")
    return count


def decode_bundle(bundle, first_seq: int | None = None) -> tuple[list[Record], int]:
    """Decode one whole bundle (no length prefix) into Records with `offset = seq - 1`.

    `first_seq` is the seq of the first message of a non-sparse bundle (a sparse bundle carries its own and
    ignores it). Returns `(records, last_seq)`. Raises RecordFormatError when the bundle is malformed.
    """
    buf = bytes(bundle)
    end = len(buf)
    try:
        hdr = parse_bundle_header(buf, 0, end)
    except Truncated as exc:
        raise RecordFormatError(f"bundle of {end} bytes is shorter than its header: {exc}") from None
    if not hdr.sparse and first_seq is None:
        raise ValueError("a non-sparse bundle needs first_seq")
    if hdr.codec == CODEC_NONE:
        if hdr.count * _MIN_MESSAGE_BYTES > end - hdr.size:
            raise RecordFormatError(f"{hdr.count} messages cannot fit in {end - hdr.size} bytes")
        msgs, start = buf, hdr.size
    else:
        msgs = _message_set_bytes(buf, hdr, hdr.size, end)
        start, end = 0, len(msgs)
    out: list = []
    walk_messages(msgs, start, end, hdr, first_seq or 0, out)
    records = [Record(value, key, ts, (), seq - 1) for seq, ts, key, value in out]
    return records, out[-1][0]


# --- storage adapter ------------------------------------------------------------------------------------------


class TankFormat:
    """Storage adapter for topics stored as TANK bundles (satisfies `storage.formats.BatchFormat`).

    A segment is `varint bundle_len | bundle` entries back to back, exactly as TANK writes its `.log` files and
    as Consume streams them, so a fetch is a byte range of the file. Offsets are implicit (seq - 1, continuing
    from the previous bundle) except in sparse bundles, which carry their first and last seq. The produce path
    never decodes messages: `scan` and `validate` read the varint and the header only, `stamp` writes the
    entry unchanged.
    """

    name = "tank"
    #: varint 5 + flags 1 + count varint 5 + first seq 8 + last-seq delta varint 5.
    header_size = 5 + MAX_BUNDLE_HEADER
    #: Sparse bundles carry their own seqs (and may skip ahead): the log keeps them (see storage.formats).
    explicit_offsets = True
    #: Bundles carry no checksum: storage keeps a CRC-32C per bundle beside the segment (see storage.formats).
    checksummed = False

    def scan(self, buf, pos: int) -> tuple[int, int | None, int, int] | None:
        """(entry size incl. the varint, base_offset, last_offset_delta, max_timestamp), or None when short.

        base_offset is None for a plain bundle (implicit offsets) and first_seq - 1 for a sparse one;
        last_offset_delta is count - 1, or last_seq - first_seq when sparse. max_timestamp is cheap, not a
        true maximum: the first message's timestamp when the bundle is uncompressed and those bytes are in
        `buf`, else -1 (no message is walked: this runs on every append).
        """
        avail = len(buf)
        if pos >= avail:
            return None
        blen = buf[pos]
        if blen < 0x80:
            p = pos + 1
        else:
            try:
                blen, p = decode_varint(buf, pos, avail)
            except Truncated:
                return None
        end = p + blen
        limit = end if end < avail else avail
        flags = buf[p] if p < limit else 0x80
        count = 0
        q = p + 1
        if not flags & _SLOW_FLAGS:  # the usual headers: plain bundle, codec 0 or 1
            count = (flags >> 2) & 0x0F
            if not count and q < limit:
                if buf[q] < 0x80:
                    count = buf[q]
                    q += 1
                elif q + 5 <= limit or limit == end:
                    count, q = decode_varint(buf, q, limit)
        if count:
            codec = flags & _CODEC_MASK
            sparse = False
        else:  # sparse, garbage, a count of 0, or cut short: the full parse sorts them out
            try:
                hdr = parse_bundle_header(buf, p, limit)
            except Truncated:
                if limit == end:
                    raise RecordFormatError(f"bundle at {pos}: header runs past its {blen} bytes") from None
                return None
            codec, count, sparse = hdr.codec, hdr.count, hdr.sparse
            q = p + hdr.size
        body = end - q
        if body < 1 or (not codec and count * _MIN_MESSAGE_BYTES > body):
            raise RecordFormatError(f"bundle at {pos}: {count} messages cannot fit in {body} bytes")
        max_ts = -1
        if not codec and q < limit:
            if buf[q] & MSG_USE_LAST_TS:
                max_ts = 0
            elif q + 9 <= limit:
                (max_ts,) = _u64_from(buf, q + 1)
                if max_ts >= 1 << 63:
                    max_ts = -1
        if sparse:
            if hdr.first_seq == 0:
                raise RecordFormatError(f"sparse bundle at {pos}: seq 0 (seqs start at 1)")
            return end - pos, hdr.first_seq - 1, hdr.last_seq - hdr.first_seq, max_ts
        return end - pos, None, count - 1, max_ts

    def validate(self, entry) -> None:
        """Check one whole entry cheaply: the varint length matches its size and the header parses."""
        if not isinstance(entry, memoryview):
            entry = memoryview(entry)
        n = len(entry)
        blen, p = decode_varint(entry, 0, n)
        if p + blen != n:
            raise RecordFormatError(f"entry is {n} bytes, its varint says {p + blen}")
        info = self.scan(entry, 0)
        if info is None:  # cannot happen for a whole entry, but never pass one silently
            raise RecordFormatError("entry is shorter than its bundle header")
        if entry[p] & _CODEC_MASK:
            hdr = parse_bundle_header(entry, p, n)
            claimed, _ = decode_varint(entry, p + hdr.size, n)
            if claimed > MAX_MESSAGE_SET_BYTES or hdr.count * _MIN_MESSAGE_BYTES > claimed:
                raise RecordFormatError(f"snappy set of {claimed} bytes cannot hold {hdr.count} messages")

    def stamp(self, entry, base_offset: int) -> list:
        """TANK offsets are implicit: the entry is stored unchanged."""
        return [entry]

    wrap = staticmethod(wrap)

    def offset_for_timestamp(self, entry, base_offset: int, timestamp: int) -> int | None:
        """Offset of the first message (in offset order) with a timestamp >= `timestamp`, or None."""
        view = memoryview(entry)
        blen, p = decode_varint(view, 0, len(view))
        records, _ = decode_bundle(view[p:p + blen], base_offset + 1)
        for r in records:
            if r.timestamp >= timestamp:
                return r.offset
        return None


# Consume-chunk helpers build on this module, hence the import at the end.
from .chunk import ChunkEntry, count_messages, decode_chunk, iter_chunk  # noqa: E402
