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

A read that transcodes a large slice (`steps.py`) holds the slice's bytes and its answer while it builds it: it takes
that share (`reserve`, through `LEASE`: the budget and connection of the task at hand, set by the pump) before it
reads, and gives it back once built (the answer is then counted as an answer).

Resident memory follows the budget only if freed buffers go back to the system: glibc's malloc serves allocations
over a threshold with their own mappings (returned when freed) but raises that threshold as large blocks are freed,
up to 32 MiB, after which megabyte answers come from its heap and stay resident once freed. `fix_mmap_threshold()`
(at the gateway's start) pins it at `MMAP_THRESHOLD_BYTES`.

`/ready` reports unready while the budget is past its soft limit (`exhausted`: requests wait), and the metrics
show its use (`logway_memory_budget_bytes{what=limit|used}`, `logway_memory_waits_total`).
"""

from __future__ import annotations

import ctypes
import os
from contextvars import ContextVar

import trio

__all__ = ["LEASE", "MemoryBudget", "SMALL_FRAME_BYTES", "default_memory_bytes", "fix_mmap_threshold", "give_back",
           "reserve"]

#: Frames and answers up to this size are not counted: a receive's worth of bytes (`reading.RECEIVE_CHUNK`), which
#: the connection limits bound already; counting them would cost every small request two updates.
SMALL_FRAME_BYTES = 256 * 1024
#: Allocations from this size on get mappings of their own, returned to the system when freed (`fix_mmap_threshold`):
#: above a receive's worth of bytes (`reading.RECEIVE_CHUNK`), which would otherwise be mapped on every read.
MMAP_THRESHOLD_BYTES = 1024 * 1024
#: mallopt's parameter for it (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3
#: Above this share of the budget, only addresses under their fair share may take more.
SOFT_SHARE = 0.75
#: The smallest default budget, whatever the machine says.
MIN_DEFAULT_BYTES = 256 * 1024 * 1024


def fix_mmap_threshold() -> bool:
    """Pin glibc malloc's mmap threshold at `MMAP_THRESHOLD_BYTES` (see the module docstring); False where there is
    no glibc."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


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
        """Past the soft limit: requests of the addresses holding the most wait (`/ready` reports unready)."""
        return self.used > self.soft

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


#: (budget, connection) of the task at hand: a connection's task, and the parked answers it starts (the pump sets
#: it); None elsewhere (nothing is counted).
LEASE: ContextVar[tuple[MemoryBudget, object] | None] = ContextVar("logway_memory_lease", default=None)


async def reserve(size: int, at_once: bool = False) -> int | None:
    """Take `size` bytes for the task at hand's connection (`LEASE`), waiting until they fit; the bytes taken (0
    when small or not counted), or None when `at_once` and they do not fit now."""
    lease = LEASE.get()
    if lease is None or size <= SMALL_FRAME_BYTES:
        return 0
    memory, conn = lease
    if memory.fits(conn.address, size):
        memory.take(conn, size)
    elif at_once:
        return None
    else:
        await memory.acquire(conn, size)
    return size


def give_back(size: int) -> None:
    """Give back what `reserve` took (in the same task)."""
    if size:
        memory, conn = LEASE.get()
        memory.release(conn, size)
