"""The pump's write lock (`pump._WriteLock`): what a TANK connection's answers take in turn, the pump's and the
parked long-polls'. One holder at a time, handed to the waiters in arrival order, and a waiter cancelled while it
waits neither gets the lock nor keeps the others from it."""

from __future__ import annotations

import trio

from logway.gateway.pump import _WriteLock


async def test_one_holder_at_a_time_in_arrival_order():
    lock = _WriteLock()
    order: list[int] = []
    holders = 0

    async def writer(i: int) -> None:
        nonlocal holders
        if not lock.try_acquire():
            await lock.acquire()
        holders += 1
        assert holders == 1 and lock.locked()  # a hand-over keeps it locked: nobody can slip in between
        order.append(i)
        await trio.testing.wait_all_tasks_blocked()  # hold it until every other writer waits for it
        holders -= 1
        lock.release()

    assert lock.try_acquire()  # the first writer: at once, without waiting
    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(writer, i)
            await trio.testing.wait_all_tasks_blocked()  # each is parked before the next arrives
        assert order == [] and lock.locked()
        lock.release()  # handed to writer 0, which hands it on
    assert order == [0, 1, 2, 3, 4]
    assert not lock.locked()
    assert lock.try_acquire()


async def test_a_waiter_cancelled_while_waiting_does_not_get_it():
    lock = _WriteLock()
    assert lock.try_acquire()
    got: list[str] = []

    async def waiter(name: str, scope_box: list) -> None:
        with trio.CancelScope() as scope:
            scope_box.append(scope)
            await lock.acquire()
            got.append(name)
            lock.release()

    first: list = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "cancelled", first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(waiter, "second", [])
        await trio.testing.wait_all_tasks_blocked()
        first[0].cancel()
        await trio.testing.wait_all_tasks_blocked()
        lock.release()
    assert got == ["second"]
    assert not lock.locked()
