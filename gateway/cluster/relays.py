"""The workers' relay sockets (`workers: N`): where a worker takes the native and TANK requests the others relay to
it (`forwarding.py`) and the client connections they hand over to it (`handover.py`), and the check both ends
make.

A relay socket is a Unix-domain socket in Linux's abstract namespace, named for the gateway's run (a random token),
the worker and the protocol: no file to clean up, no TLS (it never leaves the host), and apart from clients'
connections. The supervisor binds them all and holds them, as it holds the shared port's sockets: a worker started
again serves the same socket — no moment in which another process could take the name, and the relays that arrive
meanwhile wait in its backlog instead of failing.
Relayed requests come from clients another worker admitted, under that worker's connection limits, so a relay
connection is not counted against the owner's `limits.max_connections` and `max_connections_per_ip` (a TANK
client's parked consumes spanning workers hold one relay connection each). Abstract names have no permissions:
both ends check the peer's credentials (`SO_PEERCRED`) and deal only with a process of the gateway's own user.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys

__all__ = ["relay_address", "bind_relay", "same_user", "stale", "new_run", "RELAYS_SUPPORTED", "HANDOVER", "SHARED"]

#: Abstract Unix-domain sockets are Linux's.
RELAYS_SUPPORTED = sys.platform.startswith("linux")
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_BACKLOG = 1024
#: The name of each worker's hand-over socket (`handover.py`: where the others give it client connections), bound
#: and held like its relay sockets, when the native or TANK listener is enabled.
HANDOVER = "handover"
#: The listeners whose configured port every worker serves, relaying what the others own (their clients do not
#: route by partition).
SHARED = ("native", "tank")


def new_run() -> str:
    """A token naming one run of a gateway's workers' relay sockets."""
    return os.urandom(8).hex()


def relay_address(run: str, worker: int, protocol: str) -> str:
    """The abstract socket name of worker `worker`'s relay socket for `protocol` in run `run`."""
    return f"\0logway-{run}-{worker}-{protocol}"


def bind_relay(address: str) -> socket.socket:
    """A listening socket on relay `address`; an OSError naming it when it cannot be bound (e.g. taken: another
    process holds the name)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(address)
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"the relay socket @{address[1:]} cannot be bound: {exc.strerror or exc}") from exc
    except BaseException:
        sock.close()
        raise
    return sock


def same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of Unix-domain socket `sock` runs as this process's user (the
    effective user ids, which SO_PEERCRED reports)."""
    try:
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except OSError:
        return False
    return uid == os.geteuid()


def stale(sock) -> bool:
    """Whether an idle connection to another worker (a socket, or anything with `fileno()`) is readable — at its end
    (the worker closed it: it was started again), an error, or bytes nobody asked for —, so not to be used again."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))
