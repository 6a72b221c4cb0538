"""A `workers: N` gateway's processes as the tests find them from outside, as any local process of the same user
could: each worker's pid by index, and the abstract sockets its workers listen on."""

from __future__ import annotations

import os

from logway.bench.proc import child_pids, gateway_processes


def worker_pid(gw, index: int) -> int:
    """The pid of worker `index` of the supervisor `gw` (a `GatewayProcess`; found by its LOGWAY_WORKER)."""
    return gateway_processes(gw.pid)[f"worker {index}"]


def relay_sockets(gw) -> list[str]:
    """The abstract names ("@" for the leading NUL) of the relay and hand-over sockets the gateway's workers listen
    on: the workers' socket inodes, looked up in /proc/net/unix."""
    inodes = set()
    for worker in child_pids(gw.pid):
        fds = f"/proc/{worker}/fd"
        for fd in os.listdir(fds):
            try:
                link = os.readlink(os.path.join(fds, fd))
            except OSError:
                continue  # closed meanwhile
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    listening = 0x10000  # __SO_ACCEPTCON
    with open("/proc/net/unix") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return sorted(row[7] for row in rows if len(row) > 7 and row[6] in inodes and int(row[3], 16) & listening
                  and row[7].startswith("@logway-"))
