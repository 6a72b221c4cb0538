"""The state of one share-partition (KIP-932): which records of a topic partition a share group has handed out,
to whom, how often, and which are done — plain data and rules, no clock of its own, no I/O (`share_coordinator`
drives it and persists its snapshots).

    start (SPSO) ─────────────── in flight ─────────────── end (SPEO) ──── never handed out yet ──▶ log end
      records before start are done: acknowledged, or archived

Every offset in [start, end) has a state:

- available: may be acquired (again); its delivery count says how often it was delivered before;
- acquired: handed to one member, locked until a deadline (`group.share.record.lock.duration.ms`); its delivery
  count grew by one when it was acquired;
- acknowledged (accepted by the member) or archived (rejected, a gap with no record, or delivered
  `group.share.delivery.count.limit` times): never delivered again.

A member acknowledges what it acquired — accept, release (available again, for anyone), reject, or gap (an offset
without a record: a control batch, a hole) — with one type for a whole range or one per offset; an offset it does
not hold makes the acknowledgement INVALID_RECORD_STATE (nothing of that batch is applied). A lock that expires, a
member that leaves or closes its session, release what it held. A record released or expired after its last
allowed delivery is archived instead. `start` moves past the done prefix.

`snapshot()` is the durable form (acquired records saved as available with their delivery count: after a
restart they are delivered again, their locks having died with the process); `restore()` the way back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from logway.codecs.kafka.api.share_groups import ACK_ACCEPT, ACK_GAP, ACK_REJECT, ACK_RELEASE
from logway.codecs.kafka.error_codes import ErrorCode as E

__all__ = ["SharePartition", "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED", "MAX_ACK_RANGE"]

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "available", "acquired", "acknowledged", "archived"
_DONE = (ACKNOWLEDGED, ARCHIVED)
#: The widest acknowledgement batch accepted: what one partition can have in flight (an absurd range from the wire
#: must not make us walk billions of offsets).
MAX_ACK_RANGE = 1 << 20


@dataclass(slots=True)
class _Record:
    state: str
    count: int = 0  # deliveries so far
    member: str | None = None  # the holder, while acquired
    deadline: float = 0.0  # the lock's end, while acquired


class SharePartition:
    """One (group, topic, partition)'s records in flight. `limit` is the delivery count limit."""

    def __init__(self, start: int, limit: int) -> None:
        self.start = self.end = start
        self.limit = limit
        self.records: dict[int, _Record] = {}

    # -- what it holds ---------------------------------------------------------------------------------------------
    @property
    def acquired(self) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED)

    def state_of(self, offset: int) -> tuple[str, int]:
        """(state, delivery count) of an offset (before `start`: done; from `end`: never delivered)."""
        if offset < self.start:
            return ACKNOWLEDGED, 0
        record = self.records.get(offset)
        return (record.state, record.count) if record is not None else (AVAILABLE, 0)

    # -- handing out ---------------------------------------------------------------------------------------------
    def move_start(self, log_start: int) -> None:
        """Records below the log's start are gone (retention, DeleteRecords): nothing to deliver there."""
        if log_start > self.start:
            for offset in range(self.start, min(log_start, self.end)):
                self.records.pop(offset, None)
            self.start = log_start
            self.end = max(self.end, log_start)

    def acquire_available(self, member: str, max_records: int, deadline: float) -> list[tuple[int, int, int]]:
        """Acquire released records (in offset order, up to `max_records`): [(first, last, delivery count)]."""
        ranges: list[tuple[int, int, int]] = []
        taken = 0
        for offset in sorted(o for o, r in self.records.items() if r.state == AVAILABLE):
            if taken >= max_records:
                break
            record = self.records[offset]
            record.state, record.member, record.deadline = ACQUIRED, member, deadline
            record.count += 1
            taken += 1
            if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == record.count:
                ranges[-1] = (ranges[-1][0], offset, record.count)
            else:
                ranges.append((offset, offset, record.count))
        return ranges

    def acquire_new(self, member: str, upto: int, deadline: float) -> tuple[int, int, int] | None:
        """Acquire the records from `end` up to `upto` (exclusive; the end of whole batches the caller read), each
        for its first delivery: (first, last, 1), or None."""
        if upto <= self.end:
            return None
        first = self.end
        for offset in range(first, upto):
            self.records[offset] = _Record(ACQUIRED, 1, member, deadline)
        self.end = upto
        return first, upto - 1, 1

    # -- giving back ---------------------------------------------------------------------------------------------
    def _release(self, record: _Record) -> None:
        record.state = ARCHIVED if record.count >= self.limit else AVAILABLE
        record.member = None

    def expire(self, now: float) -> int:
        """Release the records whose lock expired; how many."""
        expired = [r for r in self.records.values() if r.state == ACQUIRED and r.deadline <= now]
        for record in expired:
            self._release(record)
        self._advance()
        return len(expired)

    def release_member(self, member: str) -> int:
        """Release everything `member` holds (it left, or closed its share session); how many."""
        held = [r for r in self.records.values() if r.state == ACQUIRED and r.member == member]
        for record in held:
            self._release(record)
        self._advance()
        return len(held)

    def release_ranges(self, member: str, ranges: list[tuple[int, int, int]]) -> None:
        """Release what `member` holds of these ranges (records it was handed but could not be sent)."""
        for first, last, _ in ranges:
            for offset in range(first, last + 1):
                record = self.records.get(offset)
                if record is not None and record.state == ACQUIRED and record.member == member:
                    self._release(record)
        self._advance()

    def acknowledge(self, member: str, first: int, last: int, types: list[int]) -> int:
        """Apply one acknowledgement batch of `member`: E.NONE, or the error and nothing applied (INVALID_REQUEST for
        a malformed batch, INVALID_RECORD_STATE for an offset it does not hold)."""
        if last < first or last - first >= MAX_ACK_RANGE or len(types) not in (1, last - first + 1):
            return E.INVALID_REQUEST
        if any(t not in (ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT) for t in types):
            return E.INVALID_REQUEST
        for offset in range(first, last + 1):
            record = self.records.get(offset)
            if record is None or record.state != ACQUIRED or record.member != member:
                return E.INVALID_RECORD_STATE
        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            record = self.records[offset]
            if kind == ACK_ACCEPT:
                record.state, record.member = ACKNOWLEDGED, None
            elif kind == ACK_RELEASE:
                self._release(record)
            else:  # reject, or a gap: never again
                record.state, record.member = ARCHIVED, None
        self._advance()
        return E.NONE

    def reset(self, start: int) -> None:
        """Start over at `start` (AlterShareGroupOffsets): nothing in flight."""
        self.records.clear()
        self.start = self.end = start

    def _advance(self) -> None:
        while self.start < self.end:
            record = self.records.get(self.start)
            if record is None or record.state not in _DONE:
                return
            del self.records[self.start]
            self.start += 1

    # -- durable form --------------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """{"start", "end", "batches": [[first, last, state, delivery count], ...]} — runs of like records;
        acquired ones as available."""
        batches: list[list] = []
        for offset in sorted(self.records):
            record = self.records[offset]
            state = AVAILABLE if record.state == ACQUIRED else record.state
            last = batches[-1] if batches else None
            if last is not None and last[1] == offset - 1 and last[2] == state and last[3] == record.count:
                last[1] = offset
            else:
                batches.append([offset, offset, state, record.count])
        return {"start": self.start, "end": self.end, "batches": batches}

    @classmethod
    def restore(cls, data: dict[str, Any], limit: int) -> "SharePartition":
        part = cls(int(data["start"]), limit)
        part.end = max(int(data.get("end", part.start)), part.start)
        for first, last, state, count in data.get("batches", ()):
            if state not in (AVAILABLE, ACKNOWLEDGED, ARCHIVED):
                raise ValueError(f"unknown record state {state!r}")
            for offset in range(max(int(first), part.start), min(int(last) + 1, part.end)):
                part.records[offset] = _Record(state, int(count))
        for offset in range(part.start, part.end):  # (every offset in flight has a state)
            part.records.setdefault(offset, _Record(AVAILABLE))
        part._advance()
        return part
