"""TANK bundles (spec §7): encode, decode, and `TankFormat`, the storage adapter for topics stored as bundles.

Pure functions over bytes: no sockets, no clock (callers pass "now" as `default_timestamp`), no files. The
bundle layout, its header parser and the message-set walk live in `message_set` (shared with `chunk`, which reads
Consume chunks); their public names are re-exported here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

from ..compression import snappy_compress_raw
from ..errors import RecordFormatError
from ..records import Record
from .message_set import (
    CODEC_MASK,
    CODEC_NONE,
    CODEC_SNAPPY,
    FLAG_SPARSE,
    MAX_BUNDLE_HEADER,
    MAX_MESSAGE_SET_BYTES,
    MIN_MESSAGE_BYTES,
    MSG_HAVE_KEY,
    MSG_SEQ_PREV_PLUS_ONE,
    MSG_USE_LAST_TS,
    SLOW_FLAGS,
    U64,
    UINT64_MAX,
    BundleHeader,
    message_set_bytes,
    parse_bundle_header,
    walk_messages,
    wrap,
)
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
]

#: A key is a str8 (u8 length): longer keys cannot be carried and are refused, never truncated.
MAX_KEY_BYTES = 255
#: The C++ client compresses when a bundle has more than this many messages ...
SNAPPY_ABOVE_MESSAGES = 512
#: ... or when its keys and contents add up to more than this many bytes (`choose_compression_codec`).
SNAPPY_ABOVE_BYTES = 1024

_FLAGS_TS = struct.Struct("<BQ")
_u64_from = U64.unpack_from


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
                append(U64.pack(ts))
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
        header += U64.pack(seqs[0])
        if n != 1:
            header += encode_varint(seqs[-1] - seqs[0] - 1)

    if seqs is None and cols.uniform_ts:
        body = _uniform_message_set(cols.values, cols.keys, cols.stamps[0])
    else:
        body = _message_set(cols, seqs)
    if codec == CODEC_SNAPPY:
        body = snappy_compress_raw(body)
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
        if hdr.count * MIN_MESSAGE_BYTES > end - hdr.size:
            raise RecordFormatError(f"{hdr.count} messages cannot fit in {end - hdr.size} bytes")
        msgs, start = buf, hdr.size
    else:
        msgs = message_set_bytes(buf, hdr, hdr.size, end)
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
        if not flags & SLOW_FLAGS:  # the usual headers: plain bundle, codec 0 or 1
            count = (flags >> 2) & 0x0F
            if not count and q < limit:
                if buf[q] < 0x80:
                    count = buf[q]
                    q += 1
                elif q + 5 <= limit or limit == end:
                    count, q = decode_varint(buf, q, limit)
        if count:
            codec = flags & CODEC_MASK
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
        if body < 1 or (not codec and count * MIN_MESSAGE_BYTES > body):
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
        if entry[p] & CODEC_MASK:
            hdr = parse_bundle_header(entry, p, n)
            claimed, _ = decode_varint(entry, p + hdr.size, n)
            if claimed > MAX_MESSAGE_SET_BYTES or hdr.count * MIN_MESSAGE_BYTES > claimed:
                raise RecordFormatError(f"snappy set of {claimed} bytes cannot hold {hdr.count} messages")

    def stamp(self, entry, base_offset: int) -> list:
        """TANK offsets are implicit: the entry is stored unchanged."""
        return [entry]

    # -- compaction (`storage.formats.CompactionFormat`) --------------------------------------------------------
    # TANK messages carry no null content: in a compacted `tank` topic a keyed message with empty content is a
    # tombstone (what a TANK reader sees of a Kafka tombstone), and bundles name no producer and no transaction.

    def batch_keys(self, entry, base_offset: int) -> tuple:
        """(offsets, keys, tombstones, -1, False, None) of one stored entry whose first message has offset
        `base_offset` (a sparse bundle names its own); a keyed empty message is a tombstone."""
        msgs = _entry_messages(entry, base_offset)
        return ([seq - 1 for seq, _, _, _ in msgs], [key or None for _, _, key, _ in msgs],
                [bool(key) and not value for _, _, key, value in msgs], -1, False, None)

    def retained_batch(self, entry, base_offset: int, keep) -> bytes:
        """The entry with only the messages at the offsets `keep` (at least one): a sparse bundle naming their seqs,
        in the original's codec."""
        view = memoryview(entry)
        _, p = decode_varint(view, 0, len(view))
        wanted = set(keep)
        kept = [Record(value, key, ts, (), seq - 1) for seq, ts, key, value in _entry_messages(entry, base_offset)
                if seq - 1 in wanted]
        return wrap(encode_bundle(kept, codec=view[p] & CODEC_MASK, sparse_seqs=[r.offset + 1 for r in kept]))

    def validate_cleaned(self, entry) -> None:
        """The cleaner writes whole bundles like any other: `validate`."""
        self.validate(entry)

    def all_keyed(self, entry) -> bool:
        """Whether every message of the entry has a (non-empty) key."""
        return all(key for _, _, key, _ in _entry_messages(entry, 0))

    wrap = staticmethod(wrap)

    def offset_for_timestamp(self, entry, base_offset: int, timestamp: int) -> int | None:
        """Offset of the first message (in offset order) with a timestamp >= `timestamp`, or None."""
        for seq, ts, _, _ in _entry_messages(entry, base_offset):
            if ts >= timestamp:
                return seq - 1
        return None


def _entry_messages(entry, base_offset: int) -> list[tuple[int, int, bytes | None, bytes]]:
    """(seq, timestamp, key, value) of every message of one whole `varint len | bundle` entry whose first message
    has offset `base_offset` (unless the bundle is sparse and names its own)."""
    buf = bytes(entry)
    blen, p = decode_varint(buf, 0, len(buf))
    end = p + blen
    try:
        hdr = parse_bundle_header(buf, p, end)
    except Truncated as exc:
        raise RecordFormatError(f"entry of {len(buf)} bytes is shorter than its bundle header: {exc}") from None
    start = p + hdr.size
    if hdr.codec != CODEC_NONE:
        buf, start, end = message_set_bytes(buf, hdr, start, end), 0, None
        end = len(buf)
    out: list = []
    walk_messages(buf, start, end, hdr, base_offset + 1, out)
    return out
