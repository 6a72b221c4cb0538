"""The supervisor's admin listener with `workers: N` > 1: one address that answers for every worker.

`SupervisorAdmin` serves `listeners.admin` (its configured host and port, TLS when it asks for it) in a thread of
the supervisor — a trio loop of its own over the same HTTP server as a gateway's (`http.serve_http`: bounded
connections, heads, bodies and timeouts) — while the workers serve their own admin listeners on the following
ports (configured port + 1 + i; `admin.i` in the ready file):

- `/metrics`: every worker's metrics in one exposition, each sample labelled `worker="i"`; and the supervisor's
  own: `logway_worker_up{worker}` (1 when the worker answered this scrape), `logway_worker_restarts_total{worker}`;
- `/ready`: 200 when every worker has started and answers its own `/ready` with 200, else 503; JSON: each
  worker's state;
- `/health`: 200 while the supervisor runs;
- the console (`/`) and its endpoints over every worker: `/api/topics` (each worker's partitions, marked with
  their `worker`), `/api/groups` (worker 0's — it keeps the offsets and the Kafka groups — with the lag of the
  other workers' partitions filled in from their log ends), `/api/rates` (added up), the message browser's
  `/api/topics/<t>/partitions/<p>/messages` (asked of the partition's owner), and the console's actions
  (`POST /api/request`, `/api/console`: worker 0's, whose native handler relays to the owners).

Each worker is asked over its own admin address with the client's Host and Authorization headers, so each checks who
asks (`access.py`) and a refusal (401, 403, 421) is passed on as it is (`SCRAPE_TIMEOUT` seconds at most, the
workers at once); a worker
that does not answer — stopped, being started again — leaves its series out of that scrape and reads
`logway_worker_up 0`. With TLS the workers are asked over TLS and must present the configured certificate.
"""

from __future__ import annotations

import http.client
import logging
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Callable
from urllib.parse import unquote

import orjson
import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from ..cluster.ownership import partition_leader
from .api import console_file
from .http import NO_STORE, AdminConnections, HttpAnswer, HttpRequest, serve_http
from .http import json_answer as _json
from .http import text_answer as _text
from .metrics import CONTENT_TYPE

log = logging.getLogger("logway.gateway.admin")

__all__ = ["SCRAPE_TIMEOUT", "SupervisorAdmin", "WorkerView", "merge_expositions"]

#: Seconds a worker's admin listener has to answer one of the supervisor's requests.
SCRAPE_TIMEOUT = 5.0
#: The most of a worker's answer the supervisor reads (a worker's metrics are some hundreds of KiB at most).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: The headers passed on to the workers: the console's checks (`actions.refused_by_guards`), the Host and the login.
_FORWARDED = frozenset({"content-type", "origin", "host", "sec-fetch-site", "authorization", "x-logway-console"})
#: A worker's answers that refuse the client (a login, an ACL, a Host): the supervisor answers them as they are.
_REFUSALS = frozenset({401, 403, 421})


class WorkerView:
    """What the supervisor knows of its workers, read by the admin thread: `admin_addresses()` (index -> (host,
    port) of each worker's admin listener, None before it told), `started(i)`, `restarts(i)`."""

    def __init__(self, count: int, admin_addresses: Callable[[], list], started: Callable[[int], bool],
                 restarts: Callable[[int], int]) -> None:
        self.count = count
        self.admin_addresses = admin_addresses
        self.started = started
        self.restarts = restarts


def merge_expositions(texts: dict[int, str]) -> tuple[list[Metric], set[int]]:
    """The families of several workers' Prometheus expositions (index -> text) as one list, every sample labelled
    with its worker, and the workers whose exposition is in it; a family's help and type are the first worker's.
    An exposition that does not parse is left out whole (logged)."""
    merged: dict[str, Metric] = {}
    included = set()
    for index, text in sorted(texts.items()):
        try:
            families = list(text_string_to_metric_families(text))
        except ValueError as exc:  # a bug in a worker; the others' still count
            log.error("admin: worker %d's metrics did not parse: %s", index, exc)
            continue
        included.add(index)
        worker = str(index)
        for family in families:
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                into.add_sample(sample.name, {**sample.labels, "worker": worker}, sample.value, sample.timestamp)
    return list(merged.values()), included


