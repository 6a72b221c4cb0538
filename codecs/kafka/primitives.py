"""Kafka protocol primitive types as `construct` constructs, and `schema()`, which declares one message layout.

Every type is big-endian. Non-flexible versions use the classic forms; flexible versions (KIP-482) use the
compact forms, whose length or count is an unsigned varint holding `n + 1` (0 = null), and end every struct with
a tagged-field section:

=====================  =======================================================  ==========
name                   wire form                                                min. size
=====================  =======================================================  ==========
Int8/16/32/64          signed integer                                           1/2/4/8
UInt32                 unsigned 32-bit integer                                  4
Uuid                   16 bytes (a topic id; all zero = none), parsed as bytes  16
Boolean                int8, 0 = false, anything else = true (Kafka: `!= 0`)    1
UnsignedVarint         base-128 unsigned 32-bit integer, at most 5 bytes        1
String                 int16 length + UTF-8; a negative length is refused       2
NullableString         int16 length (-1 = null) + UTF-8                         2
Bytes                  int32 length + bytes; a negative length is refused       4
NullableBytes          int32 length (-1 = null) + bytes                         4
Records                NullableBytes holding a record set; see "deferred"       4
Array(T)               int32 count + count items of T; -1 is refused            4
NullableArray(T)       int32 count (-1 = null) + items                          4
CompactString          uvarint length + 1, UTF-8; null (0) is refused           1
CompactNullableString  uvarint length + 1 (0 = null) + UTF-8                    1
CompactBytes           uvarint length + 1 + bytes; null is refused              1
CompactNullableBytes   uvarint length + 1 (0 = null) + bytes                    1
CompactRecords         CompactNullableBytes holding a record set                1
CompactArray(T)        uvarint count + 1 + items; null is refused               1
CompactNullableArray   uvarint count + 1 (0 = null) + items                     1
NullableStruct(S)      int8 -1 (null) or 1, then the struct S                   1
TaggedFields           uvarint count, then (uvarint tag, uvarint size, bytes)*  1
=====================  =======================================================  ==========

Flexible versions are declared from the classic layout, as Kafka's message JSON declares types once for every
version: `flexible(schema(Cls, name=String, items=Array(...)))` turns every string/bytes/array into its compact
form, recursively, and gives every struct (`Schema`) a trailing tagged-field section. Parsing reads and skips
every tag (we know none); building writes an empty section (one zero byte): the spec forbids non-empty ones.
Headers are the exception (the request header's client_id stays an int16 string): `headers` builds them with
`Schema(..., flexible=True)` directly.

Bounds (design habit 6): every length and count read from the wire is checked against the bytes left in the
frame *before* anything is read or allocated. A string or bytes length must be <= the bytes left (and a string
<= `MAX_STRING_BYTES`, compact or not, as Kafka checks); an array count must satisfy `count * min_size(item) <=
bytes left`, where `min_size` is the smallest encoding of one item (a struct's is the sum of its fields', plus 1
for its tagged-field section); a tagged-field count must satisfy `count * MIN_TAGGED_FIELD_SIZE <= bytes left`;
an unsigned varint takes at most `MAX_VARINT_BYTES` (5) bytes and fits 32 bits. A 20-byte frame claiming
2**31-1 elements therefore fails at once, and the work any frame can cause is proportional to its size (which
the connection caps). Failures raise `BoundError`, a `construct.StreamError`; invalid UTF-8 raises
`construct.StringError`: callers catch `construct.ConstructError`.

`schema(DataclassType, field=type, ...)` declares the fields of one version, in wire order, and parses straight
into the dataclass (fields the version lacks keep the dataclass defaults) and builds from it (other fields are
ignored). It is a `construct.Construct`, so schemas nest inside `Array` and other constructs. It does not go
through `construct.Struct`/`Container`: a run of consecutive fixed-size fields is fused into one `struct.Struct`
and values go directly into the dataclass, which made a 32-partition Produce request parse 5x faster than an
`Adapter` over a `Struct` in a prototype (58 µs instead of 295 µs on the project VM). When reading a
`FrameReader`, fixed-size fields are unpacked straight from the frame's memoryview (a further ~1.7x).

Deferred records: when building, a `Records` (or `CompactRecords`) value may be an object that is not
bytes-like and has an integer attribute `length` (e.g. a file slice the gateway sends with `os.sendfile`). Its
length is written and its stream position recorded in the build context (`build_chunks()` collects them), so
the caller can send the bytes around it and the object in its place.
"""

