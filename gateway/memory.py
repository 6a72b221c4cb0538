"""The gateway's memory budget (`limits.memory_bytes`): the bytes held for clients' requests and answers, counted
against one limit, so that no client — nor many — can run the gateway out of memory.

What is counted (by the pump, `pump.py` and `reading.py`): a frame whose declared size is over `SMALL_FRAME_BYTES`
from the moment its header is in (the codec's `next_frame_size()`, before its body is buffered), times the
codec's decode factor (what its decoded form may take: `Protocol.decode_factor`), until the request is answered;
and an answer's bytes held in memory (not the file ranges it sends with sendfile) from the moment it is encoded
until the client has taken it. Smaller frames and answers are not counted: the connection limits bound them
(a few receive buffers per connection).

Who may take more (`fits`): anyone while the total stays under the soft limit (three quarters of the budget).
Above it, until the hard limit, only a client address holding less than its fair share — the budget divided among
the addresses holding memory — so a client that took the most waits first and the others go on. A request that
does not fit waits (back-pressure: its connection is not read further, its data request not started) until
memory is released; it cannot wait longer than the connection's deadlines (`connections.py`: an incomplete frame
or an answer not taken within `limits.request_timeout_ms` closes the connection, releasing what it held). A
frame costing more than the whole budget waits until it can be alone in it. An encoded answer is taken without
waiting (`take`): it exists already; the budget then makes the next requests wait.

`/ready` reports unready while the budget is exhausted (`exhausted`), and the metrics show its use
(`logway_memory_budget_bytes{what=limit|used}`, `logway_memory_waits_total`).
"""

from __future__ import annotations

import os

import trio

__all__ = ["MemoryBudget", "SMALL_FRAME_BYTES", "default_memory_bytes"]

#: Frames and answers up to this size are not counted: a receive's worth of bytes (`reading.RECEIVE_CHUNK`), which
#: the connection limits bound already; counting them would cost every small request two updates.
SMALL_FRAME_BYTES = 256 * 1024
#: Above this share of the budget, only addresses under their fair share may take more.
SOFT_SHARE = 0.75
#: The smallest default budget, whatever the machine says.
MIN_DEFAULT_BYTES = 256 * 1024 * 1024


def default_memory_bytes() -> int:
    """A quarter of the memory this process may use: the machine's, or its cgroup's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return max(MIN_DEFAULT_BYTES, total // 4)


class MemoryBudget:
    """Bytes held against `limit`, per client address and per connection (`Connection.memory`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.soft = int(limit * SOFT_SHARE)
        self.used = 0
        self._by_address: dict[str, int] = {}
        self._waiting = trio.lowlevel.ParkingLot()
        self.waits = 0  # requests that had to wait (the metrics)

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit

    def fits(self, address: str, size: int) -> bool:
        """Whether `address` may take `size` more bytes now (see the module docstring)."""
        after = self.used + size
        if after <= self.soft:
            return True
        if after > self.limit:
            return size >= self.limit and self.used == 0  # larger than the whole budget: alone in it
        held = self._by_address.get(address, 0)
        holders = len(self._by_address) + (held == 0)
        return held + size <= self.limit // holders

    async def acquire(self, conn, size: int) -> None:
        """Take `size` bytes for `conn`, waiting until they fit."""
        if not self.fits(conn.address, size):
            self.waits += 1
            while not self.fits(conn.address, size):
                await self._waiting.park()
        self.take(conn, size)

    async def wait_below(self, conn) -> None:
        """Wait until `conn`'s address could take more (before a request that will build a large answer)."""
        if not self.fits(conn.address, 1):
            self.waits += 1
            while not self.fits(conn.address, 1):
                await self._waiting.park()

    def take(self, conn, size: int) -> None:
        """Count `size` bytes `conn` holds now (without waiting: the memory is in use already)."""
        self.used += size
        conn.memory += size
        address = conn.address
        self._by_address[address] = self._by_address.get(address, 0) + size

    def release(self, conn, size: int) -> None:
        """`conn` gave back `size` bytes (of what it took); the waiters look again."""
        if size <= 0:
            return
        self.used -= size
        conn.memory -= size
        address = conn.address
        left = self._by_address.get(address, 0) - size
        if left > 0:
            self._by_address[address] = left
        else:
            self._by_address.pop(address, None)
        if self._waiting:
            self._waiting.unpark_all()
