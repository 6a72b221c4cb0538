"""What the admin listener answers: `AdminApi.handle(method, target)` -> (status, headers, body).

| path | answer |
|---|---|
| `/` (and `/console.js`, `/console.css`) | the console: static HTML, CSS and vanilla JS, packaged with the gateway |
| `/metrics` | Prometheus text format (`metrics.GatewayMetrics`) |
| `/health` | 200 while the process runs |
| `/ready` | 200 once storage is open and every enabled listener is bound; 503 before, and from shutdown on |
| `/api/topics` | topics, their format and partitions: offsets, size, segments, records appended |
| `/api/groups` | consumer groups: committed offsets and lag per partition, type and members of live Kafka groups |
| `/api/rates` | per protocol, records and bytes per second in and out, sampled each second (the last minutes) |
| `/api/topics/<t>/partitions/<p>/messages?last=N` | the last N (1–500, 20 by default) records of a partition |

Every answer is GET/HEAD only (405 otherwise); JSON answers are `application/json` and never cached. The message
browser reads through `Steps.read(..., RECORDS)` — the path a native fetch takes, in decoded records rather than
native JSON — so it sees committed records only, as any non-Kafka reader does.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from importlib import resources
from itertools import pairwise
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import trio

from logway.storage import OffsetOutOfRange, StorageError, UnknownPartition, UnknownTopic

from ..formats import RECORDS
from .http import NO_STORE as _NO_STORE
from .http import HttpAnswer
from .http import json_answer as _json
from .http import text_answer as _text
from .metrics import CONTENT_TYPE, group_offsets, kafka_groups

if TYPE_CHECKING:  # pragma: no cover
    from ..server import Gateway

log = logging.getLogger("logway.gateway.admin")

__all__ = ["MAX_LAST", "SHOWN_BYTES", "AdminApi", "RateSampler", "console_file"]

#: The most records the message browser shows at once.
MAX_LAST = 500
#: Bytes of a key, value or header value shown (as text and as hex); the size is always given.
SHOWN_BYTES = 2048
#: Bytes the message browser reads at most per request (whole batches, so it may go over by one batch).
READ_BUDGET = 8 * 1024 * 1024

_STATIC_READ: dict[str, tuple[bytes, str]] = {}  # path -> (body, content type), read on first use
_STATIC = {"/": ("console.html", "text/html; charset=utf-8"),
           "/console.js": ("console.js", "text/javascript; charset=utf-8"),
           "/console.css": ("console.css", "text/css; charset=utf-8")}
#: The console loads nothing but itself: no inline script, no other origin.
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class RateSampler:
    """Samples every protocol's record and byte counters each `interval` seconds and keeps the last `keep`
    samples, so `/api/rates` has history as soon as the console opens."""

    FIELDS = ("records_in", "records_out", "bytes_in", "bytes_out")

    def __init__(self, metrics, interval: float = 1.0, keep: int = 181) -> None:
        self.metrics = metrics
        self.interval = interval
        self.samples: deque[tuple[float, dict[str, tuple[int, ...]]]] = deque(maxlen=keep)

    def sample(self) -> None:
        now = time.time()
        self.samples.append((now, {name: tuple(getattr(stats, f) for f in self.FIELDS)
                                   for name, stats in self.metrics.protocols.items()}))

    async def run(self) -> None:
        while True:
            self.sample()
            await trio.sleep(self.interval)

    def rates(self) -> dict[str, Any]:
        """{"interval_s", "t": [sample times], "protocols": {name: {field: [per-second rates]}}, "totals"}."""
        samples = list(self.samples)
        out: dict[str, Any] = {"interval_s": self.interval, "t": [round(t, 3) for t, _ in samples[1:]],
                               "protocols": {}, "totals": {}}
        names = sorted({name for _, counts in samples for name in counts} | set(self.metrics.protocols))
        for name in names:
            series: dict[str, list[float]] = {f: [] for f in self.FIELDS}
            for (t0, before), (t1, after) in pairwise(samples):
                span = max(t1 - t0, 1e-6)
                a, b = before.get(name, (0,) * 4), after.get(name, (0,) * 4)
                for i, f in enumerate(self.FIELDS):
                    series[f].append(round(max(b[i] - a[i], 0) / span, 3))
            out["protocols"][name] = series
            stats = self.metrics.protocols.get(name)
            out["totals"][name] = {f: getattr(stats, f) if stats is not None else 0 for f in self.FIELDS}
        return out


class AdminApi:
    def __init__(self, gateway: Gateway, sampler: RateSampler) -> None:
        self.gateway = gateway
        self.sampler = sampler

    async def handle(self, method: str, target: str) -> HttpAnswer:
        try:
            parts = urlsplit(target)
            path = parts.path or "/"
            if method not in ("GET", "HEAD"):
                return _text(405, f"method {method} not allowed: the admin endpoints are GET only",
                             [("Allow", "GET, HEAD")])
            if path in _STATIC:
                return console_file(path)
            if path == "/metrics":
                return 200, [("Content-Type", CONTENT_TYPE), _NO_STORE], self.gateway.metrics.exposition()
            if path == "/health":
                return _json(200, {"status": "live"})
            if path == "/ready":
                return self._ready()
            if path.startswith("/api/"):
                return await self._api(path, parse_qs(parts.query))
            return _json(404, {"error": f"not found: {path}"})
        except Exception as exc:  # a bug must not cost the connection more than this answer
            log.exception("admin: %s %s failed", method, target[:200])
            return _json(500, {"error": f"internal error: {type(exc).__name__}"})

    # -- probes ----------------------------------------------------------------------------------------------
    def _ready(self) -> HttpAnswer:
        gw = self.gateway
        listeners = {name: f"{host}:{port}" for name, (host, port) in sorted(gw.addresses.items())}
        body = {"ready": gw.ready, "state": gw.state, "storage_open": gw.storage_open, "listeners": listeners}
        return _json(200 if gw.ready else 503, body)

    # -- JSON ------------------------------------------------------------------------------------------------
    async def _api(self, path: str, query: dict[str, list[str]]) -> HttpAnswer:
        segments = [unquote(s) for s in path.split("/")[2:]]
        if segments == ["rates"]:
            return _json(200, self.sampler.rates())
        if not self.gateway.storage_open:
            return _json(503, {"error": "storage is not open (the gateway is starting or stopping)"})
        if segments == ["topics"]:
            return _json(200, {"topics": self.topics()})
        if segments == ["groups"]:
            return _json(200, {"groups": self.groups()})
        if len(segments) == 5 and segments[0] == "topics" and segments[2] == "partitions" \
                and segments[4] == "messages":
            return await self._messages(segments[1], segments[3], query)
        return _json(404, {"error": f"not found: {path}"})

    def topics(self) -> list[dict[str, Any]]:
        metrics = self.gateway.metrics
        out = []
        for topic in self.gateway.engine.topics():
            partitions = []
            for plog in topic.partitions:
                records, size = metrics.appends.get(plog, (0, 0))
                partitions.append({
                    "partition": plog.partition, "log_start_offset": plog.log_start_offset,
                    "log_end_offset": plog.log_end_offset, "high_watermark": plog.high_watermark,
                    "last_stable_offset": plog.last_stable_offset, "size_bytes": plog.size_bytes,
                    "segments": len(plog.segments), "records_appended": records, "bytes_appended": size})
            out.append({"name": topic.name, "format": topic.format, "partitions": partitions,
                        "size_bytes": sum(p["size_bytes"] for p in partitions),
                        "records": sum(p["log_end_offset"] - p["log_start_offset"] for p in partitions)})
        return out

    def groups(self) -> list[dict[str, Any]]:
        gw = self.gateway
        engine = gw.engine
        partitions = {(t.name, p.partition): p for t in engine.topics() for p in t.partitions}
        groups: dict[str, dict[str, Any]] = {}

        def group(group_id: str) -> dict[str, Any]:
            if group_id not in groups:
                groups[group_id] = {"group": group_id, "state": "Empty", "type": "", "protocol_type": "",
                                    "members": [], "partitions": [], "lag": 0}
            return groups[group_id]

        for row in group_offsets(engine, partitions):
            g = group(row["group"])
            g["partitions"].append({k: row[k] for k in ("topic", "partition", "committed", "end", "lag",
                                                         "metadata", "commit_time_ms")})
            g["lag"] += row["lag"] or 0
        for v in kafka_groups(gw):
            g = group(v.group_id)
            g["state"], g["type"], g["protocol_type"] = v.state, v.type, v.protocol_type
            g["members"] = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                             "group_instance_id": m.instance_id, "assignment": [[t, p] for t, p in m.partitions]}
                            for m in v.members]
        return [groups[name] for name in sorted(groups)]

    async def _messages(self, topic: str, partition: str, query: dict[str, list[str]]) -> HttpAnswer:
        try:
            last = int(query.get("last", ["20"])[-1])
            number = int(partition)
        except ValueError:
            return _json(400, {"error": "partition and last must be integers"})
        if not 1 <= last <= MAX_LAST:
            return _json(400, {"error": f"last must be between 1 and {MAX_LAST}"})
        try:
            plog = self.gateway.engine.partition(topic, number)
        except (UnknownTopic, UnknownPartition) as exc:
            return _json(404, {"error": str(exc)})
        try:
            records = await self._last_records(plog, last)
        except StorageError as exc:
            return _json(503, {"error": f"storage error: {exc}"})
        except ValueError as exc:  # records this format cannot show (RecordFormatError)
            return _json(500, {"error": f"cannot decode the records: {exc}"})
        return _json(200, {"topic": topic, "partition": number, "format": plog.fmt.name,
                           "log_start_offset": plog.log_start_offset, "end_offset": plog.last_stable_offset,
                           "messages": [_record(r) for r in records]})

    async def _last_records(self, plog, last: int) -> list:
        """The last `last` committed records of `plog`, read as a native fetch reads them."""
        steps = self.gateway.steps
        for _ in range(3):  # retention may move the log start between our look and the read
            end = plog.last_stable_offset
            offset = max(plog.log_start_offset, end - last)
            records: list = []
            budget = READ_BUDGET
            try:
                while offset < end and budget > 0:
                    read = await steps.read(plog, offset, min(budget, 1024 * 1024), RECORDS)
                    if read is None:
                        break
                    records.extend(read.data)
                    offset = max(read.slice.end_offset, offset + 1)
                    budget -= read.slice.length
            except OffsetOutOfRange:
                continue
            return records[-last:]
        return []


def console_file(path: str) -> HttpAnswer | None:
    """The console's file at `path` (`/`, `/console.js`, `/console.css`: packaged with the gateway, read once), or
    None for any other path."""
    if path not in _STATIC:
        return None
    cached = _STATIC_READ.get(path)
    if cached is None:
        name, content_type = _STATIC[path]
        cached = _STATIC_READ[path] = (resources.files(__package__).joinpath(name).read_bytes(), content_type)
    body, content_type = cached
    return 200, [("Content-Type", content_type), ("Content-Security-Policy", _CSP), _NO_STORE], body


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


def _record(r) -> dict[str, Any]:
    return {"offset": r.offset, "timestamp": r.timestamp, "key": _bytes(r.key), "value": _bytes(r.value),
            "headers": [{"key": k, "value": _bytes(v)} for k, v in r.headers]}


