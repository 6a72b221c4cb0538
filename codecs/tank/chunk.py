"""Consume-response chunks: `varint bundle_len | bundle` entries back to back, as a client reads them.

A partition's chunk in a Consume response is a byte range of a segment file. Its first bundle starts at the
response's `base_seqnum` (or carries its own seqs when the broker flagged 0xfe: a sparse first bundle); each
later bundle continues from the previous one (`base + count`, or `last_seq + 1` after a sparse bundle). The last
entry may be cut short (the protocol allows it; TANK 4.0 and logway always send whole bundles). This module
builds on `message_set` (the bundle layout and reader), not on `bundle`.

- `iter_chunk`: the entries, as views, the truncated last one flagged.
- `count_messages`: the fast path for consumers that only need counts and the next seq: bundle headers only,
  no decompression and no per-message work (this is what reaches millions of messages per second).
- `decode_chunk`: every message as a `Record` (offset = seq - 1), filtered like the C++ client
  (`TankClient::process_consume`): seqs below the requested one and above the high-water mark are dropped,
  complete messages of a truncated uncompressed bundle are kept, a truncated compressed one reports the fetch
  size it needs.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from ..errors import RecordFormatError
from ..records import Record
from .message_set import (
    CODEC_NONE,
    SLOW_FLAGS,
    UINT64_MAX,
    BundleHeader,
    message_set_bytes,
    parse_bundle_header,
    walk_messages,
)
from .varint import Truncated, decode_varint

__all__ = ["ChunkEntry", "ChunkCount", "DecodedChunk", "iter_chunk", "count_messages", "decode_chunk"]

#: What the C++ client asks for beyond a cut-off entry whose length it could not even read.
_UNKNOWN_NEED = 1024


class ChunkEntry(NamedTuple):
    bundle: memoryview  # the bundle bytes (without the varint); shorter than declared when not complete
    position: int  # where the entry's varint starts in the chunk
    size: int  # the whole entry as declared (varint + bundle_len), even when cut off
    complete: bool


def iter_chunk(chunk) -> Iterator[ChunkEntry]:
    """Walk the entries of `chunk`. A last entry cut inside its bundle is yielded with `complete=False`; one cut
    inside its varint is not yielded. A varint longer than 5 bytes raises RecordFormatError."""
    view = chunk if isinstance(chunk, memoryview) else memoryview(chunk)
    n = len(view)
    pos = 0
    while pos < n:
        try:
            blen, p = decode_varint(view, pos, n)
        except Truncated:
            return
        end = p + blen
        if end > n:
            yield ChunkEntry(view[p:n], pos, end - pos, False)
            return
        yield ChunkEntry(view[p:end], pos, end - pos, True)
        pos = end


class ChunkCount(NamedTuple):
    messages: int  # messages with min_seq <= seq <= max_seq in the complete bundles
    next_seq: int | None  # last seq of the last complete bundle + 1; None when there was none
    bundles: int  # complete bundles walked
    consumed: int  # bytes of those complete entries


def count_messages(chunk, base_seqnum: int | None = None, *, min_seq: int = 0,
                   max_seq: int = UINT64_MAX) -> ChunkCount:
    """Count the messages of a chunk from bundle headers alone.

    `base_seqnum` is the response's (None when it flagged 0xfe). A cut-off last bundle is not counted; ask
    again from `next_seq`. Only a sparse bundle straddling `min_seq` or `max_seq` is decoded, to learn which of
    its seqs fall inside. A `min_seq` of UINT64_MAX (a tail request) keeps everything, as in `decode_chunk`.
    """
    if min_seq == UINT64_MAX:
        min_seq = 0
    buf = chunk if isinstance(chunk, bytes) else bytes(chunk)
    n = len(buf)
    pos = 0
    seq = base_seqnum
    total = bundles = 0
    next_seq = None
    while pos < n:
        blen = buf[pos]
        if blen < 0x80:
            p = pos + 1
        else:
            try:
                blen, p = decode_varint(buf, pos, n)
            except Truncated:
                break
        end = p + blen
        if end > n:
            break
        flags = buf[p] if p < end else 0x80
        count = (flags >> 2) & 0x0F
        if not count and p + 1 < end and buf[p + 1] < 0x80:  # a one-byte count varint (16..127 messages)
            count = buf[p + 1]
        if count and not flags & SLOW_FLAGS:  # the usual headers: plain bundle, codec 0 or 1
            sparse = False
        else:
            try:
                hdr = parse_bundle_header(buf, p, end)
            except Truncated:
                raise RecordFormatError(f"bundle at {pos}: header runs past its {blen} bytes") from None
            count, sparse = hdr.count, hdr.sparse
        if sparse:
            first, last = hdr.first_seq, hdr.last_seq
            if first >= min_seq and last <= max_seq:
                total += count
            elif last >= min_seq and first <= max_seq:
                total += sum(1 for s, *_ in _walk(buf, p, end, hdr, 0) if min_seq <= s <= max_seq)
        else:
            if seq is None:
                raise RecordFormatError("the chunk's first bundle is not sparse and no base_seqnum was given")
            first, last = seq, seq + count - 1
            if first >= min_seq and last <= max_seq:
                total += count
            else:
                lo = first if first > min_seq else min_seq
                hi = last if last < max_seq else max_seq
                if hi >= lo:
                    total += hi - lo + 1
        seq = next_seq = last + 1
        bundles += 1
        pos = end
    return ChunkCount(total, next_seq, bundles, pos)


def _walk(buf: bytes, p: int, end: int, hdr: BundleHeader, base: int, partial: bool = False) -> list:
    """(seq, ts, key, value) of every message of the bundle whose header starts at `p`."""
    start = p + hdr.size
    out: list = []
    if hdr.codec == CODEC_NONE:
        walk_messages(buf, start, end, hdr, base, out, partial)
    else:
        msgs = message_set_bytes(buf, hdr, start, end)
        walk_messages(msgs, 0, len(msgs), hdr, base, out)
    return out


class DecodedChunk(NamedTuple):
    records: list[Record]  # offset = seq - 1
    next_seq: int | None  # last delivered seq + 1; None when nothing was delivered
    need_bytes: int  # > 0: the cut-off last entry needs a fetch size of at least this many bytes


def decode_chunk(chunk, base_seqnum: int | None, *, min_seq: int = 0, max_seq: int = UINT64_MAX) -> DecodedChunk:
    """Decode every message of a chunk, as the C++ client does (see the module docstring).

    `min_seq` is the requested seq (0 or UINT64_MAX keep everything from the start), `max_seq` the response's
    high-water mark. Raises RecordFormatError for a malformed complete bundle.
    """
    if min_seq == UINT64_MAX:
        min_seq = 0
    buf = chunk if isinstance(chunk, bytes) else bytes(chunk)
    n = len(buf)
    pos = 0
    seq = base_seqnum
    out: list = []
    need = 0
    while pos < n:
        try:
            blen, p = decode_varint(buf, pos, n)
        except Truncated:
            need = _UNKNOWN_NEED
            break
        end = p + blen
        complete = end <= n
        try:
            hdr = parse_bundle_header(buf, p, min(end, n))
        except Truncated:
            if complete:
                raise RecordFormatError(f"bundle at {pos}: header runs past its {blen} bytes") from None
            need = end - pos
            break
        if not hdr.sparse and seq is None:
            raise RecordFormatError("the chunk's first bundle is not sparse and no base_seqnum was given")
        if complete:
            msgs = _walk(buf, p, end, hdr, seq or 0)
        elif hdr.codec == CODEC_NONE:  # keep the complete messages of a cut-off uncompressed bundle
            msgs = _walk(buf, p, n, hdr, seq or 0, partial=True)
            need = end - pos
        else:  # a compressed bundle is useless until whole
            need = end - pos
            break
        if msgs and (msgs[0][0] < min_seq or msgs[-1][0] > max_seq):
            msgs = [m for m in msgs if min_seq <= m[0] <= max_seq]
        out.extend(msgs)
        if not complete:
            break
        seq = (hdr.last_seq if hdr.sparse else seq + hdr.count - 1) + 1
        pos = end
    records = [Record(value, key, ts, (), s - 1) for s, ts, key, value in out]
    return DecodedChunk(records, out[-1][0] + 1 if out else None, need)
