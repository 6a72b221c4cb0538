"""Long-poll wake-ups: fetches parked at the log end wait here and are woken by appends (no polling).

A waiter registers one trio.Event under every partition key it watches; `notify(key)` sets and forgets the
events registered under that key. `close()` wakes everyone (shutdown: parked fetches answer at once).
Past `max_waiters` parked at once, `wait()` refuses to park and returns False at once, as an expired timer does:
every caller then answers with what it has (refusals are counted in `refused`). `waiting` (parked now) and
`parked` (parked ever) feed the metrics (`logway_long_polls_*`).
"""

from __future__ import annotations

from typing import Hashable, Iterable

import trio


class AppendNotifier:
    def __init__(self, max_waiters: int = 100_000) -> None:
        self._waiters: dict[Hashable, set[trio.Event]] = {}
        self._count = 0
        self.max_waiters = max_waiters
        self.refused = 0  # waits refused because `max_waiters` were parked
        self.parked = 0  # waits that parked, in all
        self.closed = False

    def notify(self, key: Hashable) -> None:
        events = self._waiters.pop(key, None)
        if events:
            for ev in events:
                ev.set()

    async def wait(self, keys: Iterable[Hashable], deadline: float) -> bool:
        """Wait until one of `keys` gets an append or the trio clock reaches `deadline`; True when woken.

        False at once after `close()` or when `max_waiters` are already parked (the caller answers now)."""
        if self.closed:
            return False
        if self._count >= self.max_waiters:
            self.refused += 1
            return False
        ev = trio.Event()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(ev)
        self._count += 1
        self.parked += 1
        try:
            with trio.move_on_at(deadline):
                await ev.wait()
            return ev.is_set()
        finally:
            self._count -= 1
            for key in keys:
                events = self._waiters.get(key)
                if events is not None:
                    events.discard(ev)
                    if not events:
                        del self._waiters[key]

    @property
    def waiting(self) -> int:
        return self._count

    def close(self) -> None:
        self.closed = True
        for events in self._waiters.values():
            for ev in events:
                ev.set()
        self._waiters.clear()