from __future__ import annotations

import dataclasses
import struct
from operator import attrgetter
from types import SimpleNamespace
from typing import Any, Callable, Iterable

import construct as c
from construct.core import stream_read, stream_write

from ..errors import RecordFormatError
from ..varint import MAX_VARINT_BYTES, decode_unsigned_varint, encode_unsigned_varint

__all__ = [
    "BoundError",
    "FrameReader",
    "FrameWriter",
    "bytes_left",
    "min_size",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "UInt32",
    "Uuid",
    "ZERO_UUID",
    "Boolean",
    "String",
    "NullableString",
    "Bytes",
    "NullableBytes",
    "Records",
    "Array",
    "NullableArray",
    "UnsignedVarint",
    "CompactString",
    "CompactNullableString",
    "CompactBytes",
    "CompactNullableBytes",
    "CompactRecords",
    "CompactArray",
    "CompactNullableArray",
    "NullableStruct",
    "NullableStructType",
    "TaggedFields",
    "EMPTY_TAGGED_FIELDS",
    "MAX_STRING_BYTES",
    "MAX_VARINT_BYTES",
    "MIN_TAGGED_FIELD_SIZE",
    "StringType",
    "BytesType",
    "ArrayType",
    "Schema",
    "schema",
    "flexible",
    "versioned",
    "is_deferred",
    "parse_frame",
    "parse_from",
    "build_bytes",
    "build_chunks",
    "piece_length",
    "build_into",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NULL16 = _I16.pack(-1)
_NULL32 = _I32.pack(-1)

#: Largest string: an int16 length cannot say more, and Kafka refuses longer compact strings too.
MAX_STRING_BYTES = 0x7FFF
#: Smallest tagged field: a one-byte tag and a one-byte size of 0. Bounds a tagged-field count before the loop.
MIN_TAGGED_FIELD_SIZE = 2
#: An empty tagged-field section (count 0): all we ever write (the spec: never write non-empty sections).
EMPTY_TAGGED_FIELDS = b"\x00"


class BoundError(c.StreamError):
    """A length or count read from the wire claims more than the bytes left in the frame."""


class FrameReader:
    """A read-only stream over one frame that knows how many bytes remain (what `bytes_left` asks).

    It implements the part of the file API construct uses (`read`, `tell`, `seek`) over a memoryview, so parsing
    a frame never copies it; `read` returns `bytes`, as construct expects.
    """

    __slots__ = ("_view", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data)
        self.pos = 0
        self.end = self._view.nbytes

    def read(self, n: int = -1) -> bytes:
        pos = self.pos
        stop = self.end if n < 0 else min(pos + n, self.end)
        self.pos = stop
        return self._view[pos:stop].tobytes()

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self.pos, self.end)[whence]
        self.pos = max(0, min(base + offset, self.end))
        return self.pos

    def remaining(self) -> int:
        return self.end - self.pos


class FrameWriter:
    """An append-only in-memory stream (what construct's build writes to), backed by a bytearray.

    Besides `write`/`tell` it offers `getvalue()` and `patch_int32()`; it stands in for BytesIO so the codec
    needs no file API.
    """

    __slots__ = ("_buf",)

    def __init__(self, prefix: bytes = b"") -> None:
        self._buf = bytearray(prefix)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._buf += data
        return len(data)

    def tell(self) -> int:
        return len(self._buf)

    def getvalue(self) -> bytes:
        return bytes(self._buf)

    def patch_int32(self, pos: int, value: int) -> None:
        """Overwrite 4 bytes at `pos` with `value` (a size prefix known only after the build)."""
        _I32.pack_into(self._buf, pos, value)


