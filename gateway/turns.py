"""Turns for data requests: what keeps a saturated gateway responsive to everything else.

trio runs, in each pass of its scheduler, every task that became ready since the last pass: with 1,000 busy
connections a pass serves ~1,000 requests one after the other, and a heartbeat, a Metadata request, a Ping or a
new connection that arrives meanwhile waits for the whole pass (hundreds of ms) before it is even read. So the
requests that read or write the log — produce, fetch, consume: a protocol's `data_requests` — take turns: at most
`limits.data_requests_per_pass` of them start in one pass, the others wait for a later pass in arrival order.
Everything else (control requests: metadata, group heartbeats and joins, offsets, admin calls, pings, new
connections) is served in the pass it arrives in. A pass then lasts about `per_pass` data requests, not the
whole backlog, and a control request waits for about one such pass; data requests wait as long as before (the
gateway does the same work in the same order, in shorter passes). Data requests differ in cost (a large
transcoded read costs a hundred small produces), so while requests wait, a pass that ran longer than
`limits.data_pass_ms` cuts the next pass's turns in proportion (at least one), and each pass within it gives one
turn back, up to `per_pass`.

`Turns` is a trio instrument: `after_io_wait` (once per pass, after the I/O poll, before the pass runs its tasks)
hands the pass's turns to the longest-waiting requests first (a pass's length is measured from one call to the
next, when the poll between did not wait); `take()` (or `take_now()`, without a coroutine) is
free while turns are left and nobody waits (a quiet gateway never makes a request wait), else it parks the
request's task until a pass has a turn for it. While requests wait, a connection whose last requests were data
requests takes its next turn before it reads (`pump.py`), then reads at once: a deferred request costs one
scheduler pass, not one for its bytes and one for its turn. `run()` (a task for the gateway's life) installs the
instrument and, while requests wait, keeps itself runnable so that the next I/O poll does not block (a pass with
waiters and nothing else to do would otherwise sleep until some I/O or timer woke the loop). Without `run()`
running, `take()` never waits. `waited` counts the data requests that waited for a later pass, and the turns
connections waited for before reading (the metric `logway_data_requests_deferred`: how often the gateway was
saturated).
"""

from __future__ import annotations

from time import perf_counter

import trio

__all__ = ["Turns"]


class Turns(trio.abc.Instrument):
    """At most `per_pass` data requests start in one scheduler pass, fewer while passes run over `pass_ms` (see
    the module docstring)."""

    def __init__(self, per_pass: int, pass_ms: float = 0) -> None:
        if per_pass < 1:
            raise ValueError("per_pass must be at least 1")
        self.per_pass = per_pass
        self.pass_seconds = pass_ms / 1000
        self.turns = float(per_pass)  # this pass's allowance: per_pass, less while passes run over pass_ms
        self.left = per_pass  # turns left in this pass
        self._started = 0.0  # the last pass's start (after the I/O poll)
        self.waited = 0
        self.active = False  # `run()` is running
        self._waiting = trio.lowlevel.ParkingLot()
        self._wake = trio.Event()  # set when a request starts waiting

    def after_io_wait(self, timeout: float) -> None:
        now = perf_counter()
        waiting = self._waiting
        if not waiting:
            self.turns = self.per_pass
            left = self.per_pass
        else:
            target = self.pass_seconds
            if target and not timeout:
                # The last pass, and an I/O poll that did not wait (while requests wait, `run` keeps itself
                # runnable): one hook per pass instead of two (trio calls each through its instrument machinery).
                took = now - self._started
                if took > target:  # fewer this time, in proportion
                    self.turns = max(1.0, self.turns * target / took)
                elif self.turns < self.per_pass:
                    self.turns += 1
            left = int(self.turns)
            left -= len(waiting.unpark(count=left))  # they run in this pass, their turn taken
        self._started = now
        self.left = left

    def take_now(self) -> bool:
        """Take a turn if one is free without waiting (turns left and nobody waits: the usual case); False when
        the caller must `await take()`. Saves the quiet gateway a coroutine per data request."""
        if self.left > 0 and not self._waiting:
            self.left -= 1
            return True
        return not self.active  # no passes are counted: nobody waits

    async def take(self) -> None:
        """Return when this pass has a turn for the caller (at once when turns are left and nobody waits)."""
        if self.take_now():
            return
        self.waited += 1
        self._wake.set()
        await self._waiting.park()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def run(self) -> None:
        """Hand out turns until cancelled (then every waiting request goes on)."""
        trio.lowlevel.add_instrument(self)
        self.active = True
        try:
            while True:
                if self._waiting:
                    await trio.lowlevel.checkpoint()  # runnable in the next pass: its I/O poll does not block
                else:
                    self._wake = trio.Event()
                    await self._wake.wait()
        finally:
            self.active = False
            trio.lowlevel.remove_instrument(self)
            self._waiting.unpark_all()