class _Scrape(Collector):
    def __init__(self, families: list[Metric], up: set[int], view: WorkerView) -> None:
        self.families, self.up, self.view = families, up, view

    def collect(self):
        yield from self.families
        up = GaugeMetricFamily("logway_worker_up", "1 when the worker's admin listener answered this scrape",
                               labels=["worker"])
        restarts = CounterMetricFamily("logway_worker_restarts", "Times the supervisor started the worker again "
                                       "after it died (or its watchdog killed it)", labels=["worker"])
        for i in range(self.view.count):
            up.add_metric([str(i)], 1 if i in self.up else 0)
            restarts.add_metric([str(i)], self.view.restarts(i))
        yield up
        yield restarts


class SupervisorAdmin:
    """The aggregate admin listener (see the module docstring): `start()` binds it and returns its (host, port),
    also kept in `address` — OSError when it cannot —, `close()` stops it."""

    def __init__(self, host: str, port: int, view: WorkerView, request_timeout: float,
                 server_context: ssl.SSLContext | None = None, cert_file: str | None = None) -> None:
        self.host, self.port, self.view = host, port, view
        self.request_timeout = request_timeout
        self.server_context = server_context
        self.client_context = None
        if server_context is not None:  # the workers present the configured certificate: trust exactly it
            ctx = ssl.create_default_context(cafile=cert_file)
            ctx.check_hostname = False  # (asked by address; the certificate names the host clients use)
            ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # a certificate a CA issued is its own anchor too
            self.client_context = ctx
        self.connections = AdminConnections()
        self.address: tuple[str, int] | None = None
        self._pool = ThreadPoolExecutor(max_workers=min(view.count, 16), thread_name_prefix="admin-scrape")
        self._caller = threading.local()  # the client's headers (and a worker's refusal) while its request is asked
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None

    def start(self) -> tuple[str, int]:
        started: dict = {}
        ready = threading.Event()

        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    started["address"] = await nursery.start(
                        serve_http, self.host, self.port, self.handle, self.connections, self.request_timeout,
                        self.server_context)
                    ready.set()

        def run() -> None:
            try:
                trio.run(main)
            except BaseException as exc:  # a bind failure: start() raises it (out of the nursery's group)
                while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                    exc = exc.exceptions[0]
                started["error"] = exc
            finally:
                ready.set()

        self._thread = threading.Thread(target=run, name="supervisor-admin", daemon=True)
        self._thread.start()
        ready.wait()
        if "address" not in started:
            self._thread.join()
            raise started.get("error") or OSError("admin listener: stopped before it listened")
        self.address = started["address"]
        return self.address

    def close(self) -> None:
        if self._thread is None:
            return
        if self._thread.is_alive() and self._token is not None:
            try:
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(10)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._thread = None

    # -- answers ---------------------------------------------------------------------------------------------
    async def handle(self, request: HttpRequest) -> HttpAnswer:
        try:
            return await self._answer(request)
        except Exception as exc:  # a bug must not cost the connection more than this answer
            log.exception("admin: %s %s failed", request.method, request.target[:200])
            return _json(500, {"error": f"internal error: {type(exc).__name__}"})

    async def _answer(self, request: HttpRequest) -> HttpAnswer:
        method, target = request.method, request.target
        path = target.split("?", 1)[0] or "/"
        # Who asks is each worker's to check (`access.py`: the Host, the login, the ACLs): asked with the client's
        # Host and Authorization, a worker that refuses (401, 403, 421) is answered as it answered.
        self._caller.headers = {name: value for name, value in request.headers.items() if name in _FORWARDED}
        if path in ("/api/request", "/api/console") and (path == "/api/console") == (method in ("GET", "HEAD")):
            return await trio.to_thread.run_sync(self._to_worker_0, request, abandon_on_cancel=True)
        if method not in ("GET", "HEAD"):
            return _text(405, f"method {method} not allowed: the admin endpoints are GET only",
                         [("Allow", "GET, HEAD")])
        if path == "/health":
            return _json(200, {"status": "live", "workers": self.view.count})
        handler = None
        if path == "/metrics":
            handler = self._metrics
        elif path == "/ready":
            handler = self._ready
        console = console_file(path)
        if console is not None:
            return console
        segments = [unquote(s) for s in path.split("/")[2:]] if path.startswith("/api/") else []
        if segments == ["topics"]:
            handler = self._topics
        elif segments == ["groups"]:
            handler = self._groups
        elif segments == ["rates"]:
            handler = self._rates
        elif len(segments) == 5 and segments[0] == "topics" and segments[2] == "partitions" \
                and segments[4] == "messages":
            handler = partial(self._messages, segments[1], segments[3], target)
        if handler is None:
            return _json(404, {"error": f"not found: {path[:200]}"})
        headers = self._caller.headers
        return await trio.to_thread.run_sync(lambda: self._as(headers, handler), abandon_on_cancel=True)

    def _as(self, headers: dict[str, str], handler) -> HttpAnswer:
        """`handler()` in a worker thread asking the workers with the client's `headers`; a worker's refusal of the
        client (401, 403, 421) is the answer."""
        self._caller.headers = headers
        self._caller.refusal = None
        answer = handler()
        return self._caller.refusal or answer

    def _metrics(self) -> HttpAnswer:
        answers = self._ask_all("/metrics")
        texts = {i: body.decode() for i, (status, body) in answers.items() if status == 200}
        families, included = merge_expositions(texts)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Scrape(families, included, self.view))
        return 200, [("Content-Type", CONTENT_TYPE), NO_STORE], generate_latest(registry)

    def _ready(self) -> HttpAnswer:
        answers = self._ask_all("/ready")
        workers = {}
        for i in range(self.view.count):
            status, body = answers.get(i, (None, b""))
            if not self.view.started(i):
                workers[str(i)] = "starting"
            elif status is None:
                workers[str(i)] = "not answering"
            else:
                workers[str(i)] = "ready" if status == 200 else "not ready"
        ready = all(state == "ready" for state in workers.values())
        state = "ready" if ready else ", ".join(f"worker {i} {s}" for i, s in workers.items() if s != "ready")
        listeners = {f"admin.{i}": "%s:%d" % tuple(a) for i, a in enumerate(self.view.admin_addresses()) if a}
        return _json(200 if ready else 503, {"ready": ready, "state": state, "workers": workers,
                                             "listeners": listeners})

    # -- the console's endpoints, over every worker ----------------------------------------------------------
    def _topics(self) -> HttpAnswer:
        topics, missing = self._merged_topics()
        return _json(200, {"topics": topics, "workers_not_answering": missing})

    def _merged_topics(self) -> tuple[list[dict], list[int]]:
        """Every worker's /api/topics as one list (each partition from its owner, marked with `worker`), and the
        workers that did not answer (their partitions are missing)."""
        answers = self._ask_all("/api/topics")
        merged: dict[str, dict] = {}
        for i, (status, body) in sorted(answers.items()):
            if status != 200:
                continue
            for topic in orjson.loads(body)["topics"]:
                into = merged.setdefault(topic["name"], {"name": topic["name"], "format": topic["format"],
                                                         "partitions": [], "size_bytes": 0, "records": 0})
                into["partitions"] += [{**p, "worker": i} for p in topic["partitions"]]
                into["size_bytes"] += topic["size_bytes"]
                into["records"] += topic["records"]
        for topic in merged.values():
            topic["partitions"].sort(key=lambda p: p["partition"])
        missing = [i for i in range(self.view.count) if answers.get(i, (None,))[0] != 200]
        return [merged[name] for name in sorted(merged)], missing

    def _groups(self) -> HttpAnswer:
        """Worker 0's groups (it keeps every committed offset and the Kafka groups), with the end and lag of the
        partitions the other workers own filled in from their topics."""
        addresses = self.view.admin_addresses()
        coordinator = self._pool.submit(self._ask, addresses[0], "/api/groups", "GET", None,
                                        self._caller.headers) if addresses and addresses[0] \
            else None
        topics, _ = self._merged_topics()
        try:
            status, body = coordinator.result() if coordinator is not None else (None, b"")
        except (OSError, http.client.HTTPException, ValueError):
            status = None
        if status != 200:
            return _json(503, {"error": "worker 0 (the group coordinator) did not answer"})
        ends = {(t["name"], p["partition"]): p["last_stable_offset"] for t in topics for p in t["partitions"]}
        groups = orjson.loads(body)["groups"]
        for group in groups:
            for row in group["partitions"]:
                end = ends.get((row["topic"], row["partition"]))
                if row["end"] is None and end is not None:
                    row["end"], row["lag"] = end, max(end - row["committed"], 0)
            group["lag"] = sum(row["lag"] or 0 for row in group["partitions"])
        return _json(200, {"groups": groups})

    def _rates(self) -> HttpAnswer:
        """Every worker's /api/rates added up: per protocol and field, the per-second rates of the workers' last
        samples added from the newest back (each worker samples each second on its own clock), and the totals."""
        out = None
        for _, (status, body) in sorted(self._ask_all("/api/rates").items()):
            if status != 200:
                continue
            rates = orjson.loads(body)
            if out is None:
                out = rates
                continue
            for name, series in rates["protocols"].items():
                into = out["protocols"].setdefault(name, {})
                for field, values in series.items():
                    target = into.setdefault(field, [0.0] * len(out["t"]))
                    for k in range(1, min(len(target), len(values)) + 1):
                        target[-k] = round(target[-k] + values[-k], 3)
            for name, totals in rates["totals"].items():
                into = out["totals"].setdefault(name, {})
                for field, value in totals.items():
                    into[field] = into.get(field, 0) + value
        if out is None:
            return _json(503, {"error": "no worker answered"})
        return _json(200, out)

    def _messages(self, topic: str, partition: str, target: str) -> HttpAnswer:
        """The message browser's request, asked of the partition's owner (worker 0 answers a partition that is
        not a number: its 400)."""
        number = partition.isascii() and partition.isdigit() and int(partition)
        owner = partition_leader(topic, number, self.view.count) if number is not False else 0
        addresses = self.view.admin_addresses()
        address = addresses[owner] if owner < len(addresses) else None
        try:
            if address is None:
                raise OSError("not started")
            status, body = self._ask(address, target, "GET", None, self._caller.headers)
        except (OSError, http.client.HTTPException, ValueError):
            return _json(503, {"error": f"worker {owner}, the partition's owner, did not answer"})
        return status, [("Content-Type", "application/json"), NO_STORE], body

    def _to_worker_0(self, request: HttpRequest) -> HttpAnswer:
        """The console's actions (and what it may do) are worker 0's to answer: its native handler relays what
        other workers own, and it keeps the committed offsets. Asked with the browser's guard and login headers."""
        addresses = self.view.admin_addresses()
        forwarded = {name: value for name, value in request.headers.items() if name in _FORWARDED}
        try:
            if not addresses or addresses[0] is None:
                raise OSError("not started")
            status, body = self._ask(addresses[0], request.target, request.method, request.body, forwarded)
        except (OSError, http.client.HTTPException, ValueError):
            return _json(503, {"Error": {"message": "worker 0, which answers the console's actions, did not "
                                                    "answer"}})
        return status, [("Content-Type", "application/json"), NO_STORE], body

    def _ask_all(self, path: str) -> dict[int, tuple[int, bytes]]:
        """(status, body) of `path` from every worker that answered (its admin address known), asked at once with
        the client's headers; a refusal of the client is kept (`_as` answers it)."""
        addresses = self.view.admin_addresses()
        headers = getattr(self._caller, "headers", {})
        jobs = {i: self._pool.submit(self._ask, address, path, "GET", None, headers)
                for i, address in enumerate(addresses) if address is not None}
        out = {}
        for i, job in jobs.items():
            try:
                out[i] = job.result()
            except (OSError, http.client.HTTPException, ValueError) as exc:
                log.debug("admin: worker %d did not answer %s: %s", i, path, exc)
        for status, body in out.values():
            if status in _REFUSALS and getattr(self._caller, "refusal", None) is None:
                self._caller.refusal = status, [("Content-Type", "application/json"), NO_STORE], body
        return out

    def _ask(self, address, path: str, method: str = "GET", body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        host, port = address
        if self.client_context is not None:
            conn = http.client.HTTPSConnection(host, port, timeout=SCRAPE_TIMEOUT, context=self.client_context)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=SCRAPE_TIMEOUT)
        try:
            conn.request(method, path, body, headers or {})
            answer = conn.getresponse()
            body = answer.read(MAX_ANSWER_BYTES + 1)
            if len(body) > MAX_ANSWER_BYTES:
                raise ValueError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
            return answer.status, body
        finally:
            conn.close()