def bytes_left(stream: Any) -> int:
    """Bytes that remain to be read in `stream` (a `FrameReader`, or any seekable stream such as BytesIO)."""
    if type(stream) is FrameReader:
        return stream.end - stream.pos
    pos = stream.tell()
    end = stream.seek(0, 2)  # SEEK_END
    stream.seek(pos)
    return end - pos


def _unpack(st: struct.Struct, stream: Any, path: str) -> tuple:
    """Read and unpack `st.size` bytes; straight from the frame's memoryview when reading a FrameReader."""
    if type(stream) is FrameReader:
        pos = stream.pos
        end = pos + st.size
        if end > stream.end:
            raise c.StreamError(f"needed {st.size} bytes, {stream.end - pos} left", path=path)
        stream.pos = end
        return st.unpack_from(stream._view, pos)
    return st.unpack(stream_read(stream, st.size, path))


def _take(stream: Any, n: int, path: str) -> bytes | memoryview:
    """The next `n` bytes (the caller has bounded `n`): a memoryview slice for a FrameReader, else bytes."""
    if type(stream) is FrameReader:
        pos = stream.pos
        stream.pos = pos + n
        return stream._view[pos:pos + n]
    return stream_read(stream, n, path)


def min_size(con: c.Construct) -> int:
    """The smallest number of bytes one value of `con` can take on the wire (0 when unknown)."""
    size = getattr(con, "min_size", None)
    if size is not None:
        return size
    try:
        return con.sizeof()
    except c.SizeofError:
        return 0


# --------------------------------------------------------------------------------------------- fixed size

Int8 = c.Int8sb
Int16 = c.Int16sb
Int32 = c.Int32sb
Int64 = c.Int64sb
UInt32 = c.Int32ub


class UuidType(c.FormatField):
    """A UUID (Kafka's topic ids): 16 bytes, parsed as `bytes`. A FormatField (construct's own constructor takes
    one-letter formats only), so it fuses into the fixed-size runs of `Schema`; struct's "16s" pads a shorter value
    with zeros, so builders give 16 bytes (`ZERO_UUID`: none)."""

    def __init__(self) -> None:
        c.Construct.__init__(self)
        self.fmtstr = ">16s"
        self.length = 16

    def __repr__(self) -> str:
        return "Uuid"


Uuid = UuidType()
ZERO_UUID = bytes(16)
#: struct's "?" reads any non-zero byte as True (as Kafka does) and writes 0/1; being a FormatField, a boolean
#: fuses into the fixed-size runs of `Schema`.
Boolean = c.FormatField(">", "?")


# ----------------------------------------------------------------------------------- lengths and varints


def _read_uvarint(stream: Any, path: str) -> int:
    """An unsigned varint (at most MAX_VARINT_BYTES bytes, 32 bits), decoded by `logway.codecs.varint`."""
    if type(stream) is FrameReader:
        buf, start, base = stream._view[:stream.end], stream.pos, 0
    else:
        base = stream.tell()
        buf, start = stream.read(MAX_VARINT_BYTES), 0
    try:
        value, end = decode_unsigned_varint(buf, start)
    except RecordFormatError as exc:
        raise c.StreamError(str(exc), path=path) from None
    if type(stream) is FrameReader:
        stream.pos = end
    else:
        stream.seek(base + end)
    return value


def _uvarint(value: int, path: str) -> bytes:
    try:
        return encode_unsigned_varint(value)
    except ValueError as exc:
        raise c.StreamError(str(exc), path=path) from None


class _Length:
    """How a string, bytes or array writes its length or count: classic (an int16/int32, -1 = null) or compact
    (an unsigned varint holding n + 1, 0 = null). `read` returns -1 for null."""

    __slots__ = ("min_size", "struct")

    def __init__(self, st: struct.Struct | None) -> None:
        self.struct = st
        self.min_size = 1 if st is None else st.size

    def read(self, stream: Any, path: str) -> int:
        if self.struct is None:
            return _read_uvarint(stream, path) - 1
        return _unpack(self.struct, stream, path)[0]

    def encode(self, n: int, path: str) -> bytes:
        if self.struct is None:
            return _uvarint(n + 1, path)
        return self.struct.pack(n)


