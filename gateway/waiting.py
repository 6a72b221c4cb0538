"""Answers that come later, as objects a protocol's handler returns and the pump is given:

- `LongPoll`: a request parked at the log end — `build(at_once)` -> (answer, enough), the partitions whose appends
  may make it enough (`keys`), its `deadline`, and what the answer goes through once built (`then`: the Kafka
  header and quotas, TANK's refused part, …; `rescue`: the protocol's answer to a storage failure while building
  it). The pump hands it to the steps' one `Waiter` with its way to write an answer at once; the waiter parks it on
  the `notify.AppendNotifier`, and the append that brings enough data builds and writes the answer itself — in the
  appending task, before it answers its own client (`run_now`: the same `build`, never waiting) — or leaves it to
  the waiting task when it cannot (a large read, a busy connection).
- `Park`: any other answer that comes later (`wait()`; a TANK consume split over several members waits for the
  first of their answers).

Both may carry `now()`: the answer to give without waiting when a connection has too many parked already
(protocols with `max_parked` > 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Hashable, Protocol, TypeVar

import trio

from .notify import AppendNotifier

__all__ = ["LongPoll", "NotNow", "Park", "Waiter", "run_now", "then"]

T = TypeVar("T")


class NotNow(Exception):
    """An answer built by the appending task needs to wait after all (a large read, the memory budget): the waiting
    task builds it instead."""


@dataclass(slots=True, eq=False)
class Park:
    """An answer that comes later: `await wait()`; `await now()` without waiting (see the module docstring)."""

    wait: Callable[[], Awaitable[Any]]
    now: Callable[[], Awaitable[Any]] | None = None

    def then(self, fn: Callable[[Any], Any]) -> "Park":
        """This answer, once it came, through `fn`."""
        wait, now = self.wait, self.now

        async def waited():
            return fn(await wait())

        async def at_once():
            return fn(await now())

        return Park(waited, at_once if now is not None else None)


@dataclass(slots=True, eq=False)
class LongPoll:
    """A request parked at the log end (see the module docstring). `at_once`: whether the appending task may build
    the answer (`build(True)`'s reads never wait); `now`: the answer when the connection may not park more (None:
    `build(False)`'s)."""

    keys: list[Hashable]
    deadline: float
    build: Callable[[bool], Awaitable[tuple[Any, bool]]]
    at_once: bool = True
    now: Callable[[], Awaitable[Any]] | None = None
    finish: tuple[Callable[[Any], Any], ...] = ()
    rescue: Callable[[Exception], Any] | None = None

    def then(self, fn: Callable[[Any], Any]) -> "LongPoll":
        """This answer, once built, through `fn` (after what it went through already). (A poll has one owner at a
        time, the handler then the layers around it: it is changed in place.)"""
        self.finish += (fn,)
        return self

    def rescued(self, fn: Callable[[Exception], Any]) -> "LongPoll":
        """`fn(exc)` answers (or raises again) an exception raised while building the answer in the waiting task."""
        self.rescue = fn
        return self

    def finished(self, answer):
        for fn in self.finish:
            answer = fn(answer)
        return answer


def then(reply, fn: Callable[[Any], Any]):
    """`fn(answer)` applied to `reply`: an answer now, or one that comes later (a `LongPoll` or a `Park`: applied
    once it came). None stays None (no answer)."""
    if type(reply) is LongPoll or type(reply) is Park:
        return reply.then(fn)
    return None if reply is None else fn(reply)


class Writer(Protocol):
    """A connection's way to write an answer from another task (`pump.Outbox`)."""

    def ready_now(self) -> bool: ...

    def send_now(self, answer) -> bool: ...


class Waiter:
    """The one place where long-polls wait (owned by the steps: `Steps.waiter`)."""

    def __init__(self, notifier: AppendNotifier) -> None:
        self.notifier = notifier

    async def answer(self, poll: LongPoll, out: Writer | None = None) -> tuple[Any, bool]:
        """The poll's answer — the first that is enough, or the one built at the deadline (or at once when the
        notifier refuses to park: shutdown, `limits.max_waiters`) — and whether it is out already: with the
        connection's `out` (`ready_now()`: nothing else is being written; `send_now(answer)`: write it now), the
        append that wakes the poll builds and writes it."""
        try:
            while True:
                answer, enough = await poll.build(False)
                if enough or trio.current_time() >= poll.deadline:
                    return poll.finished(answer), False
                written: list = []
                answer_now = None
                if out is not None and poll.at_once:
                    def answer_now() -> bool:
                        if not out.ready_now():  # (checked first: an answer built is an answer charged, counted)
                            return False
                        try:
                            answer, enough = run_now(poll.build(True))
                        except NotNow:
                            return False
                        if not enough:
                            return False
                        for fn in poll.finish:  # (`finished`, inline: the appending task's time is everyone's)
                            answer = fn(answer)
                        out.send_now(answer)
                        written.append(answer)
                        return True
                woken = await self.notifier.wait(poll.keys, poll.deadline, answer_now)
                if woken is None:
                    return written[0], True
                if not woken:
                    return poll.finished((await poll.build(False))[0]), False
        except Exception as exc:
            if poll.rescue is None:
                raise
            return poll.finished(poll.rescue(exc)), False

    async def at_once(self, poll: LongPoll):
        """The poll's answer without waiting (the connection may not park more)."""
        try:
            answer = await poll.now() if poll.now is not None else (await poll.build(False))[0]
        except Exception as exc:
            if poll.rescue is None:
                raise
            answer = poll.rescue(exc)
        return poll.finished(answer)


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run to its end, here and now, a coroutine that never waits — one whose reads are `Steps.read(...,
    at_once=True)` — and return its result: the one code path of an answer serves both the appending task (this)
    and the waiting one (awaited). Raises `NotNow`, the coroutine closed, if it tries to wait after all."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise NotNow
