"""Record compression shared by Kafka and TANK: pure functions from bytes to bytes, bounded on the way in.

Kafka codec ids are the low three bits of a batch's (or legacy wrapper message's) attributes:

| id | codec  | what we write                                   | what we read                                     |
|----|--------|-------------------------------------------------|--------------------------------------------------|
| 0  | none   | the bytes                                       | the bytes                                        |
| 1  | gzip   | one gzip member (zlib, level 6, mtime 0)        | one or more gzip members (trailing junk ignored, |
|    |        |                                                 | as Java's GZIPInputStream does)                  |
| 2  | snappy | one raw snappy block                            | a raw snappy block, or xerial framing            |
| 3  | lz4    | LZ4 frame, independent 64 KiB blocks, no        | any LZ4 frame (Kafka's broken magic-0 header     |
|    |        | checksums (what Kafka's own Java codec writes)  | checksum is repaired when asked)                 |
| 4  | zstd   | one zstd frame                                  | zstd frames                                      |

TANK bundles (codec 1) hold one raw snappy block: `snappy_compress_raw` / `snappy_decompress_raw`, with
`snappy_length_possible` to refuse an impossible declared length before inflating (the TANK bundle code checks
its own bounds first, see `codecs.tank.message_set`).

Decompression bombs: `decompress` never produces more than `max_size` bytes (default
`MAX_DECOMPRESSED_SIZE`). gzip is inflated with a hard output limit; snappy blocks declare their length up
front; LZ4 and zstd frames are walked block by block first to compute an upper bound of the output (each block
has a bounded decompressed size), and the data is inflated only when that bound fits within `max_size` plus one
block (only a frame's last block may be partial); the exact size is checked after inflating.

Everything malformed raises `RecordFormatError`. cramjam provides snappy, LZ4 and zstd; gzip uses zlib.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from .errors import RecordFormatError

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "MAX_DECOMPRESSED_SIZE",
    "XERIAL_MAGIC",
    "SNAPPY_MAX_EXPANSION",
    "compress",
    "decompress",
    "snappy_compress_raw",
    "snappy_decompress_raw",
    "snappy_length_possible",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

#: Largest decompressed record set we accept from one batch (or legacy wrapper message). Producers cap a batch
#: at max.message.bytes (1 MiB by default) compressed; 64 MiB leaves a 64x ratio for repetitive log lines while
#: keeping one hostile batch from taking the process's memory.
MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

#: First 8 bytes of xerial snappy-java framing (then int32 version, int32 min compatible version).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16

_GZIP_LEVEL = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION, what Kafka's Java producer uses
_LZ4_BLOCK_SIZE = 64 * 1024  # Kafka's Java codec and librdkafka write 64 KiB blocks

_INT32 = struct.Struct(">i")
_U32LE = struct.Struct("<I")


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress `data` (a whole record set) with Kafka codec `codec` (0–4)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return snappy_compress_raw(data)
    if codec == LZ4:
        return _lz4_frame_compress(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    *,
    max_size: int = MAX_DECOMPRESSED_SIZE,
    legacy_lz4_checksum: bool = False,
) -> bytes:
    """Decompress a record set compressed with Kafka codec `codec`.

    `legacy_lz4_checksum`: magic-0 message sets were written by Kafka 0.8–0.9 era clients with an LZ4 frame
    header checksum computed over the wrong bytes (KAFKA-3160); when true the checksum is recomputed before
    decoding, as Kafka itself ignores it for magic 0.
    """
    if codec == NONE:
        if len(data) > max_size:
            raise RecordFormatError(f"record set of {len(data)} bytes exceeds {max_size}")
        return bytes(data)
    try:
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == LZ4:
            return _lz4_decompress(data, max_size, legacy_lz4_checksum)
        if codec == ZSTD:
            return _zstd_decompress(data, max_size)
    except RecordFormatError:
        raise
    except (zlib.error, cramjam.DecompressionError, ValueError, OSError) as exc:
        raise RecordFormatError(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from None
    raise RecordFormatError(f"unknown compression codec {codec}")


# --- gzip -------------------------------------------------------------------------------------------------


def _gzip_decompress(data, max_size: int) -> bytes:
    out: list[bytes] = []
    total = 0
    rest = memoryview(data)
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(rest, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise RecordFormatError(f"gzip data inflates beyond {max_size} bytes")
        out.append(chunk)
        if not d.eof:
            raise RecordFormatError("truncated gzip stream")
        rest = d.unused_data
        # Another member follows only if it starts with the gzip magic; anything else is trailing junk that
        # java.util.zip.GZIPInputStream ignores too.
        if rest[:2] != b"\x1f\x8b":
            return b"".join(out)


# --- snappy -----------------------------------------------------------------------------------------------


#: Raw snappy output is at most ~21.3x its input (a 3-byte copy op yields 64 bytes): a declared length beyond this
#: bound cannot be true and is refused before the decompressor reserves memory for it.
SNAPPY_MAX_EXPANSION = 22


def snappy_length_possible(declared: int, compressed_len: int) -> bool:
    """Whether a raw snappy block of `compressed_len` bytes can really inflate to `declared` bytes."""
    return declared <= SNAPPY_MAX_EXPANSION * compressed_len + 32


def snappy_compress_raw(data: bytes | bytearray | memoryview) -> bytes:
    """One raw snappy block (no framing): Kafka's snappy codec, and a TANK bundle's compressed message set."""
    return bytes(cramjam.snappy.compress_raw(data))


def snappy_decompress_raw(block: bytes | bytearray | memoryview, what: str = "snappy block") -> bytes:
    """Inflate one raw snappy block whose declared length the caller has already bounded.

    Raises `RecordFormatError` ("{what} does not decompress: ...") when the block is malformed.
    """
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise RecordFormatError(f"{what} does not decompress: {exc}") from None


def _snappy_raw_length(block) -> int:
    """The uncompressed length a raw snappy block declares (its leading unsigned varint, at most 5 bytes)."""
    length = 0
    for i in range(5):
        if i >= len(block):
            break
        b = block[i]
        length |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return length
    raise RecordFormatError("bad snappy block length preamble")


def _snappy_decompress(data, max_size: int) -> bytes:
    mv = memoryview(data)
    if mv[:8] != XERIAL_MAGIC:
        declared = _snappy_raw_length(mv)
        if declared > max_size:
            raise RecordFormatError(f"snappy block declares more than {max_size} bytes")
        if not snappy_length_possible(declared, len(mv)):
            raise RecordFormatError(f"a {len(mv)}-byte snappy block cannot hold the {declared} bytes it declares")
        return bytes(cramjam.snappy.decompress_raw(mv))
    # xerial framing: 16-byte header, then [int32 BE compressed length, raw snappy block]...
    if len(mv) < _XERIAL_HEADER_SIZE:
        raise RecordFormatError("truncated xerial snappy header")
    pos = _XERIAL_HEADER_SIZE
    end = len(mv)
    out: list[bytes] = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise RecordFormatError("truncated xerial snappy block length")
        (n,) = _INT32.unpack_from(mv, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise RecordFormatError(f"xerial snappy block of {n} bytes exceeds the {end - pos} left")
        block = mv[pos : pos + n]
        pos += n
        declared = _snappy_raw_length(block)
        if not snappy_length_possible(declared, n):
            raise RecordFormatError(f"a {n}-byte snappy block cannot hold the {declared} bytes it declares")
        total += declared
        if total > max_size:
            raise RecordFormatError(f"snappy data inflates beyond {max_size} bytes")
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
    return b"".join(out)


# --- LZ4 frame --------------------------------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}  # BD bits 6..4 -> max block size


def _lz4_frame_compress(data) -> bytes:
    mv = memoryview(data)
    flg, bd = 0x60, 0x40  # version 01, independent blocks, no checksums, no content size; 64 KiB blocks
    parts = [_U32LE.pack(_LZ4_MAGIC), bytes((flg, bd, (_xxh32(bytes((flg, bd))) >> 8) & 0xFF))]
    for start in range(0, len(mv), _LZ4_BLOCK_SIZE):
        chunk = mv[start : start + _LZ4_BLOCK_SIZE]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) < len(chunk):
            parts += (_U32LE.pack(len(block)), block)
        else:  # incompressible: store it, high bit set
            parts += (_U32LE.pack(len(chunk) | 0x80000000), chunk)
    parts.append(b"\x00\x00\x00\x00")  # end mark
    return b"".join(parts)


def _lz4_decompress(data, max_size: int, legacy_checksum: bool) -> bytes:
    mv = memoryview(data)
    end = len(mv)
    pos = 0
    bound = 0
    fixed: bytearray | None = None
    while pos < end:
        if end - pos < 4:
            raise RecordFormatError("truncated LZ4 frame magic")
        (magic,) = _U32LE.unpack_from(mv, pos)
        if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
            if end - pos < 8:
                raise RecordFormatError("truncated LZ4 skippable frame")
            pos += 8 + _U32LE.unpack_from(mv, pos + 4)[0]
            continue
        if magic != _LZ4_MAGIC:
            raise RecordFormatError(f"bad LZ4 frame magic {magic:#x}")
        if end - pos < 7:
            raise RecordFormatError("truncated LZ4 frame header")
        flg, bd = mv[pos + 4], mv[pos + 5]
        if flg >> 6 != 1:
            raise RecordFormatError(f"unsupported LZ4 frame version in FLG {flg:#x}")
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
        if block_max is None:
            raise RecordFormatError(f"bad LZ4 block size in BD {bd:#x}")
        desc_len = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        hc_pos = pos + 4 + desc_len
        if hc_pos >= end:
            raise RecordFormatError("truncated LZ4 frame header")
        if legacy_checksum:
            hc = (_xxh32(bytes(mv[pos + 4 : hc_pos])) >> 8) & 0xFF
            if mv[hc_pos] != hc:
                if fixed is None:
                    fixed = bytearray(mv)
                fixed[hc_pos] = hc
        block_checksum = 4 if flg & 0x10 else 0
        pos = hc_pos + 1
        while True:
            if end - pos < 4:
                raise RecordFormatError("truncated LZ4 block header")
            (size,) = _U32LE.unpack_from(mv, pos)
            pos += 4
            if size == 0:  # end mark
                break
            n = size & 0x7FFFFFFF
            if n > block_max:
                raise RecordFormatError(f"LZ4 block of {n} bytes exceeds its frame's {block_max}")
            bound += n if size & 0x80000000 else block_max
            pos += n + block_checksum
            if pos > end:
                raise RecordFormatError("truncated LZ4 block")
        pos += 4 if flg & 0x04 else 0  # content checksum
        if pos > end:
            raise RecordFormatError("truncated LZ4 content checksum")
        # Only a frame's last block may be partial, so allow one block of slack; the exact check follows.
        if bound > max_size + block_max:
            raise RecordFormatError(f"LZ4 data may inflate beyond {max_size} bytes")
    out = bytes(cramjam.lz4.decompress(fixed if fixed is not None else mv))
    if len(out) > max_size:
        raise RecordFormatError(f"LZ4 data inflates beyond {max_size} bytes")
    return out


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, needed only for the 2–14 byte LZ4 frame descriptor checksum (pure Python is fine)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = _U32LE.unpack_from(data, pos)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        acc = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + n) & _M32
    while pos + 4 <= n:
        (lane,) = _U32LE.unpack_from(data, pos)
        acc = (_rotl((acc + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        acc = (_rotl((acc + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


# --- zstd -------------------------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024  # Block_Maximum_Size: no compressed block regenerates more (RFC 8878 3.1.1.2)
_ZSTD_DICT_ID_SIZE = (0, 1, 2, 4)


def _zstd_decompress(data, max_size: int) -> bytes:
    mv = memoryview(data)
    end = len(mv)
    pos = 0
    bound = 0
    while pos < end:
        if end - pos < 4:
            raise RecordFormatError("truncated zstd frame magic")
        (magic,) = _U32LE.unpack_from(mv, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if end - pos < 8:
                raise RecordFormatError("truncated zstd skippable frame")
            pos += 8 + _U32LE.unpack_from(mv, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise RecordFormatError(f"bad zstd frame magic {magic:#x}")
        if end - pos < 5:
            raise RecordFormatError("truncated zstd frame header")
        fhd = mv[pos + 4]
        single_segment = fhd & 0x20
        fcs_flag = fhd >> 6
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        header_end = pos + 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZE[fhd & 3] + fcs_size
        if header_end > end:
            raise RecordFormatError("truncated zstd frame header")
        if not single_segment:  # the decoder reserves the declared window: it must fit the output limit
            wd = mv[pos + 5]
            window = 1 << (10 + (wd >> 3))
            window += (window >> 3) * (wd & 7)
            if window > max(max_size, _ZSTD_BLOCK_MAX):
                raise RecordFormatError(f"zstd window of {window} bytes exceeds the {max_size}-byte limit")
        content_size = -1
        if fcs_size:
            content_size = int.from_bytes(mv[header_end - fcs_size:header_end], "little")
            content_size += 256 if fcs_size == 2 else 0
            if content_size > max_size:
                raise RecordFormatError(f"zstd frame declares {content_size} bytes, more than {max_size}")
        frame_bound = bound
        pos = header_end
        while True:
            if end - pos < 3:
                raise RecordFormatError("truncated zstd block header")
            header = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            pos += 3
            last, btype, bsize = header & 1, (header >> 1) & 3, header >> 3
            if btype == 0:  # raw
                bound += bsize
                pos += bsize
            elif btype == 1:  # RLE: one byte repeated bsize times
                bound += bsize
                pos += 1
            elif btype == 2:  # compressed
                if bsize > _ZSTD_BLOCK_MAX:
                    raise RecordFormatError(f"zstd block of {bsize} bytes exceeds {_ZSTD_BLOCK_MAX}")
                bound += _ZSTD_BLOCK_MAX
                pos += bsize
            else:
                raise RecordFormatError("reserved zstd block type")
            if pos > end:
                raise RecordFormatError("truncated zstd block")
            if last:
                break
        pos += 4 if fhd & 0x04 else 0  # content checksum
        if pos > end:
            raise RecordFormatError("truncated zstd content checksum")
        if content_size > bound - frame_bound:  # the decoder would reserve more than the blocks can produce
            raise RecordFormatError(f"zstd frame declares {content_size} bytes its blocks cannot hold")
        # Only a frame's last block may be partial, so allow one block of slack; the exact check follows.
        if bound > max_size + _ZSTD_BLOCK_MAX:
            raise RecordFormatError(f"zstd data may inflate beyond {max_size} bytes")
    out = bytes(cramjam.zstd.decompress(mv))
    if len(out) > max_size:
        raise RecordFormatError(f"zstd data inflates beyond {max_size} bytes")
    return out
