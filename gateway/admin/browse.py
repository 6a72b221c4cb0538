"""The console's message browser and search: `GET /api/topics/<t>/partitions/<p>/messages?…`.

| parameter | meaning |
|---|---|
| `limit` (`last`, its old name) | records shown, 1–500 (20 by default) |
| `offset=O` | from offset O on (otherwise: the newest records, the search going back from the end) |
| `before=O` | the newest records below offset O (the page before one shown) |
| `from_time=MS`, `to_time=MS` | records with a timestamp in [from, to]: the scan starts where a reader starting at
  `from_time` would (the time index) and stops where records later than `to_time` begin |
| `key=TEXT` | records whose key is exactly TEXT (UTF-8) |
| `contains=TEXT` | records whose value holds TEXT (its UTF-8 bytes) |

The answer: `{"topic", "partition", "format", "log_start_offset", "end_offset", "messages": [{"offset", "timestamp",
"key", "value", "headers": [{"key", "value"}]}], "scanned": {"from", "to", "bytes", "complete"}}` — a key or value
is `null` or `{"size", "text", "hex", "truncated"}` (the first `SHOWN_BYTES`; `text` null when not UTF-8).
`scanned` is the offset range looked at: a search stops after `SCAN_BYTES` of stored batches (`complete` false), and
the console asks again from where it stopped (`offset=to` going forward, `before=from` going back).

Records are read through `Steps.read(..., RECORDS)`, the path a native fetch takes (in decoded records rather than
native JSON): committed records only, up to the last stable offset, as any non-Kafka reader sees them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from logway.codecs.records import Record
from logway.storage import OffsetOutOfRange, StorageError, UnknownPartition, UnknownTopic

from ..formats import RECORDS
from .http import HttpAnswer
from .http import json_answer as _json

if TYPE_CHECKING:  # pragma: no cover
    from ..context import GatewayView

__all__ = ["MAX_LIMIT", "SCAN_BYTES", "SHOWN_BYTES", "messages"]

#: The most records the message browser shows at once.
MAX_LIMIT = 500
#: Bytes of a key, value or header value shown (as text and as hex); the size is always given.
SHOWN_BYTES = 2048
#: Stored bytes one browse or search request reads at most (whole batches, so it may go over by one batch): the
#: console's search costs the gateway this much per request, and goes on from where it stopped when asked.
SCAN_BYTES = 32 * 1024 * 1024
#: Bytes asked of one read (a worker thread reads what is not in the page cache).
READ_BYTES = 1024 * 1024
#: Offsets the first step back covers when the newest matching records are searched for (later steps grow).
BACK_STEP = 64


async def messages(gateway: GatewayView, topic: str, partition: str, query: dict[str, list[str]]) -> HttpAnswer:
    try:
        number = int(partition)
        ask = {name: int(query[name][-1]) for name in ("limit", "last", "offset", "before", "from_time", "to_time")
               if name in query}
    except ValueError:
        return _json(400, {"error": "partition, limit, offset, before, from_time and to_time must be integers"})
    limit = ask.get("limit", ask.get("last", 20))
    if not 1 <= limit <= MAX_LIMIT:
        return _json(400, {"error": f"limit must be between 1 and {MAX_LIMIT}"})
    key = query["key"][-1].encode() if query.get("key", [""])[-1] else None
    contains = query["contains"][-1].encode() if query.get("contains", [""])[-1] else None
    try:
        plog = gateway.engine.partition(topic, number)
    except (UnknownTopic, UnknownPartition) as exc:
        return _json(404, {"error": str(exc)})
    low, high = ask.get("from_time"), ask.get("to_time")

    def wanted(r: Record) -> bool:
        return ((key is None or r.key == key) and (contains is None or (r.value is not None and contains in r.value))
                and (low is None or (r.timestamp is not None and r.timestamp >= low))
                and (high is None or (r.timestamp is not None and r.timestamp <= high)))

    everything = key is None and contains is None and low is None and high is None
    scan = _Scan(gateway, plog, None if everything else wanted)
    try:
        for _ in range(3):  # retention may move the log start between our look and the read
            try:
                found = await _search(gateway, plog, scan, ask, limit)
                break
            except OffsetOutOfRange:
                scan = _Scan(gateway, plog, scan.wanted)
        else:
            found = []
    except StorageError as exc:
        return _json(503, {"error": f"storage error: {exc}"})
    except ValueError as exc:  # records this format cannot show (RecordFormatError)
        return _json(500, {"error": f"cannot decode the records: {exc}"})
    return _json(200, {"topic": topic, "partition": number, "format": plog.fmt.name,
                       "log_start_offset": plog.log_start_offset, "end_offset": plog.last_stable_offset,
                       "messages": [_record(r) for r in found],
                       "scanned": {"from": scan.low, "to": scan.high, "bytes": scan.bytes, "complete": scan.complete}})


async def _search(gateway: GatewayView, plog, scan: "_Scan", ask: dict[str, int], limit: int) -> list[Record]:
    start, end = plog.log_start_offset, plog.last_stable_offset
    if "to_time" in ask:  # nothing at or after the time past it: where records that late begin (the time index)
        after = await gateway.steps.in_thread(plog.offset_for_timestamp, ask["to_time"] + 1)
        end = end if after is None else min(end, max(after, start))
    if "offset" in ask or "from_time" in ask:  # forward, from an offset or a time
        first = max(ask.get("offset", start), start)
        if "from_time" in ask:
            at = await gateway.steps.in_thread(plog.offset_for_timestamp, ask["from_time"])
            first = max(first, end if at is None else at)
        return await scan.forward(first, end, limit)
    return await scan.back(start, min(ask.get("before", end), end), limit)


class _Scan:
    """Reads a partition's committed records in a range, keeping those `wanted` approves (all when None), within
    `SCAN_BYTES`; `low`/`high` are the offsets it covered, `complete` whether it looked at all it was asked to."""

    def __init__(self, gateway: GatewayView, plog, wanted: Callable[[Record], bool] | None) -> None:
        self.steps = gateway.steps
        self.plog = plog
        self.wanted = wanted
        self.bytes = 0
        self.low = self.high = 0
        self.complete = True

    async def forward(self, offset: int, end: int, limit: int) -> list[Record]:
        """The first `limit` wanted records from `offset` on, below `end`."""
        self.low = offset = min(offset, end)
        found: list[Record] = []
        while offset < end and len(found) < limit and self.bytes < SCAN_BYTES:
            records, after = await self._read(offset, end)
            room = limit - len(found)
            found += records[:room]
            offset = records[room].offset if len(records) > room else after  # (the next request starts there)
        self.high = offset
        self.complete = offset >= end
        return found

    async def back(self, start: int, end: int, limit: int) -> list[Record]:
        """The last `limit` wanted records below `end`, looking back towards `start` a step at a time: a step is
        the newest `limit` offsets when every record is wanted, else it starts small and grows as long as what it
        costs (bytes per offset, measured) fits what is left of the budget."""
        self.low = self.high = end
        found: list[Record] = []
        step = limit if self.wanted is None else BACK_STEP
        while self.low > start and len(found) < limit and self.bytes < SCAN_BYTES:
            low = max(start, self.low - step)
            spent = self.bytes
            window, offset = [], low
            while offset < self.low:
                records, offset = await self._read(offset, self.low)
                window += records
            found = window + found
            per_offset = max((self.bytes - spent) / (self.low - low), 1.0)
            self.low = low
            step = max(1, min(step * 4, int((SCAN_BYTES - self.bytes) / per_offset)))
        if len(found) > limit:
            found = found[-limit:]
            self.low = found[0].offset  # (an older search continues below the first record shown)
        self.complete = self.low <= start
        return found

    async def _read(self, offset: int, end: int) -> tuple[list[Record], int]:
        """The wanted records of one read from `offset` below `end`, and the offset after what was read."""
        budget = min(READ_BYTES, max(SCAN_BYTES - self.bytes, 1))  # (at least one batch is read: it may go over)
        read = await self.steps.read(self.plog, offset, budget, RECORDS)
        if read is None:
            return [], end
        self.bytes += read.slice.length
        records = [r for r in read.data if offset <= r.offset < end]
        if self.wanted is not None:
            records = [r for r in records if self.wanted(r)]
        return records, min(max(read.slice.end_offset, offset + 1), end)


def _bytes(data: bytes | None) -> dict[str, Any] | None:
    """A key, value or header value for the console: its size, the first SHOWN_BYTES as hex, and as text when
    they are UTF-8 (the console picks; it renders them as text nodes, never as markup)."""
    if data is None:
        return None
    shown = bytes(data[:SHOWN_BYTES])
    text = None
    cuts = range(4) if len(data) > SHOWN_BYTES else range(1)  # a multi-byte character may be cut at the end
    for cut in cuts:
        try:
            text = shown[:len(shown) - cut].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    return {"size": len(data), "hex": shown.hex(), "text": text, "truncated": len(data) > SHOWN_BYTES}


def _record(r: Record) -> dict[str, Any]:
    return {"offset": r.offset, "timestamp": r.timestamp, "key": _bytes(r.key), "value": _bytes(r.value),
            "headers": [{"key": k, "value": _bytes(v)} for k, v in r.headers]}