_LEN16, _LEN32, _COMPACT = _Length(_I16), _Length(_I32), _Length(None)


class UnsignedVarintType(c.Construct):
    """A base-128 unsigned 32-bit integer (no zigzag): compact lengths and tagged fields are made of these."""

    min_size = 1

    def _parse(self, stream, context, path):
        return _read_uvarint(stream, path)

    def _build(self, obj, stream, context, path):
        stream.write(_uvarint(obj, path))
        return obj

    def _sizeof(self, context, path):
        raise c.SizeofError("variable length", path=path)

    def __repr__(self) -> str:
        return "UnsignedVarint"


UnsignedVarint = UnsignedVarintType()


# ------------------------------------------------------------------------------------ strings and bytes


class StringType(c.Construct):
    """A UTF-8 string: int16 length, or (compact) uvarint length + 1; nullable: -1 (compact: 0) = null."""

    def __init__(self, nullable: bool, compact: bool = False) -> None:
        super().__init__()
        self.nullable = nullable
        self.compact = compact
        self._len = _COMPACT if compact else _LEN16
        self.min_size = self._len.min_size
        self.name_ = ("Compact" if compact else "") + ("NullableString" if nullable else "String")

    def _parse(self, stream, context, path):
        n = self._len.read(stream, path)
        if n < 0:  # Kafka reads any negative length as null
            if self.nullable:
                return None
            raise c.StringError("non-nullable string was serialized as null", path=path)
        if n > MAX_STRING_BYTES:  # only a compact length can say so; Kafka refuses it too
            raise BoundError(f"string length {n} exceeds {MAX_STRING_BYTES}", path=path)
        if n > bytes_left(stream):
            raise BoundError(f"string length {n} exceeds the {bytes_left(stream)} bytes left", path=path)
        try:
            return str(_take(stream, n, path), "utf-8")
        except UnicodeDecodeError:
            raise c.StringError("string is not valid UTF-8", path=path) from None

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise c.StringError("None given for a non-nullable string", path=path)
            stream_write(stream, self._len.encode(-1, path), self.min_size, path)
            return obj
        try:
            data = obj.encode("utf-8")
        except (AttributeError, UnicodeEncodeError) as exc:
            raise c.StringError(f"cannot encode {obj!r} as a Kafka string: {exc}", path=path) from None
        n = len(data)
        if n > MAX_STRING_BYTES:
            raise c.StringError(f"string of {n} bytes exceeds the int16 length", path=path)
        stream.write(self._len.encode(n, path) + data)
        return obj

    def _sizeof(self, context, path):
        raise c.SizeofError("variable length", path=path)

    def __repr__(self) -> str:
        return self.name_


_BYTES_LIKE = (bytes, bytearray, memoryview)


#: A record set in memory larger than this is not copied into the frame being built (`build_chunks`): it becomes a
#: piece of its own, written after the bytes before it (a down-converted or transcoded Fetch answer of megabytes
#: would otherwise be copied twice on its way out).
UNCOPIED_RECORDS_BYTES = 64 * 1024


def piece_length(obj: Any) -> int:
    """The length of a piece `build_chunks` deferred: a bytes-like's, or a deferred object's `length`."""
    return memoryview(obj).nbytes if isinstance(obj, _BYTES_LIKE) else obj.length


def is_deferred(obj: Any) -> bool:
    """True for a deferred `records` value: not bytes-like, with an integer attribute `length`."""
    return (obj is not None and not isinstance(obj, _BYTES_LIKE)
            and isinstance(getattr(obj, "length", None), int))


