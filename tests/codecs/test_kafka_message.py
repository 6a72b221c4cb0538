"""`message()`: one declaration per message for all its versions (fields present from/until a version, types that
change, nested structs), expanded into one schema per version, flexible from `flexible_since`; and the two wire
types it needed: `Uuid` (16 bytes, fused into fixed-size runs) and `NullableStruct` (an int8 marker)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import construct as c
import pytest

from logway.codecs.kafka import primitives as prim
from logway.codecs.kafka.message import message, only, since, struct as declare, switch, until


@dataclass(slots=True)
class Part:
    index: int = 0
    epoch: int = -1
    name: str | None = ""


@dataclass(slots=True)
class Msg:
    a: int = 0
    b: str | None = ""
    topic_id: bytes = prim.ZERO_UUID
    parts: list[Part] = field(default_factory=list)
    gone: int = 0
    inner: Part | None = None


SCHEMAS = message(
    Msg, 5, flexible_since=3,
    a=prim.Int32,
    b=switch({0: prim.String, 2: prim.NullableString}),
    topic_id=since(4, prim.Uuid),
    parts=prim.Array(declare(Part, index=prim.Int32, epoch=since(1, prim.Int32), name=until(2, prim.String))),
    gone=only(1, 2, prim.Int16),
    inner=since(5, prim.NullableStruct(declare(Part, index=prim.Int32))))


def names(schema):
    return [n for n, _ in schema.fields]


def test_fields_appear_and_go_by_version():
    assert set(SCHEMAS) == set(range(6))
    assert names(SCHEMAS[0]) == ["a", "b", "parts"]
    assert names(SCHEMAS[1]) == ["a", "b", "parts", "gone"]
    assert names(SCHEMAS[4]) == ["a", "b", "topic_id", "parts"]
    assert names(SCHEMAS[5]) == ["a", "b", "topic_id", "parts", "inner"]
    assert names(SCHEMAS[0].fields[2][1].subcon) == ["index", "name"]
    assert names(SCHEMAS[3].fields[2][1].subcon) == ["index", "epoch"]
    assert SCHEMAS[1].fields[1][1] is prim.String and SCHEMAS[2].fields[1][1] is prim.NullableString


def test_unchanged_versions_share_one_schema_and_flexible_ones_too():
    assert SCHEMAS[1] is not SCHEMAS[0]
    assert SCHEMAS[2] is not SCHEMAS[1]  # b becomes nullable, name still there
    flex = message(Msg, 8, flexible_since=3, a=prim.Int32, b=prim.String)
    assert flex[0] is flex[1] is flex[2] and flex[3] is flex[8] and flex[2] is not flex[3]
    assert [s.flexible for s in flex.values()] == [False] * 3 + [True] * 6


def test_flexible_versions_are_compact_with_tag_sections_byte_for_byte():
    body = Msg(a=7, b=None, topic_id=bytes(range(16)), parts=[Part(index=1, epoch=2)], inner=Part(index=9))
    wire = prim.build_bytes(SCHEMAS[5], body)
    expected = (struct.pack(">i", 7) + b"\x00" + bytes(range(16))  # a, null compact string, the uuid
                + b"\x02" + struct.pack(">ii", 1, 2) + b"\x00"  # one part (index, epoch) and its tags
                + b"\x01" + struct.pack(">i", 9) + b"\x00"  # inner: present marker, index, its tags
                + b"\x00")  # the message's tags
    assert wire == expected
    assert prim.parse_frame(SCHEMAS[5], wire) == (Msg(a=7, b=None, topic_id=bytes(range(16)),
                                                      parts=[Part(index=1, epoch=2, name="")],
                                                      inner=Part(index=9)), 0)
    classic = prim.build_bytes(SCHEMAS[1], Msg(a=1, b="x", parts=[Part(3, 4, "n")], gone=5))
    assert classic == (struct.pack(">ih", 1, 1) + b"x" + struct.pack(">iiih", 1, 3, 4, 1) + b"n"
                       + struct.pack(">h", 5))


def test_nullable_struct_null_and_negative_markers():
    schema = SCHEMAS[5]
    head = struct.pack(">i", 0) + b"\x01" + prim.ZERO_UUID + b"\x01"
    assert prim.parse_frame(schema, head + b"\xff\x00")[0].inner is None
    assert prim.parse_frame(schema, head + b"\x80\x00")[0].inner is None  # any negative marker is null, as Kafka
    assert prim.build_bytes(schema, Msg(inner=None)).endswith(b"\xff\x00")
    with pytest.raises(c.StreamError):
        prim.parse_frame(schema, head)  # the marker is missing


def test_uuid_fuses_into_fixed_runs_and_arrays_of_uuids_stay_16_bytes_each():
    assert SCHEMAS[4].min_size == 4 + 1 + 16 + 1 + 1
    ids = prim.CompactArray(prim.Uuid)
    value = [bytes([i]) * 16 for i in range(3)]
    wire = prim.build_bytes(ids, value)
    assert wire == b"\x04" + b"".join(value) and prim.parse_frame(ids, wire) == (value, 0)
    with pytest.raises(prim.BoundError):
        prim.parse_frame(ids, b"\x04" + b"\x00" * 47)  # 3 ids need 48 bytes


def test_declarations_refuse_to_parse_or_build_and_bad_ranges_are_refused():
    with pytest.raises(c.ConstructError):
        prim.parse_frame(declare(Part, index=prim.Int32), b"\x00\x00\x00\x01")
    with pytest.raises(ValueError):
        only(3, 2, prim.Int8)
    with pytest.raises(ValueError):
        switch({1: prim.Int8})
    with pytest.raises(TypeError):
        declare(Part, index=42)
    with pytest.raises(ValueError):
        message(Msg, 2, flexible_since=None, min_version=3, a=prim.Int32)
    share_only = message(Msg, 1, flexible_since=0, min_version=1, a=prim.Int32)
    assert set(share_only) == {1}
