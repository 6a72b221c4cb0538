"""TANK's "varuint32": unsigned LEB128 limited to 32-bit values (`Switch/compress.h` PackUInt32/UnpackUInt32).

Low 7 bits first, the high bit (0x80) means "more bytes follow", 1 to 5 bytes: 300 -> `ac 02`,
4294967295 -> `ff ff ff ff 0f`. There is no zigzag: every varint in the TANK protocol is a u32 (bundle lengths,
message counts, content lengths, sparse seq deltas, CreateTopic config length).

Decoding is bounded: at most `MAX_VARINT_BYTES` bytes are read and the value must fit in 32 bits, else
`RecordFormatError`. A buffer (or the `end` the caller gives) that stops in the middle of a varint raises
`Truncated`, a `RecordFormatError` subclass, so callers that tolerate a cut-off tail (consume chunks, the
storage scan) can tell "need more bytes" from garbage. Encoders raise `ValueError` outside 0..2**32-1 (that is
the caller's bug, not the peer's).
"""

from __future__ import annotations

from ..errors import RecordFormatError
from ..varint import zigzag_table

__all__ = ["MAX_VARINT_BYTES", "UINT32_MAX", "Truncated", "encode_varint", "decode_varint", "varint_size"]

#: ceil(32 / 7): a u32 never needs more; TANK's UnpackUInt32 never reads more either.
MAX_VARINT_BYTES = 5
UINT32_MAX = 0xFFFFFFFF

# The shared table of every unsigned LEB128 encoding below 2**14 (one and two bytes), indexed by value: the
# bundle encoder looks content lengths up here instead of calling encode_varint per message.
_TABLE = zigzag_table()
_TABLE_SIZE = len(_TABLE)


class Truncated(RecordFormatError):
    """The bytes end before the structure does (more bytes could complete it)."""


def encode_varint(value: int) -> bytes:
    """Encode `value` (0..2**32-1) as 1-5 bytes."""
    if 0 <= value < _TABLE_SIZE:
        return _TABLE[value]
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"varuint32 out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_size(value: int) -> int:
    """Bytes `encode_varint(value)` takes."""
    return 1 if value < 0x80 else 2 if value < 0x4000 else 3 if value < 0x200000 else 4 if value < 0x10000000 else 5


def decode_varint(buf, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Decode the varint at `buf[pos]`, reading no further than `end` (default: the end of `buf`).

    Returns `(value, pos_after)`. Raises `Truncated` when the bytes stop first, `RecordFormatError` when the
    varint is longer than 5 bytes or its value does not fit in 32 bits.
    """
    if end is None:
        end = len(buf)
    if pos >= end:
        raise Truncated(f"varint at {pos}: no bytes left")
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    p = pos + 1
    while True:
        if p >= end:
            raise Truncated(f"varint at {pos} is cut off after {p - pos} bytes")
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > UINT32_MAX:
                raise RecordFormatError(f"varint at {pos} does not fit in 32 bits")
            return result, p
        shift += 7
        if p - pos >= MAX_VARINT_BYTES:
            raise RecordFormatError(f"varint at {pos} is longer than {MAX_VARINT_BYTES} bytes")
