"""Declaring a Kafka message once for all its versions, as Kafka's message JSON does, and expanding the declaration
into one `Schema` per version.

    REQUEST_SCHEMAS = message(ProduceRequest, 13, flexible_since=9,
        transactional_id=since(3, NullableString),
        acks=Int16,
        timeout_ms=Int32,
        topic_data=Array(struct(TopicProduceData,
            name=until(12, String),
            topic_id=since(13, Uuid),
            partition_data=Array(struct(PartitionProduceData, index=Int32, records=Records)))))

A field is any construct of `primitives` (present in every version) or one of:

- `since(v, con)`, `until(v, con)`, `only(lo, hi, con)`: present in versions v+, 0..v, lo..hi;
- `switch({0: String, 12: NullableString})`: the type from the highest listed version <= the version (e.g. a
  string that becomes nullable);
- `struct(Cls, **fields)`: a nested struct, itself declared this way (inside `Array`, `NullableArray`,
  `NullableStruct` or directly).

`message(Cls, max_version, flexible_since=..., min_version=0, **fields)` returns {version: Schema} for
min_version..max_version: the fields each version has, in declaration order, and from `flexible_since` on their
flexible form (`primitives.flexible`: compact types and tagged-field sections). Versions whose layout is the same
reuse one `Schema` object (the kafka-python habit), so the registry, and callers comparing layouts, see at once
which versions changed nothing. The declarations are constructs so that `Array(struct(...))` can hold them, but
they cannot parse or build: only the schemas `message` returns do.
"""

from __future__ import annotations

from typing import Any

import construct as c

from .primitives import ArrayType, NullableStructType, Schema, flexible

__all__ = ["message", "struct", "since", "until", "only", "switch"]


class _Declaration(c.Construct):
    """A part of a declaration: resolved per version by `message`, never parsed or built itself."""

    min_size = 0

    def _parse(self, stream, context, path):
        raise c.ConstructError(f"{self!r} is a declaration: parse the schemas `message()` made of it", path=path)

    _build = _parse

    def _sizeof(self, context, path):
        raise c.SizeofError("a declaration has no size", path=path)

    def resolve(self, version: int) -> c.Construct | None:
        """The construct of this part in `version`, or None when the version lacks it."""
        raise NotImplementedError


class _Ranged(_Declaration):
    def __init__(self, lo: int, hi: int | None, con: c.Construct) -> None:
        super().__init__()
        if lo < 0 or (hi is not None and hi < lo):
            raise ValueError(f"bad version range {lo}..{hi}")
        self.lo, self.hi, self.con = lo, hi, con

    def resolve(self, version: int) -> c.Construct | None:
        if version < self.lo or (self.hi is not None and version > self.hi):
            return None
        return _resolve(self.con, version)

    def __repr__(self) -> str:
        return f"only({self.lo}, {self.hi}, {self.con!r})"


class _Switch(_Declaration):
    def __init__(self, changes: dict[int, c.Construct]) -> None:
        super().__init__()
        if 0 not in changes:
            raise ValueError("switch() needs the type of version 0")
        self.changes = sorted(changes.items())

    def resolve(self, version: int) -> c.Construct | None:
        chosen = None
        for first, con in self.changes:
            if first <= version:
                chosen = con
        return _resolve(chosen, version)

    def __repr__(self) -> str:
        return f"switch({dict(self.changes)!r})"


class _Struct(_Declaration):
    def __init__(self, cls: type, fields: dict[str, c.Construct]) -> None:
        super().__init__()
        for name, con in fields.items():
            if not isinstance(con, c.Construct):
                raise TypeError(f"{cls.__name__}.{name}: {con!r} is not a construct")
        self.cls, self.fields = cls, fields

    def resolve(self, version: int) -> Schema:
        fields = []
        for name, con in self.fields.items():
            resolved = _resolve(con, version)
            if resolved is not None:
                fields.append((name, resolved))
        return Schema(self.cls, fields)

    def __repr__(self) -> str:
        return f"struct({self.cls.__name__}, ...)"


def since(version: int, con: c.Construct) -> c.Construct:
    """A field present from `version` on."""
    return _Ranged(version, None, con)


def until(version: int, con: c.Construct) -> c.Construct:
    """A field present in versions 0..`version` (removed after)."""
    return _Ranged(0, version, con)


def only(lo: int, hi: int, con: c.Construct) -> c.Construct:
    """A field present in versions `lo`..`hi`."""
    return _Ranged(lo, hi, con)


def switch(changes: dict[int, c.Construct]) -> c.Construct:
    """A field whose type changes: {first version of a type: type}, version 0 included."""
    return _Switch(changes)


def struct(cls: type, **fields: c.Construct) -> c.Construct:
    """A nested struct (fields in wire order, declared as for `message`), parsed into / built from `cls`."""
    return _Struct(cls, fields)


def _resolve(con: c.Construct, version: int) -> c.Construct | None:
    """`con` as it is in `version` (None: absent); plain constructs without declarations inside come back as they
    are, so the primitives stay the shared singletons the schemas fuse and compare."""
    if isinstance(con, _Declaration):
        return con.resolve(version)
    if isinstance(con, ArrayType):
        item = _resolve(con.subcon, version)
        if item is con.subcon:
            return con
        return ArrayType(item, nullable=con.nullable, compact=con.compact)
    if isinstance(con, NullableStructType):
        item = _resolve(con.subcon, version)
        return con if item is con.subcon else NullableStructType(item)
    return con


def _signature(con: c.Construct) -> Any:
    """What makes two layouts the same: the same classes, field names and (shared) primitives, recursively."""
    if isinstance(con, Schema):
        return ("schema", con.cls, con.flexible, tuple((name, _signature(sub)) for name, sub in con.fields))
    if isinstance(con, ArrayType):
        return ("array", con.nullable, con.compact, _signature(con.subcon))
    if isinstance(con, NullableStructType):
        return ("nullable", _signature(con.subcon))
    return id(con)


def message(cls: type, max_version: int, *, flexible_since: int | None, min_version: int = 0,
            **fields: c.Construct) -> dict[int, Schema]:
    """{version: Schema} for versions min_version..max_version of the message `cls` declared by `fields` (see the
    module docstring); versions from `flexible_since` on (None: never) are flexible."""
    if not 0 <= min_version <= max_version:
        raise ValueError(f"bad version range {min_version}..{max_version}")
    declaration = _Struct(cls, fields)
    out: dict[int, Schema] = {}
    seen: dict[Any, Schema] = {}
    for version in range(min_version, max_version + 1):
        schema = declaration.resolve(version)
        if flexible_since is not None and version >= flexible_since:
            schema = flexible(schema)
        out[version] = seen.setdefault(_signature(schema), schema)
    return out
