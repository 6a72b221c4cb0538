"""Long-poll wake-ups: fetches parked at the log end wait here and are woken by appends (no polling).

A waiter registers under every partition key it watches; `notify(key)` wakes and forgets the waiters registered
under that key. A waiter may bring `answer_now`, a callback the notifier calls right away, in the appending task
(before it answers its own client; in a copy of the waiter's context variables): it builds and writes the parked
answer on the spot, without a scheduler pass of its own, and returns True — or returns False when it cannot (a large
read, a busy connection), and the waiter's task takes over. `close()` wakes everyone (shutdown: parked fetches
answer at once).
Past `max_waiters` parked at once, `wait()` refuses to park and returns False at once, as an expired timer does:
every caller then answers with what it has (refusals are counted in `refused`). `waiting` (parked now) and
`parked` (parked ever) feed the metrics (`logway_long_polls_*`).
"""

from __future__ import annotations

import contextvars
import logging
from typing import Callable, Hashable, Iterable

import trio

log = logging.getLogger("logway.gateway")


class _Waiter:
    __slots__ = ("event", "answer_now", "context", "answered")

    def __init__(self, answer_now: Callable[[], bool] | None) -> None:
        self.event = trio.Event()
        self.answer_now = answer_now
        # `answer_now` runs in the waiting task's context (its connection's metrics), not the appending task's
        self.context = contextvars.copy_context() if answer_now is not None else None
        self.answered = False  # `answer_now` wrote the answer


class AppendNotifier:
    def __init__(self, max_waiters: int = 100_000) -> None:
        self._waiters: dict[Hashable, set[_Waiter]] = {}
        self._count = 0
        self.max_waiters = max_waiters
        self.refused = 0  # waits refused because `max_waiters` were parked
        self.parked = 0  # waits that parked, in all
        self.answered_at_once = 0  # wake-ups answered by the appending task (`answer_now`)
        self.closed = False

    def notify(self, key: Hashable) -> None:
        waiters = self._waiters.pop(key, None)
        if not waiters:
            return
        for waiter in waiters:
            event = waiter.event
            if event.is_set():
                continue  # woken through another of its keys
            if waiter.answer_now is not None:
                try:
                    waiter.answered = waiter.context.run(waiter.answer_now)
                except Exception:  # the waiter's task builds the answer (and meets the error) itself
                    log.debug("answering a parked request at once failed", exc_info=True)
                if waiter.answered:
                    self.answered_at_once += 1
            event.set()

    async def wait(self, keys: Iterable[Hashable], deadline: float,
                   answer_now: Callable[[], bool] | None = None) -> bool | None:
        """Wait until one of `keys` gets an append or the trio clock reaches `deadline`: True when woken, None when
        woken and `answer_now` already answered, False when the timer ran out.

        False at once after `close()` or when `max_waiters` are already parked (the caller answers now)."""
        if self.closed:
            return False
        if self._count >= self.max_waiters:
            self.refused += 1
            return False
        waiter = _Waiter(answer_now)
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(waiter)
        self._count += 1
        self.parked += 1
        try:
            with trio.move_on_at(deadline):
                await waiter.event.wait()
            if waiter.answered:
                return None
            return waiter.event.is_set()
        finally:
            self._count -= 1
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[key]

    @property
    def waiting(self) -> int:
        return self._count

    def close(self) -> None:
        self.closed = True
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.event.set()
        self._waiters.clear()