class BytesType(c.Construct):
    """Bytes: int32 length, or (compact) uvarint length + 1; nullable: -1 (compact: 0) = null.
    `records=True` also accepts deferred values when building."""

    def __init__(self, nullable: bool, records: bool = False, compact: bool = False) -> None:
        super().__init__()
        self.nullable = nullable
        self.records = records
        self.compact = compact
        self._len = _COMPACT if compact else _LEN32
        self.min_size = self._len.min_size
        self.name_ = ("Compact" if compact else "") + (
            "Records" if records else "NullableBytes" if nullable else "Bytes")

    def _parse(self, stream, context, path):
        n = self._len.read(stream, path)
        if n < 0:
            if self.nullable:
                return None
            raise c.StreamError("non-nullable bytes were serialized as null", path=path)
        if n > bytes_left(stream):
            raise BoundError(f"bytes length {n} exceeds the {bytes_left(stream)} bytes left", path=path)
        return bytes(_take(stream, n, path))

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise c.StreamError("None given for non-nullable bytes", path=path)
            stream_write(stream, self._len.encode(-1, path), self.min_size, path)
        elif isinstance(obj, _BYTES_LIKE):
            n = memoryview(obj).nbytes
            stream.write(self._len.encode(n, path))
            deferred = context._params.get("deferred") if self.records and n > UNCOPIED_RECORDS_BYTES else None
            if deferred is not None:  # a large record set in memory: a piece of its own, not copied into the frame
                deferred.append((stream.tell(), obj))
            else:
                stream.write(obj)
        elif self.records and is_deferred(obj):
            deferred = context._params.get("deferred")
            if deferred is None:
                raise c.StreamError("deferred records need build_chunks(), not a plain build", path=path)
            if not 0 <= obj.length <= 0x7FFFFFFF:
                raise c.StreamError(f"deferred records length {obj.length} is not a valid int32 size", path=path)
            stream.write(self._len.encode(obj.length, path))
            deferred.append((stream.tell(), obj))
        else:
            raise c.StreamError(f"expected bytes, got {type(obj).__name__}", path=path)
        return obj

    def _sizeof(self, context, path):
        raise c.SizeofError("variable length", path=path)

    def __repr__(self) -> str:
        return self.name_


String = StringType(nullable=False)
NullableString = StringType(nullable=True)
Bytes = BytesType(nullable=False)
NullableBytes = BytesType(nullable=True)
#: The `records` type of non-flexible versions: nullable int32-length bytes holding a record set (RecordBatch v2
#: or a legacy MessageSet). Kept opaque here; `records`/`legacy` decode it.
Records = BytesType(nullable=True, records=True)
CompactString = StringType(nullable=False, compact=True)
CompactNullableString = StringType(nullable=True, compact=True)
CompactBytes = BytesType(nullable=False, compact=True)
CompactNullableBytes = BytesType(nullable=True, compact=True)
CompactRecords = BytesType(nullable=True, records=True, compact=True)


# ------------------------------------------------------------------------------------------------ arrays


class ArrayType(c.Subconstruct):
    """A count (int32, or compact: uvarint count + 1) + items; nullable: -1 (compact: 0) = null.
    Items of a fixed-size integer type go through one struct call."""

    def __init__(self, subcon: c.Construct, nullable: bool, compact: bool = False) -> None:
        super().__init__(subcon)
        self.nullable = nullable
        self.compact = compact
        self._len = _COMPACT if compact else _LEN32
        self.min_size = self._len.min_size
        # At least one byte per item even for a hypothetical zero-size item, as Kafka bounds counts too.
        self.item_min_size = max(1, min_size(subcon))
        # (one-letter formats only: ">{n}16s" would read one string of n*16 bytes)
        self._fmt = subcon.fmtstr[1:] if isinstance(subcon, c.FormatField) and len(subcon.fmtstr) == 2 else None

    def _parse(self, stream, context, path):
        n = self._len.read(stream, path)
        if n < 0:
            if self.nullable:
                return None
            raise c.RangeError("non-nullable array was serialized as null", path=path)
        left = bytes_left(stream)
        if n * self.item_min_size > left:  # before reading (or allocating) a single item
            raise BoundError(
                f"array of {n} items needs at least {n * self.item_min_size} bytes, {left} left", path=path)
        if self._fmt is not None:
            return list(struct.unpack(f">{n}{self._fmt}", _take(stream, n * self.item_min_size, path)))
        sub = self.subcon
        return [sub._parse(stream, context, path) for _ in range(n)]

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise c.RangeError("None given for a non-nullable array", path=path)
            stream_write(stream, self._len.encode(-1, path), self.min_size, path)
            return obj
        n = len(obj)
        if self._fmt is not None:
            try:
                stream.write(self._len.encode(n, path) + struct.pack(f">{n}{self._fmt}", *obj))
            except struct.error as exc:
                raise c.FormatFieldError(f"array of {self._fmt!r}: {exc}", path=path) from None
            return obj
        stream.write(self._len.encode(n, path))
        sub = self.subcon
        for item in obj:
            sub._build(item, stream, context, path)
        return obj

    def _sizeof(self, context, path):
        raise c.SizeofError("variable length", path=path)

    def __repr__(self) -> str:
        kind = ("Compact" if self.compact else "") + ("NullableArray" if self.nullable else "Array")
        return f"{kind}({self.subcon!r})"


