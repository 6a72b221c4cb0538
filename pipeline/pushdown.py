"""Filter push-down: Spark predicates on topic, partition, offset and timestamp -> smaller fetch ranges.

`Pushdown.absorb(filter)` records what a filter (from `pyspark.sql.datasource`) says and returns True when the
reader applies it *exactly* (Spark then drops it), False when Spark must still evaluate it:

- `topic` = / IN / <=> and `partition` = / IN / <=> / < / <= / > / >=: exact (whole partitions are skipped);
- `offset` = / < / <= / > / >= / <=>: exact (the fetch range is cut); `offset` IN: the range is cut to the
  list's [min, max] and Spark drops the offsets in between;
- `timestamp` > / >=: narrows the start of every partition to the first offset whose timestamp is >= the bound
  (a ListOffsets by timestamp, as a consumer seeking by time would do) but is handed back to Spark, because
  record timestamps are not ordered within a partition (producers set them) and rows after that offset may
  still be older.

Anything else (NOT, OR, other columns, string predicates) is handed back to Spark untouched.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

__all__ = ["Pushdown"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _micros(value) -> int | None:
    """A filter's timestamp literal as µs since the epoch (naive datetimes are in the local time zone, as
    Python's `datetime.timestamp()` assumes), or None when it is no timestamp."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()  # local time, like Spark's own conversion of naive datetimes
        return (value - _EPOCH) // dt.timedelta(microseconds=1)
    return None


@dataclass
class Pushdown:
    """The conjunction of the predicates absorbed so far (every field narrows; none widens)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_min: int = 0  # inclusive
    partition_max: int | None = None  # inclusive
    offset_min: int = 0  # inclusive
    offset_max: int | None = None  # inclusive
    offsets_in: frozenset[int] | None = None
    timestamp_min_ms: int | None = None  # inclusive lower bound, used to seek only
    absorbed: list[str] = field(default_factory=list)  # descriptions, for explain-like logging and tests

    # -- queries ---------------------------------------------------------------------------------------
    def keeps_partition(self, topic: str, partition: int) -> bool:
        if self.topics is not None and topic not in self.topics:
            return False
        if self.partitions is not None and partition not in self.partitions:
            return False
        return partition >= self.partition_min and (self.partition_max is None or partition <= self.partition_max)

    def offset_range(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) narrowed by the offset predicates (may become empty)."""
        start = max(start, self.offset_min)
        if self.offset_max is not None:
            end = min(end, self.offset_max + 1)
        if self.offsets_in is not None:
            inside = [o for o in self.offsets_in if start <= o < end]
            if not inside:
                return start, start
            start, end = min(inside), max(inside) + 1
        return start, max(start, end)

    # -- absorbing filters -----------------------------------------------------------------------------
    def absorb(self, flt) -> bool:
        """Record `flt`; True when it is applied exactly here (see the module docstring)."""
        name = type(flt).__name__
        attribute = getattr(flt, "attribute", None)
        if not attribute or len(attribute) != 1:
            return False
        column = attribute[0]
        value = getattr(flt, "value", None)
        if column == "topic":
            exact = self._topic(name, value)
        elif column == "partition":
            exact = self._integer(name, value, "partition")
        elif column == "offset":
            exact = self._integer(name, value, "offset")
        elif column == "timestamp":
            self._timestamp(name, value)
            exact = False
        else:
            exact = False
        if exact:
            self.absorbed.append(f"{column} {name} {value!r}")
        return exact

    def _topic(self, name: str, value) -> bool:
        if name in ("EqualTo", "EqualNullSafe") and isinstance(value, str):
            wanted = {value}
        elif name == "In" and all(isinstance(v, str) for v in value):
            wanted = set(value)
        else:
            return False
        self.topics = frozenset(wanted if self.topics is None else self.topics & wanted)
        return True

    def _integer(self, name: str, value, column: str) -> bool:
        if name == "In":
            if not all(type(v) is int for v in value):
                return False
            values = frozenset(value)
            if column == "partition":
                self.partitions = values if self.partitions is None else self.partitions & values
                return True
            # offset IN (...): the range is cut to [min, max]; Spark drops the offsets in between
            self.offsets_in = values if self.offsets_in is None else self.offsets_in & values
            return False
        if type(value) is not int:
            return False
        lo_attr, hi_attr = ("partition_min", "partition_max") if column == "partition" else ("offset_min", "offset_max")
        lo, hi = getattr(self, lo_attr), getattr(self, hi_attr)
        if name in ("EqualTo", "EqualNullSafe"):
            lo, hi = max(lo, value), value if hi is None else min(hi, value)
        elif name == "GreaterThan":
            lo = max(lo, value + 1)
        elif name == "GreaterThanOrEqual":
            lo = max(lo, value)
        elif name == "LessThan":
            hi = value - 1 if hi is None else min(hi, value - 1)
        elif name == "LessThanOrEqual":
            hi = value if hi is None else min(hi, value)
        else:
            return False
        setattr(self, lo_attr, lo)
        setattr(self, hi_attr, hi)
        return True

    def _timestamp(self, name: str, value) -> None:
        us = _micros(value)
        if us is None:
            return
        # Record timestamps are whole ms: R ms satisfies "> us" iff R >= us // 1000 + 1, ">= us" iff
        # R >= ceil(us / 1000).
        if name == "GreaterThan":
            ms = us // 1000 + 1
        elif name in ("GreaterThanOrEqual", "EqualTo", "EqualNullSafe"):
            ms = -(-us // 1000)
        else:
            return
        self.timestamp_min_ms = ms if self.timestamp_min_ms is None else max(self.timestamp_min_ms, ms)
