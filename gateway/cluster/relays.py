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

Gateways on several hosts (`cluster/leases.py`) relay over TCP instead: each binds one relay socket
(`storage.postgres.relay_host`/`relay_port`) for both protocols. A connection to it starts with a fixed-size
preamble (`preamble`: a magic, the protocol's name, the cluster's secret — which only the gateways that can read
the database know); a connection whose preamble is not exactly that within `PREAMBLE_TIMEOUT` is closed unserved.
"""

from __future__ import annotations

import hmac
import os
import select
import socket
import struct
import sys

__all__ = ["relay_address", "bind_relay", "same_user", "stale", "new_run", "RELAYS_SUPPORTED", "HANDOVER", "SHARED",
           "preamble", "preamble_protocol", "PREAMBLE_BYTES", "PREAMBLE_TIMEOUT"]

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


#: A TCP relay connection's first bytes: magic (8), the protocol's name (8, NUL-padded), the secret (64 hex digits).
_MAGIC = b"LWRELAY1"
PREAMBLE_BYTES = 8 + 8 + 64
#: Seconds a TCP relay connection has to send its preamble before it is closed.
PREAMBLE_TIMEOUT = 5.0


def preamble(protocol: str, secret: str) -> bytes:
    """What a gateway sends first on a TCP relay connection for `protocol` (see the module docstring)."""
    name = protocol.encode()
    if len(name) > 8 or len(secret) != 64:
        raise ValueError("a relay preamble names a protocol of at most 8 bytes and a secret of 64 hex digits")
    return _MAGIC + name.ljust(8, b"\0") + secret.encode()


def preamble_protocol(data: bytes, secret: str) -> str | None:
    """The protocol a TCP relay connection's preamble (`PREAMBLE_BYTES` bytes) names, or None when it is not a
    preamble with `secret`."""
    if len(data) != PREAMBLE_BYTES or data[:8] != _MAGIC:
        return None
    if not hmac.compare_digest(data[16:], secret.encode()):
        return None
    try:
        return data[8:16].rstrip(b"\0").decode()
    except UnicodeDecodeError:
        return None


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