def Array(item: c.Construct) -> ArrayType:  # noqa: N802 - reads like a type in schema declarations
    """A non-nullable array of `item` (int32 count)."""
    return ArrayType(item, nullable=False)


def NullableArray(item: c.Construct) -> ArrayType:  # noqa: N802
    """A nullable array of `item` (int32 count, -1 = null)."""
    return ArrayType(item, nullable=True)


def CompactArray(item: c.Construct) -> ArrayType:  # noqa: N802
    """A non-nullable compact array of `item` (uvarint count + 1)."""
    return ArrayType(item, nullable=False, compact=True)


def CompactNullableArray(item: c.Construct) -> ArrayType:  # noqa: N802
    """A nullable compact array of `item` (uvarint count + 1, 0 = null)."""
    return ArrayType(item, nullable=True, compact=True)


# --------------------------------------------------------------------------------------- nullable structs

_NULL_STRUCT, _PRESENT_STRUCT = b"\xff", b"\x01"


class NullableStructType(c.Subconstruct):
    """A struct that may be null (Kafka's nullable struct fields, e.g. ConsumerGroupHeartbeat's assignment): an
    int8 marker, -1 for null (nothing follows) or 1, then the struct. Kafka reads any negative marker as null."""

    min_size = 1

    def _parse(self, stream, context, path):
        (marker,) = _unpack(_MARKER, stream, path)
        if marker < 0:
            return None
        return self.subcon._parse(stream, context, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            stream.write(_NULL_STRUCT)
            return obj
        stream.write(_PRESENT_STRUCT)
        self.subcon._build(obj, stream, context, path)
        return obj

    def _sizeof(self, context, path):
        raise c.SizeofError("variable length", path=path)

    def __repr__(self) -> str:
        return f"NullableStruct({self.subcon!r})"


_MARKER = struct.Struct(">b")


def NullableStruct(item: c.Construct) -> NullableStructType:  # noqa: N802 - reads like a type in declarations
    """A nullable struct of layout `item` (an int8 presence marker, then the struct)."""
    return NullableStructType(item)


# ------------------------------------------------------------------------------------------ tagged fields


class TaggedFieldsType(c.Construct):
    """A tagged-field section (KIP-482): uvarint count, then per field uvarint tag, uvarint size, `size` bytes.

    Parsing skips every field (no schema of ours declares a tag; Kafka keeps unknown ones aside and so ignores
    them too) and returns None; building writes an empty section whatever the value.
    """

    min_size = 1

    def _parse(self, stream, context, path):
        count = _read_uvarint(stream, path)
        left = bytes_left(stream)
        if count * MIN_TAGGED_FIELD_SIZE > left:  # before looping over them
            raise BoundError(f"{count} tagged fields need at least {count * MIN_TAGGED_FIELD_SIZE} bytes, "
                             f"{left} left", path=path)
        for _ in range(count):
            _read_uvarint(stream, path)  # the tag: unknown to us, skipped
            size = _read_uvarint(stream, path)
            if size > bytes_left(stream):
                raise BoundError(f"tagged field of {size} bytes exceeds the {bytes_left(stream)} bytes left",
                                 path=path)
            _take(stream, size, path)

    def _build(self, obj, stream, context, path):
        stream.write(EMPTY_TAGGED_FIELDS)
        return obj

    def _sizeof(self, context, path):
        raise c.SizeofError("variable length", path=path)

    def __repr__(self) -> str:
        return "TaggedFields"


TaggedFields = TaggedFieldsType()


# ------------------------------------------------------------------------------------------------ schema


def _single(name: str) -> Callable[[Any], tuple]:
    get = attrgetter(name)
    return lambda obj: (get(obj),)


class Schema(c.Construct):
    """The fields of one message version, in wire order, parsed into / built from a dataclass `cls`.

    Consecutive fixed-size fields (`construct.FormatField`s: the integer types and Boolean) are fused into one
    `struct.Struct`. `min_size` is the sum of the fields' minimum sizes (what an enclosing `Array` bounds with).
    `flexible=True` adds a tagged-field section after the fields (read and skipped; written empty); see
    `flexible()`, which also turns the fields into their compact forms.
    """

    def __init__(self, cls: type, fields: Iterable[tuple[str, c.Construct]], flexible: bool = False) -> None:
        super().__init__()
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a dataclass")
        known = {f.name for f in dataclasses.fields(cls)}
        self.cls = cls
        self.fields: tuple[tuple[str, c.Construct], ...] = tuple(fields)
        for name, con in self.fields:
            if name not in known:
                raise TypeError(f"{cls.__name__} has no field {name!r}")
            if not isinstance(con, c.Construct):
                raise TypeError(f"{cls.__name__}.{name}: {con!r} is not a construct")
        self.names = tuple(name for name, _ in self.fields)
        self.flexible = flexible
        self.min_size = sum(min_size(con) for _, con in self.fields) + (TaggedFields.min_size if flexible else 0)
        # steps: (struct or None, construct or None, getter); a struct step covers a run of FormatFields
        steps: list[tuple[Any, Any, Callable]] = []
        run: list[tuple[str, c.FormatField]] = []

        def flush() -> None:
            if run:
                names = [n for n, _ in run]
                fmt = ">" + "".join(f.fmtstr[1:] for _, f in run)
                getter = attrgetter(*names) if len(names) > 1 else _single(names[0])
                steps.append((struct.Struct(fmt), None, getter))
                run.clear()

        for name, con in self.fields:
            if isinstance(con, c.FormatField) and con.fmtstr[0] == ">":
                run.append((name, con))
            else:
                flush()
                steps.append((None, con, attrgetter(name)))
        flush()
        self._steps = tuple(steps)

    def _parse(self, stream, context, path):
        values: list[Any] = []
        for st, con, _ in self._steps:
            if st is not None:
                values.extend(_unpack(st, stream, path))
            else:
                values.append(con._parse(stream, context, path))
        if self.flexible:
            TaggedFields._parse(stream, context, path)
        return self.cls(**dict(zip(self.names, values)))

    def _build(self, obj, stream, context, path):
        if not isinstance(obj, self.cls):
            raise c.ConstructError(f"expected {self.cls.__name__}, got {type(obj).__name__}", path=path)
        for st, con, get in self._steps:
            if st is not None:
                try:
                    stream.write(st.pack(*get(obj)))
                except struct.error as exc:
                    raise c.FormatFieldError(f"{self.cls.__name__}: {exc} in {get(obj)!r}", path=path) from None
            else:
                con._build(get(obj), stream, context, path)
        if self.flexible:
            stream.write(EMPTY_TAGGED_FIELDS)
        return obj

    def _sizeof(self, context, path):
        if self.flexible:
            raise c.SizeofError("a tagged-field section has a variable length", path=path)
        return sum(con._sizeof(context, path) for _, con in self.fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={con!r}" for n, con in self.fields)
        text = f"schema({self.cls.__name__}, {inner})"
        return f"flexible({text})" if self.flexible else text


def schema(cls: type, **fields: c.Construct) -> Schema:
    """Declare one version of a message: `schema(ProduceRequest, acks=Int16, timeout_ms=Int32, ...)`."""
    return Schema(cls, fields.items())


def flexible(con: c.Construct) -> c.Construct:
    """The flexible-version (KIP-482) form of a layout declared with the classic types.

    Strings, bytes, records and arrays become their compact forms (nullability kept), recursively through array
    items and nested schemas; every `Schema` gains its tagged-field section; fixed-size types are unchanged.
    `flexible(schema(Cls, ...))` is how an API declares a flexible version.
    """
    if isinstance(con, Schema):
        if con.flexible:
            return con
        return Schema(con.cls, ((name, flexible(sub)) for name, sub in con.fields), flexible=True)
    if isinstance(con, ArrayType):
        return ArrayType(flexible(con.subcon), nullable=con.nullable, compact=True)
    if isinstance(con, NullableStructType):
        return NullableStructType(flexible(con.subcon))
    if isinstance(con, StringType):
        return CompactNullableString if con.nullable else CompactString
    if isinstance(con, BytesType):
        if con.records:
            return CompactRecords
        return CompactNullableBytes if con.nullable else CompactBytes
    if isinstance(con, (TaggedFieldsType, UnsignedVarintType, c.FormatField)):
        return con
    raise TypeError(f"no flexible form of {con!r}")


def versioned(max_version: int, changes: dict[int, Schema]) -> dict[int, Schema]:
    """Expand {first version with a new layout: schema} to one entry per version 0..max_version.

    Versions that did not change the layout reuse the previous schema object (the kafka-python habit).
    """
    if 0 not in changes:
        raise ValueError("version 0 must be declared")
    out: dict[int, Schema] = {}
    current = changes[0]
    for v in range(max_version + 1):
        current = changes.get(v, current)
        out[v] = current
    if max(changes) > max_version:
        raise ValueError(f"a schema is declared past max_version {max_version}")
    return out


# ----------------------------------------------------------------------------------------- entry points


def _context(parsing: bool, params: dict) -> SimpleNamespace:
    """A top-level context with what construct's `parse_stream`/`build_stream` put in one, but no reference cycle
    (theirs holds itself as `_params`: a cycle per call that only the cyclic garbage collector frees — the gateway
    parses and builds a few per Kafka request, they filled its young generation, whose collections became its
    longest pauses) and no `Container` (whose attribute sets are Python calls): every construct of the Kafka layouts
    is ours or a FormatField, and ours read only `_params`."""
    return SimpleNamespace(_parsing=parsing, _building=not parsing, _sizing=False, _params=params)


#: The contexts of a parse, and of a build without parameters: shared, as nothing writes into a context.
_PARSING = _context(True, {})
_BUILDING = _context(False, {})


def parse_from(con: c.Construct, stream) -> Any:
    """`con.parse_stream(stream)` without the context's reference cycle (see `_context`). Parsing calls each
    construct's `_parse` directly, not construct's `_parsereport` wrapper: that only adds the `parsed` callback,
    which none of the Kafka layouts sets."""
    return con._parse(stream, _PARSING, "(parsing)")


def build_into(con: c.Construct, obj: Any, stream, **params: Any) -> None:
    """`con.build_stream(obj, stream, **params)` without the context's reference cycle (see `_context`)."""
    con._build(obj, stream, _context(False, params) if params else _BUILDING, "(building)")


def parse_frame(con: c.Construct, data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Any, int]:
    """Parse `con` from `data[offset:]`; return (value, bytes left unread). Raises construct.ConstructError."""
    reader = FrameReader(data)
    reader.pos = offset
    value = parse_from(con, reader)
    return value, reader.end - reader.pos


def build_bytes(con: c.Construct, obj: Any) -> bytes:
    """Build `obj` with `con` into bytes (no deferred records allowed)."""
    out = FrameWriter()
    build_into(con, obj, out)
    return out.getvalue()


def build_chunks(con: c.Construct, obj: Any, stream: FrameWriter) -> list[tuple[int, Any]]:
    """Build `obj` into `stream`; return [(position in stream, deferred object)] for each deferred record set —
    a deferred object, or a bytes-like record set over `UNCOPIED_RECORDS_BYTES` (`piece_length` sizes either).

    The bytes of each deferred object belong at its position (after its int32 length, already written).
    """
    deferred: list[tuple[int, Any]] = []
    build_into(con, obj, stream, deferred=deferred)
    return deferred
