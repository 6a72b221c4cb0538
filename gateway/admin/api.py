"""What the admin listener answers: `AdminApi.handle(request)` -> (status, headers, body).

| path | answer |
|---|---|
| `/` (and `/console.js`, `/console.css`) | the console: static HTML, CSS and vanilla JS, packaged with the gateway |
| `/metrics` | Prometheus text format (`metrics.GatewayMetrics`) |
| `/health` | 200 while the process runs |
| `/ready` | 200 once storage is open and every enabled listener is bound; 503 before, and from shutdown on (its
  listeners and memory figures to whom may Describe the cluster, where logins are required) |
| `/api/topics` | topics, their format and partitions: offsets, size, segments, records appended |
| `/api/groups` | consumer groups: committed offsets and lag per partition, type and members of live Kafka groups |
| `/api/rates` | per protocol, records and bytes per second in and out, sampled each second (the last minutes) |
| `/api/topics/<t>/partitions/<p>/messages?…` | the message browser and search (`browse.py`) |
| `/api/console` | what the console may do: its actions, the login they need, and who it is (`actions.py`; answered
  without a login) |
| `POST /api/request` | the console's actions: one native request, answered by the native handler (`actions.py`) |

Everything but `POST /api/request` is GET/HEAD only (405 otherwise); JSON answers are `application/json` and never
cached. Who may ask what (the Host check, the login, the ACLs of each endpoint): `access.py`.
"""

from __future__ import annotations

import logging
import resource
import time
from collections import deque
from importlib import resources
from itertools import pairwise
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import trio

from ..security import CLUSTER, Operation, ResourceType
from .access import AdminAccess
from .actions import ConsoleActions
from .browse import messages
from .http import NO_STORE as _NO_STORE
from .http import HttpAnswer, HttpRequest
from .http import json_answer as _json
from .http import text_answer as _text
from .metrics import CONTENT_TYPE, group_offsets, kafka_groups

if TYPE_CHECKING:  # pragma: no cover
    from ..context import GatewayView

log = logging.getLogger("logway.gateway.admin")

