"""TANK bundles (spec §7): the layout, the header parser, and the message-set walk every reader shares.

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
numbers start at 1; a record's logway offset is `seq - 1`.

This is the lowest of the bundle modules: `bundle` (encode, decode, the storage adapter) and `chunk` (Consume
chunks) both build on it. Per-message work is plain indexing and `struct` on the bytes (no `construct`): it runs
once per message of every transcoded fetch.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..compression import snappy_decompress_raw, snappy_length_possible
from ..errors import RecordFormatError
from .varint import Truncated, decode_varint, encode_varint

__all__ = [
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_MASK",
    "FLAG_SPARSE",
    "SLOW_FLAGS",
    "MSG_HAVE_KEY",
    "MSG_USE_LAST_TS",
    "MSG_SEQ_PREV_PLUS_ONE",
    "MAX_MESSAGE_SET_BYTES",
    "MIN_MESSAGE_BYTES",
    "MAX_BUNDLE_HEADER",
    "UINT64_MAX",
    "U64",
    "BundleHeader",
    "parse_bundle_header",
    "wrap",
    "message_set_bytes",
    "walk_messages",
]

# --- layout -------------------------------------------------------------------------------------------------

CODEC_NONE = 0
CODEC_SNAPPY = 1
CODEC_MASK = 0x03
_COUNT_MASK = 0x3C
FLAG_SPARSE = 0x40
#: Documented as "an extra flags byte follows"; no TANK code writes or reads it, so a set bit 7 is garbage.
_FLAG_EXTRA = 0x80
#: Flag bits that send a header down the full parse: extra flags, sparse, codec 2/3.
SLOW_FLAGS = _FLAG_EXTRA | FLAG_SPARSE | 0x02

MSG_HAVE_KEY = 1
MSG_USE_LAST_TS = 2
MSG_SEQ_PREV_PLUS_ONE = 4

#: Bound on a decompressed message set, checked against snappy's own length prefix before decompressing.
#: A bundle travels in one frame and TANK refuses frames over 256 MiB; a set that inflates beyond that is not
#: something a real producer sends, and would let a 1 MiB bundle claim gigabytes of memory.
MAX_MESSAGE_SET_BYTES = 256 * 1024 * 1024
#: Smallest message: msg_flags + a one-byte content_len (UseLastSpecifiedTS, no key, empty content).
MIN_MESSAGE_BYTES = 2
#: The largest header: flags 1 + count varint 5 + first seq 8 + last-seq delta varint 5.
MAX_BUNDLE_HEADER = 1 + 5 + 8 + 5
UINT64_MAX = (1 << 64) - 1

U64 = struct.Struct("<Q")
_u64_from = U64.unpack_from


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
    codec = flags & CODEC_MASK
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


# --- reading -------------------------------------------------------------------------------------------------


def message_set_bytes(bundle: bytes, hdr: BundleHeader, start: int, end: int) -> bytes:
    """The (decompressed) message set of the bundle whose header ends at `start`."""
    if hdr.codec == CODEC_NONE:
        return bundle[start:end]
    claimed, _ = decode_varint(bundle, start, end)  # snappy's own uncompressed-length prefix
    if claimed > MAX_MESSAGE_SET_BYTES:
        raise RecordFormatError(f"snappy message set claims {claimed} bytes, over {MAX_MESSAGE_SET_BYTES}")
    if not snappy_length_possible(claimed, end - start):
        raise RecordFormatError(f"a {end - start}-byte snappy block cannot hold the {claimed} bytes it claims")
    if hdr.count * MIN_MESSAGE_BYTES > claimed:
        raise RecordFormatError(f"{hdr.count} messages cannot fit in {claimed} decompressed bytes")
    return snappy_decompress_raw(bundle[start:end], "snappy message set")


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
