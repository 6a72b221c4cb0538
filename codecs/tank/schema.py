"""Declarative little-endian TANK payload layouts: each declared once, parsed and built from that one declaration.

A layout is a module-level constant listing its fields in wire order (`requests` and `responses` declare them)::

    CREATE_TOPIC_REQUEST = record(CreateTopicRequest, request_id=U32, topic=STR8, partitions=U16,
                                  config_text=VARBYTES)

`parse(reader)` reads it into the dataclass, `build(obj, out)` appends its bytes to a list of pieces; bounds
(`min_size`, which an enclosing count is checked against before anything is allocated) and the grammar text
(`repr(layout)`, e.g. `request_id u32, topic str8, ...`) are computed from the same declaration. Field types:

=========  =================================================================  =========
name       wire form                                                          min. size
=========  =================================================================  =========
U8..U64    little-endian unsigned integers                                    1/2/4/8
BOOL       u8: any non-zero byte reads as True, written as 0/1                1
STR8       u8 length + UTF-8 text (surrogateescape: any bytes round-trip)     1
BYTES8     u8 length + raw bytes (client_id)                                  1
VARBYTES   varuint32 length + raw bytes (CreateTopic's config text)           1
ENDPOINT   4 IPv4 address bytes (network order) + u16 port                    6
Array      a count (U8/U16/U32) + that many items (a field or a record)       count size
Rest       items of one fixed-size type up to the end of the payload          0
=========  =================================================================  =========

Steps besides named fields (passed as keywords too, the keyword only labelling the group): `When(doc, test,
...)` (present when `test(get)` holds, `get(name)` giving a field already read or the object being built;
`strict=True` also refuses to build its fields when set while it does not hold) and `Optional(...)` (present
when bytes remain; built when any of its fields is set, and then all of its own fields must be). `fields(...)`
makes a layout without a dataclass, read as a tuple (`values`) and built from values (`pack`).

Why `struct`, not `construct` (the Kafka codec's choice): TANK messages are flat runs of fixed-size little-
endian integers with a few length-prefixed strings, so consecutive integer fields are fused into one
`struct.Struct` at declaration time and parsed with a single `unpack_from` on the frame's memoryview, and values
go straight into the dataclass. construct would add a Python call and a Container per field for no expressive
gain here. Per-message work (bundle contents) never goes through a layout at all: it is plain `struct` and
memoryview code in `message_set`/`bundle`, and the hot loops of the Produce request and Consume response use a
layout's fused `struct` directly.

Errors split by blame: a peer's payload that does not fit raises `RemoteProtocolError(fatal=True)` naming the
field; a value that cannot be built raises `LocalProtocolError` (or `struct.error`/`TypeError`, which the
connection turns into `LocalProtocolError`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import keyword
import struct
from typing import Any, Callable

from ..errors import LocalProtocolError, RecordFormatError
from .messages import Endpoint
from .varint import decode_varint, encode_varint
from .wire import ENDPOINT_STRUCT, Reader, malformed, pack_endpoint, pack_str8

__all__ = [
    "Field",
    "U8",
    "U16",
    "U32",
    "U64",
    "BOOL",
    "STR8",
    "BYTES8",
    "VARBYTES",
    "ENDPOINT",
    "Array",
    "Rest",
    "When",
    "Optional",
    "Layout",
    "record",
    "fields",
    "read_items",
    "build_items",
]

# ------------------------------------------------------------------------------------------------ fields


class Field:
    """One wire type: `read(r, label)` parses a value, `write(value, out, label)` appends its bytes to `out`."""

    min_size = 0
    fmt: str | None = None  # a struct format character: consecutive such fields are fused into one struct
    grammar = "?"

    def read(self, r: Reader, label: str) -> Any:
        raise NotImplementedError

    def write(self, value: Any, out: list, label: str) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.grammar


class _Fixed(Field):
    """A fixed-size integer (or bool) that fuses with its neighbours into one struct."""

    def __init__(self, fmt: str, grammar: str) -> None:
        self.fmt = fmt
        self.struct = struct.Struct("<" + fmt)
        self.min_size = self.size = self.struct.size
        self.grammar = grammar

    def read(self, r: Reader, label: str) -> Any:
        pos = r.pos
        if r.end - pos < self.size:
            raise malformed(f"{r.what}: {label} needs {self.size} bytes, {r.end - pos} left")
        r.pos = pos + self.size
        return self.struct.unpack_from(r.buf, pos)[0]

    def write(self, value: Any, out: list, label: str) -> None:
        out.append(self.struct.pack(value))


U8 = _Fixed("B", "u8")
U16 = _Fixed("H", "u16")
U32 = _Fixed("I", "u32")
U64 = _Fixed("Q", "u64")
#: struct's "?" reads any non-zero byte as True (as TANK's C++ does) and writes 0/1.
BOOL = _Fixed("?", "bool")


class _Str8(Field):
    """u8 length + bytes, as text (`text=True`, UTF-8 with surrogateescape) or as bytes."""

    min_size = 1

    def __init__(self, text: bool) -> None:
        self.text = text
        self.grammar = "str8" if text else "bytes8"

    def read(self, r: Reader, label: str) -> Any:
        pos, end = r.pos, r.end
        if pos >= end:
            raise malformed(f"{r.what}: {label} needs 1 bytes, 0 left")
        n = r.buf[pos]
        if end - pos - 1 < n:
            raise malformed(f"{r.what}: {label} needs {n} bytes, {end - pos - 1} left")
        r.pos = pos + 1 + n
        raw = bytes(r.view[pos + 1:pos + 1 + n])
        return raw.decode("utf-8", "surrogateescape") if self.text else raw

    def write(self, value: Any, out: list, label: str) -> None:
        out.append(pack_str8(value, label))


STR8 = _Str8(text=True)
BYTES8 = _Str8(text=False)


class _VarBytes(Field):
    """varuint32 length + raw bytes."""

    min_size = 1
    grammar = "varint-length bytes"

    def read(self, r: Reader, label: str) -> bytes:
        try:
            n, pos = decode_varint(r.buf, r.pos, r.end)
        except RecordFormatError as exc:
            raise malformed(f"{r.what}: {label}: {exc}") from None
        if r.end - pos < n:
            raise malformed(f"{r.what}: {label} needs {n} bytes, {r.end - pos} left")
        r.pos = pos + n
        return bytes(r.view[pos:pos + n])

    def write(self, value: Any, out: list, label: str) -> None:
        raw = bytes(value)
        out.append(encode_varint(len(raw)))
        out.append(raw)


VARBYTES = _VarBytes()

_ENDPOINT = ENDPOINT_STRUCT


class _Endpoint(Field):
    """4 address bytes in network order + u16 port, as an `Endpoint("a.b.c.d", port)`."""

    min_size = _ENDPOINT.size
    grammar = "endpoint"

    def read(self, r: Reader, label: str) -> Endpoint:
        pos = r.pos
        if r.end - pos < _ENDPOINT.size:
            raise malformed(f"{r.what}: {label} needs {_ENDPOINT.size} bytes, {r.end - pos} left")
        addr, port = _ENDPOINT.unpack_from(r.buf, pos)
        r.pos = pos + _ENDPOINT.size
        return Endpoint(str(ipaddress.IPv4Address(addr)), port)

    def write(self, value: Any, out: list, label: str) -> None:
        out.append(pack_endpoint(value, label))


ENDPOINT = _Endpoint()


def read_items(r: Reader, n: int, item: Field | Layout, label: str) -> list:
    """`n` items of `item`, after checking that `n` of its smallest encoding fit in the bytes left."""
    size = max(1, item.min_size)
    if n * size > r.end - r.pos:  # before reading (or allocating) a single item
        raise malformed(f"{r.what}: {n} {label} cannot fit in the {r.end - r.pos} bytes left")
    if isinstance(item, Layout):
        if item.fast is not None:  # a record of fixed-size fields only: one struct, positional dataclass fields
            cls, st = item.fast
            pos = r.pos
            r.pos = pos + n * st.size
            return [cls(*values) for values in st.iter_unpack(r.view[pos:r.pos])]
        parse = item.parse
        return [parse(r) for _ in range(n)]
    if isinstance(item, _Fixed):
        pos = r.pos
        r.pos = pos + n * item.size
        return list(struct.unpack_from(f"<{n}{item.fmt}", r.buf, pos))
    read = item.read
    return [read(r, label) for _ in range(n)]


def build_items(items: Any, item: Field | Layout, out: list, label: str) -> None:
    """Append the bytes of every item of `items` (each a value of `item`) to `out`."""
    if getattr(item, "fast", None) is not None:  # a record of fixed-size fields only: one struct per item
        item._ops[0].write_many(items, out)
        return
    if isinstance(item, _Fixed):
        out.append(struct.pack(f"<{len(items)}{item.fmt}", *items))
        return
    if isinstance(item, Layout):
        build = item.build
        for value in items:
            build(value, out)
        return
    write = item.write
    for value in items:
        write(value, out, label)


class Array(Field):
    """A `count` field (U8, U16 or U32) and that many `item`s (a field or a record layout)."""

    def __init__(self, count: _Fixed, item: Field | Layout) -> None:
        self.count = count
        self.item = item
        self.min_size = count.size
        self.limit = (1 << (8 * count.size)) - 1
        self.grammar = f"{count.grammar} count x ({item.grammar})"

    def read(self, r: Reader, label: str) -> list:
        return read_items(r, self.count.read(r, f"{label} count"), self.item, label)

    def write(self, value: Any, out: list, label: str) -> None:
        n = len(value)
        if n > self.limit:
            raise LocalProtocolError(f"{n} {label} do not fit in one payload (at most {self.limit})")
        out.append(self.count.struct.pack(n))
        build_items(value, self.item, out, label)


class Rest(Field):
    """Items of one fixed-size type up to the end of the payload; none at all reads as `empty`."""

    def __init__(self, item: _Fixed, empty: Any = None) -> None:
        self.item = item
        self.empty = empty
        self.grammar = f"[{item.grammar}]* to the end"

    def read(self, r: Reader, label: str) -> Any:
        left = r.end - r.pos
        if not left:
            return self.empty
        if left % self.item.size:
            raise malformed(f"{r.what}: {label} list of {left} bytes is not a list of {self.item.grammar}")
        return read_items(r, left // self.item.size, self.item, label)

    def write(self, value: Any, out: list, label: str) -> None:
        if value:
            out.append(struct.pack(f"<{len(value)}{self.item.fmt}", *value))


# ----------------------------------------------------------------------------------------------- layouts


class _Run:
    """Consecutive fixed-size fields, read with one `unpack_from` and written with one `pack`.

    Its writers are generated from the field names, as `dataclasses` generates `__init__`: `pack(obj.a, obj.b)`
    is 2-3x faster than `pack(*attrgetter("a", "b")(obj))`, and Consume requests write one run per partition.
    """

    __slots__ = ("names", "struct", "labels", "sizes", "write", "write_many")

    def __init__(self, named: list[tuple[str, _Fixed]], title: str) -> None:
        self.names = tuple(name for name, _ in named)
        self.struct = struct.Struct("<" + "".join(f.fmt for _, f in named))
        self.labels = tuple(_label(title, name) for name in self.names)
        self.sizes = tuple(f.size for _, f in named)
        self.write, self.write_many = _writers(self.names, self.struct.pack)

    def read(self, r: Reader, values: dict) -> None:
        pos = r.pos
        if r.end - pos < self.struct.size:
            raise self._short(r)
        r.pos = pos + self.struct.size
        values.update(zip(self.names, self.struct.unpack_from(r.buf, pos)))

    def unpack(self, r: Reader) -> tuple:
        pos = r.pos
        if r.end - pos < self.struct.size:
            raise self._short(r)
        r.pos = pos + self.struct.size
        return self.struct.unpack_from(r.buf, pos)

    def _short(self, r: Reader) -> Exception:
        left = r.end - r.pos
        for label, size in zip(self.labels, self.sizes):
            if left < size:
                return malformed(f"{r.what}: {label} needs {size} bytes, {left} left")
            left -= size
        return AssertionError("unreachable")



def _writers(names: tuple[str, ...], pack: Callable) -> tuple[Callable, Callable]:
    """`write(obj, out)` appending `pack(obj.<name>, ...)`, and `write_many(objs, out)` doing it for each."""
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"not a field name: {name!r}")
    args = ", ".join(f"obj.{name}" for name in names)
    source = (f"def write(obj, out):\n    out.append(pack({args}))\n"
              f"def write_many(objs, out):\n    out.extend([pack({args}) for obj in objs])\n")
    namespace: dict = {"pack": pack}
    exec(source, namespace)  # noqa: S102 - the names are checked identifiers from our own declarations
    return namespace["write"], namespace["write_many"]


class _Named:
    """One field that does not fuse (strings, endpoints, arrays, nested records)."""

    __slots__ = ("name", "field", "label")

    def __init__(self, name: str, field: Field, title: str) -> None:
        self.name, self.field, self.label = name, field, _label(title, name)

    def read(self, r: Reader, values: dict) -> None:
        values[self.name] = self.field.read(r, self.label)

    def write(self, obj: Any, out: list) -> None:
        self.field.write(getattr(obj, self.name), out, self.label)


def _label(title: str | None, name: str) -> str:
    return f"{title} {name}" if title else name


class When:
    """Fields present only when `test(get)` holds; `doc` says when, in the grammar and in errors."""

    def __init__(self, doc: str, test: Callable[[Callable[[str], Any]], bool], *steps: Any, strict: bool = False,
                 **named: Field) -> None:
        self.doc, self.test, self.strict = doc, test, strict
        self.steps = steps + tuple(named.items())


class Optional:
    """Trailing fields: read when bytes remain; written when any of them is set (then all of them must be)."""

    def __init__(self, *steps: Any, **named: Field) -> None:
        self.steps = steps + tuple(named.items())


class _WhenOp:
    __slots__ = ("test", "body", "strict", "doc")

    def __init__(self, when: When, title: str | None) -> None:
        self.test, self.strict, self.doc = when.test, when.strict, when.doc
        self.body = Layout(when.steps, title=title)

    def read(self, r: Reader, values: dict) -> None:
        if self.test(values.get):
            self.body.read_into(r, values)

    def write(self, obj: Any, out: list) -> None:
        if self.test(obj.__getattribute__):
            self.body.write_from(obj, out)
        elif self.strict:
            for name in self.body.own_names:
                if getattr(obj, name) is not None:
                    raise LocalProtocolError(f"{', '.join(self.body.own_names)}: only with {self.doc}")


class _OptionalOp:
    __slots__ = ("body",)

    def __init__(self, optional: Optional, title: str | None) -> None:
        self.body = Layout(optional.steps, title=title)

    def read(self, r: Reader, values: dict) -> None:
        if r.end > r.pos:
            self.body.read_into(r, values)

    def write(self, obj: Any, out: list) -> None:
        values = [getattr(obj, n) for n in self.body.names]
        if values.count(None) == len(values):
            return
        own = self.body.own_names
        for name in own:
            if getattr(obj, name) is None:
                raise LocalProtocolError(f"{', '.join(own)} go together (and come before what follows them)")
        self.body.write_from(obj, out)


class Layout(Field):
    """Fields in wire order, read into / built from a dataclass `cls` (a record) or plain values (no `cls`).

    `steps` are `(name, field)` pairs (a field may itself be a record layout), `When`s and `Optional`s (given
    as `(label, When(...))` too: keyword arguments of `record`/`fields` keep the wire order in one list).
    `title` prefixes field names in error messages ("topic name"). See the module docstring.
    """

    def __init__(self, steps, cls: type | None = None, title: str | None = None) -> None:
        self.cls = cls
        self.title = title
        ops: list = []
        run: list[tuple[str, _Fixed]] = []
        grammar: list[str] = []
        self.own_names: tuple[str, ...] = ()  # unconditional fields, in order
        names: list[str] = []  # every field, conditional ones included
        min_size = 0

        def flush() -> None:
            if run:
                ops.append(_Run(list(run), title))
                run.clear()

        for step in steps:
            if isinstance(step, tuple) and isinstance(step[1], (When, Optional)):
                step = step[1]  # a keyword names a conditional group only for the reader of the declaration
            if isinstance(step, tuple):
                name, field = step
                if not isinstance(field, Field):
                    raise TypeError(f"{name}: {field!r} is not a field")
                names.append(name)
                self.own_names += (name,)
                min_size += field.min_size
                grammar.append(f"{name} {field.grammar}")
                if isinstance(field, _Fixed):
                    run.append((name, field))
                else:
                    flush()
                    ops.append(_Named(name, field, title))
                continue
            flush()
            if isinstance(step, When):
                op = _WhenOp(step, title)
                grammar.append(f"[{op.body.grammar} if {step.doc}]")
            elif isinstance(step, Optional):
                op = _OptionalOp(step, title)
                grammar.append(f"[{op.body.grammar}]")
            else:
                raise TypeError(f"not a layout step: {step!r}")
            names.extend(op.body.names)
            ops.append(op)
        flush()
        self.names = tuple(names)
        self.min_size = min_size
        self.grammar = ", ".join(grammar)
        self._ops = tuple(ops)
        self._readers = tuple(op.read for op in ops)
        self._writers = tuple(op.write for op in ops)
        #: A layout of fixed-size fields only has one struct (`struct`, `size`): hot loops may use it directly.
        self.struct = ops[0].struct if len(ops) == 1 and isinstance(ops[0], _Run) else None
        self.size = self.struct.size if self.struct is not None else None
        # A layout of named fields only (no When/Optional) also reads and builds plain values without a dict.
        self._plain = all(isinstance(op, (_Run, _Named)) for op in ops)
        self.fast = None
        if cls is not None:
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"{cls!r} is not a dataclass")
            known = [f.name for f in dataclasses.fields(cls) if f.init]
            missing = [n for n in self.names if n not in known]
            if missing:
                raise TypeError(f"{cls.__name__} has no field(s) {missing}")
            if self.struct is not None and tuple(known[:len(self.names)]) == self.names:
                self.fast = (cls, self.struct)

    # --- records (cls given)

    def parse(self, r: Reader) -> Any:
        """Read one record (the dataclass)."""
        values: dict = {}
        for read in self._readers:
            read(r, values)
        return self.cls(**values)

    def build(self, obj: Any, out: list) -> list:
        """Append the bytes of `obj` (a `cls` instance) to `out`; return `out`."""
        if self.cls is not None and not isinstance(obj, self.cls):
            raise LocalProtocolError(f"expected {self.cls.__name__}, got {type(obj).__name__}")
        for write in self._writers:
            write(obj, out)
        return out

    # --- as a field inside another layout (an Array item or a named nested record)

    def read(self, r: Reader, label: str) -> Any:
        return self.parse(r)

    def write(self, value: Any, out: list, label: str) -> None:
        self.build(value, out)

    # --- plain values (no cls)

    def values(self, r: Reader) -> tuple:
        """Read the fields as a tuple, in declaration order (None for absent conditional ones)."""
        if self.struct is not None:
            return self._ops[0].unpack(r)
        if self._plain:
            out: list = []
            for op in self._ops:
                if type(op) is _Run:
                    out.extend(op.unpack(r))
                else:
                    out.append(op.field.read(r, op.label))
            return tuple(out)
        values: dict = {}
        self.read_into(r, values)
        return tuple(values.get(n) for n in self.names)

    def pack(self, *values: Any) -> bytes:
        """The bytes of the fields given as values, in declaration order."""
        if self.struct is not None:
            return self.struct.pack(*values)
        return b"".join(self.build_values(values, []))

    def build_values(self, values: Any, out: list) -> list:
        """Append the bytes of the fields given as a sequence of values (declaration order) to `out`."""
        if self._plain:
            i = 0
            for op in self._ops:
                if type(op) is _Run:
                    n = len(op.names)
                    out.append(op.struct.pack(*values[i:i + n]))
                    i += n
                else:
                    op.field.write(values[i], out, op.label)
                    i += 1
            return out
        obj = _Values(self.names, values)
        for op in self._ops:
            op.write(obj, out)
        return out

    # --- splicing

    def read_into(self, r: Reader, values: dict) -> None:
        for op in self._ops:
            op.read(r, values)

    def write_from(self, obj: Any, out: list) -> None:
        for op in self._ops:
            op.write(obj, out)

    def __repr__(self) -> str:
        what = self.cls.__name__ if self.cls is not None else self.title or "fields"
        return f"<{what}: {self.grammar}>"


class _Values:
    """Plain values as attributes (None for the ones not given): lets `Layout.build_values` build from them."""

    def __init__(self, names: tuple[str, ...], values: Any) -> None:
        self.__dict__.update(dict.fromkeys(names))
        self.__dict__.update(zip(names, values))


def record(cls: type, *steps: Any, title: str | None = None, **named: Field) -> Layout:
    """Declare the layout of dataclass `cls`: `record(ReloadConfRequest, request_id=U32, topic=STR8, ...)`.

    Positional `steps` (`When`, `Optional`, `(name, field)` pairs) come first, then the keyword fields.
    """
    return Layout(steps + tuple(named.items()), cls=cls, title=title)


def fields(*steps: Any, title: str | None = None, **named: Field) -> Layout:
    """Declare a layout read as a tuple (`values`) and built from values (`pack`), e.g. a message's head."""
    return Layout(steps + tuple(named.items()), title=title)