__all__ = ["AdminApi", "RateSampler", "console_file"]

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
    def __init__(self, gateway: GatewayView, sampler: RateSampler) -> None:
        self.gateway = gateway
        self.sampler = sampler
        self.access = AdminAccess(gateway)
        self.actions = ConsoleActions(gateway, self.access)

    async def handle(self, request: HttpRequest) -> HttpAnswer:
        method, target = request.method, request.target
        try:
            parts = urlsplit(target)
            path = parts.path or "/"
            access = self.access
            misdirected = access.misdirected(request, path)
            if misdirected is not None:
                return misdirected
            if path == "/api/request":
                if method != "POST":
                    return _text(405, "the console's actions are POSTed", [("Allow", "POST")])
                if not self.gateway.storage_open:
                    return _json(503, {"Error": {"message": "the gateway is starting or stopping"}})
                caller = await access.caller(request)
                if caller is None:
                    return access.unauthorized(request)
                return await self.actions.request(request, caller)
            if method not in ("GET", "HEAD"):
                return _text(405, f"method {method} not allowed: the admin endpoints are GET only",
                             [("Allow", "GET, HEAD")])
            if path in _STATIC:
                return console_file(path)
            if path == "/health":
                return _json(200, {"status": "live"})
            if path == "/ready":
                caller = await access.caller(request) if request.headers.get("authorization") or \
                    request.peer_cert else None
                return self._ready(caller is not None and self._may_describe_cluster(caller, quiet=True))
            caller = await access.caller(request)
            if path == "/api/console":  # what the console may do, and as whom (no one yet: it asks for a login)
                return _json(200, self.actions.session(caller))
            if caller is None:
                return access.unauthorized(request)
            if path == "/metrics":
                if not self._may_describe_cluster(caller):
                    return access.forbidden("the metrics need Describe on the cluster")
                exposition = await self.gateway.metrics.exposition_in_steps()
                return 200, [("Content-Type", CONTENT_TYPE), _NO_STORE], exposition
            if path.startswith("/api/"):
                return await self._api(path, parse_qs(parts.query), caller)
            return _json(404, {"error": f"not found: {path}"})
        except Exception as exc:  # a bug must not cost the connection more than this answer
            log.exception("admin: %s %s failed", method, target[:200])
            return _json(500, {"error": f"internal error: {type(exc).__name__}"})

    def _may_describe_cluster(self, caller, *, quiet: bool = False) -> bool:
        """Describe on the cluster (while storage opens, before any ACL is read: where no login is required)."""
        if self.gateway.security is None:
            return not self.access.required
        return self.access.may_describe_cluster(caller, quiet=quiet)

    # -- probes ----------------------------------------------------------------------------------------------
    def _ready(self, full: bool) -> HttpAnswer:
        """Ready or not, to anyone; the listeners and the memory figures to whom may Describe the cluster."""
        gw = self.gateway
        ready = gw.ready
        body: dict[str, Any] = {"ready": ready, "state": gw.state}
        if full or not self.access.required:
            files = gw.engine.files if gw.storage_open else None
            body["storage_open"] = gw.storage_open
            body["listeners"] = {name: f"{host}:{port}" for name, (host, port) in sorted(gw.addresses.items())}
            body["memory"] = {"limit_bytes": gw.memory.limit, "used_bytes": gw.memory.used,
                              "exhausted": gw.memory.exhausted}
            body["descriptors"] = {"open": gw.descriptors.open,
                                   "limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                                   "segment_files_open": len(files) if files is not None else 0,
                                   "segment_files_limit": files.limit if files is not None else 0}
        return _json(200 if ready else 503, body)

    # -- JSON ------------------------------------------------------------------------------------------------
    async def _api(self, path: str, query: dict[str, list[str]], caller) -> HttpAnswer:
        segments = [unquote(s) for s in path.split("/")[2:]]
        if segments == ["rates"]:
            if not self._may_describe_cluster(caller):
                return self.access.forbidden("the rates need Describe on the cluster")
            return _json(200, self.sampler.rates())
        if not self.gateway.storage_open or self.gateway.security is None:
            return _json(503, {"error": "storage is not open (the gateway is starting or stopping)"})
        if segments == ["topics"]:
            return _json(200, {"topics": self.topics(caller)})
        if segments == ["groups"]:
            return _json(200, {"groups": self.groups(caller)})
        if len(segments) == 5 and segments[0] == "topics" and segments[2] == "partitions" \
                and segments[4] == "messages":
            if not self.access.may(caller, Operation.READ, ResourceType.TOPIC, segments[1]):
                return self.access.forbidden(f"{caller.principal} may not READ TOPIC {segments[1]!r}")
            return await messages(self.gateway, segments[1], segments[3], query)
        return _json(404, {"error": f"not found: {path}"})

    def topics(self, caller) -> list[dict[str, Any]]:
        """The topics `caller` may Describe."""
        metrics = self.gateway.metrics
        sees = self.access.sees
        out = []
        for topic in self.gateway.engine.topics():
            if not sees(caller, Operation.DESCRIBE, ResourceType.TOPIC, topic.name):
                continue
            partitions = []
            for plog in topic.partitions:
                records, size = metrics.appends.get(plog, (0, 0))
                partitions.append({
                    "partition": plog.partition, "log_start_offset": plog.log_start_offset,
                    "log_end_offset": plog.log_end_offset, "high_watermark": plog.high_watermark,
                    "last_stable_offset": plog.last_stable_offset, "size_bytes": plog.size_bytes,
                    "segments": plog.segment_count, "records_appended": records, "bytes_appended": size})
            out.append({"name": topic.name, "format": topic.format, "partitions": partitions,
                        "size_bytes": sum(p["size_bytes"] for p in partitions),
                        "records": sum(p["log_end_offset"] - p["log_start_offset"] for p in partitions)})
        return out

    def groups(self, caller) -> list[dict[str, Any]]:
        """The groups `caller` may Describe, with the partitions of the topics it may Describe."""
        gw = self.gateway
        sees = self.access.sees
        everyone = sees(caller, Operation.DESCRIBE, *CLUSTER)
        engine = gw.engine
        partitions = {(t.name, p.partition): p for t in engine.topics() for p in t.partitions}
        groups: dict[str, dict[str, Any]] = {}

        def group(group_id: str) -> dict[str, Any]:
            if group_id not in groups:
                groups[group_id] = {"group": group_id, "state": "Empty", "type": "", "protocol_type": "",
                                    "members": [], "partitions": [], "lag": 0}
            return groups[group_id]

        for row in group_offsets(engine, partitions):
            if not sees(caller, Operation.DESCRIBE, ResourceType.TOPIC, row["topic"]):
                continue
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
        return [groups[name] for name in sorted(groups)
                if everyone or sees(caller, Operation.DESCRIBE, ResourceType.GROUP, name)]


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


