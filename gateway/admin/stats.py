"""The gateway's counters as plain Python objects: what the request path, the connections, group commit and the
storage steps bump while they work. They hold ints and floats only — no locks, no label lookups: the gateway is one
trio thread, and `metrics.GatewayMetrics` turns them into Prometheus families (prometheus_client's exposition) at
scrape time, so the hot path pays an attribute increment per fact, nothing more.

- `Histogram`: fixed upper bounds, a count per bucket and a sum (cumulated at scrape time, as Prometheus wants).
- `RequestStats`: one per (protocol, request type): requests, errors, a latency histogram.
- `ProtocolStats`: one per protocol: its `RequestStats` by request type, bytes in/out, records in/out.
- `CURRENT`: the `ProtocolStats` of the protocol whose connection is running (a context variable the pump sets
  once per connection), so the storage steps can count records per protocol without being told the protocol.
"""

from __future__ import annotations

from bisect import bisect_left
from contextvars import ContextVar
from dataclasses import fields, is_dataclass
from time import perf_counter
from typing import Any, Callable

__all__ = ["BATCH_BOUNDS", "CURRENT", "DURATION_BOUNDS", "Histogram", "ProtocolStats", "RequestStats",
           "answer_failed", "request_name"]

#: Latency buckets (seconds): 100 µs to 30 s, covering an in-memory answer and a long-poll alike.
DURATION_BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0, 30.0)
#: Group-commit batch sizes (writers acknowledged by one sync round).
BATCH_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Histogram:
    """Counts per bucket (`counts[i]`: observations <= `bounds[i]`, not cumulated; the last one: above every
    bound) and the sum of what was observed."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """[(upper bound as text, observations <= it)], ending with "+Inf": prometheus_client's bucket form."""
        out, total = [], 0
        for bound, n in zip(self.bounds, self.counts):
            total += n
            out.append((repr(float(bound)), total))
        out.append(("+Inf", total + self.counts[-1]))
        return out


class RequestStats:
    """One (protocol, request type): requests answered, those that failed, and how long they took (from the
    request read to its answer written)."""

    __slots__ = ("count", "errors", "latency", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.errors = 0
        self.latency = Histogram(DURATION_BOUNDS)

    def observe(self, seconds: float, failed: bool) -> None:
        self.count += 1
        if failed:
            self.errors += 1
        lat = self.latency
        lat.counts[bisect_left(DURATION_BOUNDS, seconds)] += 1
        lat.sum += seconds

    def answered(self, started: float, answer: Any, closing: bool = False) -> None:
        """A request read at `started` (`perf_counter`) was answered with `answer` (None: nothing sent);
        `closing`: the answer closes the connection (counted as failed). `observe` folded with `answer_failed`,
        in one call: this runs for every request."""
        seconds = perf_counter() - started
        self.count += 1
        if closing:
            self.errors += 1
        else:
            test = _ERROR_TESTS.get(type(answer), _NO_TEST)
            if test is not None and (answer_failed(answer) if test is _NO_TEST else test(answer)):
                self.errors += 1
        lat = self.latency
        lat.counts[bisect_left(DURATION_BOUNDS, seconds)] += 1
        lat.sum += seconds


class ProtocolStats:
    """One protocol's traffic. `request(event)` is the event's `RequestStats`, found by the event's type (a dict
    lookup; made the first time a type is seen — the set of request types is the codec's, so it stays small)."""

    __slots__ = ("_by_body", "_by_name", "_by_type", "bytes_in", "bytes_out", "name", "records_in", "records_out")

    def __init__(self, name: str) -> None:
        self.name = name
        self.bytes_in = 0
        self.bytes_out = 0
        self.records_in = 0  # records appended by this protocol's clients
        self.records_out = 0  # records read for them
        self._by_type: dict[type, RequestStats | None] = {}  # None: the event carries its request in `body`
        self._by_body: dict[type, RequestStats] = {}
        self._by_name: dict[str, RequestStats] = {}

    def request(self, event: Any) -> RequestStats:
        stats = self._by_type.get(type(event), _UNSEEN)
        if stats is None:  # a Kafka request: its type is in its body
            body = event.body
            stats = self._by_body.get(type(body))
            if stats is None:
                stats = self._by_body[type(body)] = self.named(request_name(body))
            return stats
        if stats is _UNSEEN:
            if _has_field(type(event), "body"):
                self._by_type[type(event)] = None
                return self.request(event)
            stats = self._by_type[type(event)] = self.named(request_name(event))
        return stats

    def named(self, name: str) -> RequestStats:
        """The stats of a request type by name (e.g. "malformed": requests the codec could not parse)."""
        stats = self._by_name.get(name)
        if stats is None:
            stats = self._by_name[name] = RequestStats(name)
        return stats

    def all_requests(self) -> list[RequestStats]:
        return [self._by_name[name] for name in sorted(self._by_name)]


_UNSEEN: Any = RequestStats("unseen")  # a sentinel

#: The `ProtocolStats` of the connection whose task is running (set by the pump for each connection's task);
#: None outside connections (background tasks: transaction timeouts, the console).
CURRENT: ContextVar[ProtocolStats | None] = ContextVar("logway_protocol_stats", default=None)


def request_name(event: Any) -> str:
    """A request type's label: its class name without "Request"/"Event" (`ProduceRequest` → "Produce")."""
    name = type(event).__name__
    for suffix in ("Request", "Event"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _has_field(cls: type, name: str) -> bool:
    if is_dataclass(cls):
        return any(f.name == name for f in fields(cls))
    return name in getattr(cls, "__slots__", ()) or name in getattr(cls, "_fields", ())


_NO_TEST: Any = object()
_ERROR_TESTS: dict[type, Callable[[Any], bool] | None] = {type(None): None}


def answer_failed(answer: Any) -> bool:
    """Whether an answer reports a failure of the whole request: an `ErrorResponse` (native), or a non-zero
    top-level `error_code` (Kafka answers that have one; a Kafka response is judged by its body). Per-partition
    error codes inside an answer (a Kafka produce to an unknown partition, a TANK produce result) are the answer
    to a request that was served, and are not counted. The test is chosen once per answer type."""
    test = _ERROR_TESTS.get(type(answer), _NO_TEST)
    if test is _NO_TEST:
        test = _ERROR_TESTS[type(answer)] = _error_test(type(answer))
    return test is not None and test(answer)


def _error_test(cls: type) -> Callable[[Any], bool] | None:
    if cls.__name__ == "ErrorResponse":
        return lambda answer: True
    if _has_field(cls, "error_code"):
        return lambda answer: bool(answer.error_code)
    if _has_field(cls, "body"):
        return lambda answer: answer.body is not None and answer_failed(answer.body)
    return None
