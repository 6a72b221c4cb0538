"""Variable-length integers as Kafka writes them (protobuf-style base-128, little-endian groups of 7 bits).

- *varint* / *varlong*: zigzag-encoded signed 32-bit / 64-bit integers (Kafka RecordBatch v2 record fields).
- *unsigned varint*: plain base-128 unsigned 32-bit integers (compact lengths and tagged fields of flexible
  protocol versions).

Decoders are bounded: a varint may take at most `MAX_VARINT_BYTES` bytes and a varlong `MAX_VARLONG_BYTES`;
anything longer, or a value that does not fit the type, raises `RecordFormatError`, as does a buffer that ends
mid-integer. Every decoder takes `(buf, pos)` and returns `(value, new_pos)`; `buf` is anything indexable to
ints (`bytes`, `bytearray`, a byte `memoryview`).

Encoders raise `ValueError` for a value outside the type's range (that is the caller's bug, not the peer's).
Small values come from a precomputed table, because the record encoder calls them several times per record.
"""

from __future__ import annotations

from .errors import RecordFormatError

__all__ = [
    "MAX_VARINT_BYTES",
    "MAX_VARLONG_BYTES",
    "encode_varint",
    "encode_varlong",
    "encode_unsigned_varint",
    "decode_varint",
    "decode_varlong",
    "decode_unsigned_varint",
    "zigzag_table",
]

#: ceil(32 / 7): a 32-bit value never needs more bytes; a longer varint is garbage (Kafka rejects it too).
MAX_VARINT_BYTES = 5
#: ceil(64 / 7).
MAX_VARLONG_BYTES = 10

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1

# Every unsigned value below 2**14 (all one- and two-byte encodings), indexed by the unsigned (zigzag) value.
# One-byte bytes objects are interned by CPython; the 16,256 two-byte ones cost about 0.6 MB, once.
_TABLE_SIZE = 1 << 14
_TABLE: tuple[bytes, ...] = tuple(
    bytes((u,)) if u < 0x80 else bytes(((u & 0x7F) | 0x80, u >> 7)) for u in range(_TABLE_SIZE)
)


def zigzag_table() -> tuple[bytes, ...]:
    """The encoding of every unsigned value below 2**14, indexed by that value.

    For a signed value `n` in -8192..8191 its zigzag varint is `table[(n << 1) ^ (n >> 63)]`; for n >= 0 that
    is simply `table[n << 1]`. Hot encoders index it directly instead of calling `encode_varint`.
    """
    return _TABLE


def _encode_unsigned(u: int) -> bytes:
    if u < _TABLE_SIZE:
        return _TABLE[u]
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_unsigned_varint(value: int) -> bytes:
    """Encode an unsigned 32-bit integer (no zigzag)."""
    if not 0 <= value <= _UINT32_MAX:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _encode_unsigned(value)


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zigzag varint (1–5 bytes)."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of the int32 range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zigzag varlong (1–10 bytes)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of the int64 range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def _decode_unsigned(buf, pos: int, max_bytes: int, bits: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    try:
        for i in range(max_bytes):
            b = buf[pos + i]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result >> bits:
                    raise RecordFormatError(f"{what} at {pos} does not fit in {bits} bits")
                return result, pos + i + 1
            shift += 7
    except IndexError:
        raise RecordFormatError(f"truncated {what} at {pos}") from None
    raise RecordFormatError(f"{what} at {pos} is longer than {max_bytes} bytes")


def decode_unsigned_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 32-bit varint at `pos`; return `(value, pos_after)`."""
    return _decode_unsigned(buf, pos, MAX_VARINT_BYTES, 32, "unsigned varint")


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag varint (signed 32-bit) at `pos`; return `(value, pos_after)`."""
    u, pos = _decode_unsigned(buf, pos, MAX_VARINT_BYTES, 32, "varint")
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag varlong (signed 64-bit) at `pos`; return `(value, pos_after)`."""
    u, pos = _decode_unsigned(buf, pos, MAX_VARLONG_BYTES, 64, "varlong")
    return (u >> 1) ^ -(u & 1), pos
