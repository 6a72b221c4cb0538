"""Client quotas (Kafka's KIP-13, KIP-55, KIP-124, KIP-546): how many bytes a second a user or client id may produce
and fetch, and what share of the gateway's time its requests may take — and what it costs them to go past it.

Quotas are set on entities: a user (`("user", "alice")`), a client id (`("client-id", "billing")`), both
(`(("user", "alice"), ("client-id", "billing"))`), or a default (`None` for the name: every user, every client id).
For a connection's (user, client id) each quota key is taken from the first entity that sets it, in Kafka's order:

    user + client id · user + default client id · user · default user + client id · default user + default client
    id · default user · client id · default client id

and is *shared* by the connections that entity covers as Kafka shares it: `("user", "alice")` is one budget for all
of alice's connections; the default user's is one budget *per user*. The user of a connection is its principal's
name (`User:alice` → `alice`; an unauthenticated one is `ANONYMOUS`); the client id is what a Kafka client names
itself in each request (native and TANK connections have none: "").

Keys: `producer_byte_rate` (bytes of records produced a second), `consumer_byte_rate` (bytes of records fetched a
second), `request_percentage` (the time the gateway spends on its requests, as a percentage of one core — Kafka's
share of one request handler thread). Each is measured over `WINDOW_SAMPLES` samples of `SAMPLE_S` seconds, as
Kafka measures them. A request that takes a budget past its bound is charged a throttle time, as Kafka computes it:
`(observed - bound) / bound × window`, at most the window — the time for the rate to come back under the bound.
What a throttled connection gets (`Quotas.charge` answers the delay; each protocol applies it): a Kafka answer
carries `throttle_time_ms` and the connection reads no further request until it has passed (KIP-219: the client
waits too); a native or TANK answer is delayed by it (or, for a long-poll answered later, the connection's next
request). Other clients are not slowed: each has its own budget.

The quotas live in the storage backend (`SecurityState.quotas`), in memory here, read again when they change.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import trio

from ..pump import LATER

__all__ = ["ConnectionQuota", "KEYS", "Quotas", "QuotaRefusal", "ENTITY_TYPES", "SAMPLE_S", "WINDOW_SAMPLES"]

#: The quota keys that are enforced (Kafka's names).
KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
#: The entity types quotas are set on.
ENTITY_TYPES = ("user", "client-id")
#: Kafka's quota.window.size.seconds and quota.window.num.
SAMPLE_S, WINDOW_SAMPLES = 1.0, 11
#: The measured keys by what a request is charged with.
_KIND = {"produce": "producer_byte_rate", "fetch": "consumer_byte_rate", "request": "request_percentage"}
#: Throttle budgets kept at once (users × client ids that had a quota); past it the oldest are forgotten.
MAX_SENSORS = 65536
#: Kafka's precedence of entities (KIP-55): (user part, client part) — "name", "default" or None (absent).
_ORDER = (("name", "name"), ("name", "default"), ("name", None), ("default", "name"), ("default", "default"),
          ("default", None), (None, "name"), (None, "default"))


class QuotaRefusal(ValueError):
    """A quota or an entity that cannot be set (Kafka's INVALID_REQUEST)."""


class _Rate:
    """A rate over the last `WINDOW_SAMPLES` samples of `SAMPLE_S` seconds (Kafka's `Rate` with `SampledStat`)."""

    __slots__ = ("samples",)

    def __init__(self) -> None:
        self.samples: list[list[float]] = []  # [sample start, amount], oldest first

    def record(self, amount: float, now: float) -> None:
        samples = self.samples
        if not samples or now - samples[-1][0] >= SAMPLE_S:
            samples.append([now, 0.0])
            if len(samples) > WINDOW_SAMPLES:
                del samples[0]
        samples[-1][1] += amount

    def measure(self, now: float) -> tuple[float, float]:
        """(the rate, the window it was measured over in seconds)."""
        live = [s for s in self.samples if now - s[0] < SAMPLE_S * WINDOW_SAMPLES]
        self.samples = live
        if not live:
            return 0.0, SAMPLE_S
        # As Kafka: the window is at least all but one sample long, so a first burst is not a huge rate.
        window = max(now - live[0][0], SAMPLE_S * (WINDOW_SAMPLES - 1))
        return sum(amount for _, amount in live) / window, window


@dataclass(frozen=True, slots=True)
class _Bound:
    value: float
    sensor: tuple  # what shares the budget: (key, user or "", client id or "")


def _user_of(principal: str) -> str:
    return principal.partition(":")[2] or principal


class Quotas:
    def __init__(self, state, clock=time.monotonic) -> None:
        """`state`: the storage backend's `SecurityState` (None: no quotas)."""
        self.state = state
        self.clock = clock
        self._quotas: dict[tuple, dict[str, float]] = {}  # normalized entity -> {key: value}
        self._version = -1
        self._bounds: dict[tuple[str, str], dict[str, _Bound]] = {}  # (user, client id) -> key -> bound
        self._rates: dict[tuple, _Rate] = {}
        self.throttled: dict[str, int] = {}  # key -> charges that threw a client over its bound (the metrics)
        self.refresh()

    # -- the quotas ------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        state = self.state
        if state is None or state.version == self._version:
            return
        version = state.version
        self._quotas = {self.normalized(entity): dict(values) for entity, values in state.quotas().items()}
        self._bounds = {}
        self._version = version

    @staticmethod
    def normalized(entity) -> tuple:
        """An entity as the store keeps it: (type, name or None) pairs in type order; QuotaRefusal when it names an
        unknown type or a type twice."""
        pairs = sorted((str(t), n) for t, n in entity)
        types = [t for t, _ in pairs]
        if not pairs or len(set(types)) != len(types) or any(t not in ENTITY_TYPES for t in types):
            raise QuotaRefusal(f"an entity is a user, a client-id or both, each once: got {list(entity)}")
        return tuple(pairs)

    def entries(self) -> dict[tuple, dict[str, float]]:
        self.refresh()
        return dict(self._quotas)

    def change(self, changes: list[tuple[tuple, dict[str, float | None]]]) -> None:
        """Apply (entity, {key: value, or None to remove}) changes durably (blocking: callers run it in a thread)."""
        for entity, ops in changes:
            values = dict(self._quotas.get(entity, {}))
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            self.state.set_quotas(entity, values)
        self.refresh()

    @staticmethod
    def checked(key: str, value: float | None, remove: bool) -> float | None:
        """A quota op's value (None: remove it); QuotaRefusal for a key or a value that cannot be set."""
        if key not in KEYS:
            raise QuotaRefusal(f"quota {key!r} is not enforced by this gateway (it enforces {', '.join(KEYS)})")
        if remove:
            return None
        if value is None or not math.isfinite(value) or value <= 0:
            raise QuotaRefusal(f"quota {key} must be a positive number, got {value}")
        return float(value)

    # -- what a client may take ------------------------------------------------------------------------------
    def _bounds_of(self, user: str, client_id: str) -> dict[str, _Bound]:
        self.refresh()
        found = self._bounds.get((user, client_id))
        if found is not None:
            return found
        found = {}
        if self._quotas:
            for user_part, client_part in _ORDER:
                entity = []
                if user_part is not None:
                    entity.append(("user", user if user_part == "name" else None))
                if client_part is not None:
                    entity.append(("client-id", client_id if client_part == "name" else None))
                values = self._quotas.get(tuple(sorted(entity)))
                if not values:
                    continue
                for key, value in values.items():
                    if key not in found:  # the first entity that sets a key gives it
                        found[key] = _Bound(value, (key, user if user_part else "", client_id if client_part else ""))
        if len(self._bounds) >= MAX_SENSORS:
            self._bounds = {}
        self._bounds[(user, client_id)] = found
        return found

    @property
    def active(self) -> bool:
        """Whether any quota is set (none: nothing is charged, nor measured, on the request path)."""
        state = self.state
        if state is not None and state.version != self._version:
            self.refresh()
        return bool(self._quotas)

    def charge(self, principal: str, client_id: str | None, kind: str, amount: float) -> float:
        """Record `amount` (bytes produced or fetched, or seconds of the gateway's time: `kind` produce, fetch or
        request) for a connection; the seconds it is to be throttled for (0.0: within its quota)."""
        if not self.active:
            return 0.0
        bound = self._bounds_of(_user_of(principal), client_id or "").get(_KIND[kind])
        if bound is None:
            return 0.0
        now = self.clock()
        rate = self._rates.get(bound.sensor)
        if rate is None:
            if len(self._rates) >= MAX_SENSORS:
                self._rates.clear()
            rate = self._rates[bound.sensor] = _Rate()
        rate.record(amount * 100 if kind == "request" else amount, now)  # (request time as a percentage)
        observed, window = rate.measure(now)
        if observed <= bound.value:
            return 0.0
        key = bound.sensor[0]
        self.throttled[key] = self.throttled.get(key, 0) + 1
        return min((observed - bound.value) / bound.value * window, SAMPLE_S * WINDOW_SAMPLES)


class ConnectionQuota:
    """One connection's side of the quotas: `charge` what a request took (its time, the bytes it produced or
    fetched) and get the throttle time; `mute` the connection for a time its next request then `wait`s out."""

    __slots__ = ("quotas", "conn", "muted_until")

    def __init__(self, quotas: Quotas, conn) -> None:
        self.quotas = quotas
        self.conn = conn
        self.muted_until = -math.inf

    def charge(self, seconds: float = 0.0, produced: int = 0, fetched: int = 0) -> float:
        """The seconds the connection is to be throttled for after a request that took `seconds` of the gateway's
        time and moved those bytes of records (0.0: within its quotas)."""
        conn, charge = self.conn, self.quotas.charge
        delay = charge(conn.principal, conn.client_id, "request", seconds)
        if produced:
            delay = max(delay, charge(conn.principal, conn.client_id, "produce", produced))
        if fetched:
            delay = max(delay, charge(conn.principal, conn.client_id, "fetch", fetched))
        return delay

    def mute(self, delay: float) -> None:
        if delay > 0:
            self.muted_until = max(self.muted_until, trio.current_time() + delay)

    async def wait(self) -> None:
        """Before a request is served: the connection's throttle time must have passed."""
        if self.muted_until > trio.current_time():
            await trio.sleep_until(self.muted_until)

    async def answered(self, reply, seconds: float, produced: int, fetched: Callable[[Any], int]):
        """`reply` to a request that took `seconds` and produced `produced` bytes, charged: an answer past a quota
        is delayed by its throttle time (native, TANK); an answer that comes later (`waiting.py`) is charged its
        `fetched(answer)` bytes when built, and its throttle time mutes the connection's next request."""
        if type(reply) not in LATER:
            delay = self.charge(seconds, produced, fetched(reply) if reply is not None else 0)
            if delay > 0:
                await trio.sleep(delay)
            return reply
        self.mute(self.charge(seconds, produced))

        def charged(answer):
            self.mute(self.charge(fetched=fetched(answer)))
            return answer

        return reply.then(charged)
