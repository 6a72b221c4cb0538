"""CRC-framed records: the on-disk unit of logway's own small logs (the offset store, the transaction store).

    record := length u32 | crc u32 | payload[length]      crc = CRC-32C (Castagnoli) of payload   (big-endian)

A record is written with one `os.write`, so it is all or nothing; reading stops at the first record that is torn
(the file ends inside it), out of bounds, or fails its CRC, and reports where the good records end and why, so the
owner truncates the tail there (what a crash or a power cut left half written).
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Iterator

from crc32c import crc32c

__all__ = ["FRAME", "frame", "Frames"]

FRAME = struct.Struct(">II")  # payload length, crc32c(payload)


def frame(payload: bytes) -> bytes:
    return FRAME.pack(len(payload), crc32c(payload)) + payload


class Frames:
    """Iterate the payloads of the whole, valid records of `f` from `start` (a file of `size` bytes). After the
    iteration, `end` is the position just after the last good record and `reason` why reading stopped early
    (None at a clean end of file). Lengths outside [min_payload, max_payload] count as damage (a flipped bit in a
    length field must not make recovery allocate gigabytes)."""

    def __init__(self, f: BinaryIO, start: int, size: int, *, min_payload: int, max_payload: int) -> None:
        self.f, self.size = f, size
        self.min_payload, self.max_payload = min_payload, max_payload
        self.end = start
        self.reason: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        f, size = self.f, self.size
        f.seek(self.end)
        while True:
            head = f.read(FRAME.size)
            if not head:
                return
            if len(head) < FRAME.size:
                self.reason = f"torn record header ({len(head)} of {FRAME.size} bytes)"
                return
            length, crc = FRAME.unpack(head)
            if not self.min_payload <= length <= self.max_payload:
                self.reason = f"record length {length} out of bounds"
                return
            left = size - self.end - FRAME.size
            if length > left:
                self.reason = f"torn record (declares {length} bytes, {left} present)"
                return
            payload = f.read(length)
            if len(payload) != length:
                self.reason = f"torn record (declares {length} bytes, read {len(payload)})"
                return
            if crc32c(payload) != crc:
                self.reason = "CRC mismatch"
                return
            yield payload
            self.end += FRAME.size + length

    def stop(self, reason: str) -> None:
        """The caller found the record just yielded unusable: reading ends before it."""
        self.reason = reason
