"""Handing a client's connection to the worker that owns its partitions (`workers: N`): `HandOvers` (one per
native and TANK protocol: the giving side, and the counts) and `listen_handover` (the taking side, on the worker's
hand-over socket). The design: docs/scaling.md, "Handing connections over".

A native or TANK connection lands on whichever worker the kernel picks (the shared port). When a request on it is
wholly for another worker's partitions (the handler answers `pump.HandOver`), nothing else is in flight, the
connection is plain TCP and was never handed over or tried before, the pump calls `HandOvers.give`: the worker
connects to the owner's hand-over socket (a Unix-domain socket in the abstract namespace, bound and held by the
supervisor like the relay sockets: `relays.py`, `SO_PEERCRED` checked both ways), waits for the owner's `HELLO`
(a byte it sends as soon as it accepts: a worker that is down or starting leaves the connection in the socket's
backlog, and no descriptor should wait there) and sends, in one message, the connection's descriptor (`SCM_RIGHTS`)
and

    magic b"LWH1" | meta length u32 BE | data length u32 BE | meta (JSON: protocol, session state) | data

where data is the request re-encoded by the protocol's client codec, then whatever the connection's codec still
held unread (a pipelined request, part of the next frame). The owner checks every bound (one descriptor, of a TCP
socket; meta ≤ `MAX_META`; data ≤ the protocol's frame limit plus one receive), admits the connection outside its
client limits (the giver admitted the client under its own), answers one byte (`ACK`) and serves it with the pump
from that state (`pump.Resumed`): no greeting, the codec fed the data first. The giver, on the acknowledgement,
forgets the connection without answering (the owner does) and closes its own descriptor, which leaves the
connection open: the owner holds another. Whatever goes wrong before the acknowledgement — the owner unreachable,
shutting down, refusing — the owner closes its copy and the giver relays the request as before. Only if the owner
neither acknowledges nor refuses within `ACK_TIMEOUT` (it hangs) does the giver let the connection go unanswered:
it cannot know whether the owner serves it, and two workers must never read one connection.
"""

from __future__ import annotations

import array
import logging
import socket
import struct
from typing import Any, Callable

import orjson
import trio

from logway.codecs.errors import LocalProtocolError

from .listeners import serve, serve_backlog
from .pump import HandOver, Resumed
from .reading import RECEIVE_CHUNK
from .relays import same_user

log = logging.getLogger("logway.gateway.handover")

__all__ = ["HandOvers", "listen_handover", "HEADER", "MAGIC", "HELLO", "ACK", "MAX_META", "CONNECT_TIMEOUT",
           "TAKE_TIMEOUT", "ACK_TIMEOUT"]

MAGIC = b"LWH1"
#: magic, meta length, data length.
HEADER = struct.Struct(">4sII")
#: The owner's first byte, as soon as it accepted the giver's connection: it is up and takes hand-overs.
HELLO = b"\x00"
#: The owner's answer once it holds the connection.
ACK = b"\x01"
#: Bytes of the meta JSON at most (a protocol name and a session state of a few flags).
MAX_META = 4096
#: Seconds the giver tries to reach the owner (its HELLO) and send the message before relaying instead.
CONNECT_TIMEOUT = 2.0
#: Seconds the owner waits for a whole message before refusing it.
TAKE_TIMEOUT = 5.0
#: Seconds the giver waits for the owner's answer (longer than TAKE_TIMEOUT: a live owner answers or refuses first).
ACK_TIMEOUT = 10.0
_INT = array.array("i").itemsize
#: Room for a few descriptors: more than one is refused, and every one received is closed.
_ANCILLARY = socket.CMSG_SPACE(4 * _INT)


class _Refused(Exception):
    """The owner does not take the connection (the reason, for the log)."""


class HandOvers:
    """The hand-overs of one protocol (`protocol`: its name). `addresses()`: every worker's hand-over socket by
    index, or None where there is none (known once the workers have started); `encode(event)`: the request's bytes
    as a client sends them; `max_request`: the most bytes of one request frame the protocol's codec takes (a
    request whose re-encoding is longer is relayed: the owner's codec would refuse it)."""

    def __init__(self, protocol: str, addresses: Callable[[], list], encode: Callable[[Any], bytes],
                 max_request: int) -> None:
        self.protocol = protocol
        self._addresses = addresses
        self._encode = encode
        self.max_request = max_request
        #: The most bytes a message's data may hold: the request, then at most one receive's worth (what the codec
        #: held unframed after it).
        self.max_data = max_request + RECEIVE_CHUNK
        #: Connections this worker gave away, those the owner did not take (relayed instead), and those this
        #: worker took from the others (metrics, tests).
        self.given = 0
        self.refused = 0
        self.taken = 0

    async def give(self, handover: HandOver, stream: trio.SocketStream, codec, session) -> bool:
        """Give the connection on `stream` to worker `handover.worker`, its request `handover.event` to answer:
        True when it is the owner's now (the caller forgets it), False when not (the caller relays the request)."""
        worker = handover.worker
        addresses = self._addresses()
        rest, eof = codec.trailing_data
        if eof or not 0 <= worker < len(addresses) or addresses[worker] is None:
            return False  # (a client that already closed its side: its last answers are written from here)
        try:
            request = self._encode(handover.event)
        except LocalProtocolError as exc:
            log.warning("not handing over a %s connection: its request does not encode: %s", self.protocol, exc)
            return False
        meta = orjson.dumps({"protocol": self.protocol, "state": session.handover_state()})
        if len(meta) > MAX_META or len(request) > self.max_request or len(request) + len(rest) > self.max_data:
            return False  # (relayed: the relay sends the request in the same frame, and fails as the owner would)
        data = request + rest
        unix = None
        try:
            with trio.fail_after(CONNECT_TIMEOUT):
                unix = await trio.open_unix_socket(addresses[worker])
                if not same_user(unix.socket):
                    raise _Refused("its hand-over socket belongs to a process of another user")
                if await unix.receive_some(1) != HELLO:  # (not while it is down, or started again: in its backlog)
                    raise _Refused("it closed the hand-over socket's connection unanswered")
                head = HEADER.pack(MAGIC, len(meta), len(data)) + meta
                fds = array.array("i", [stream.socket.fileno()])
                sent = await unix.socket.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                await unix.send_all(head[sent:] + data)
            with trio.move_on_after(ACK_TIMEOUT) as waiting:
                answer = await unix.receive_some(1)
        except (OSError, trio.BrokenResourceError, trio.TooSlowError, _Refused) as exc:
            # The owner did not get the whole message, or refused it: it does not serve the connection.
            self.refused += 1
            log.warning("handing a %s connection to worker %d failed (relayed instead): %s", self.protocol, worker,
                        str(exc) or type(exc).__name__)
            return False
        finally:
            if unix is not None:
                with trio.CancelScope(shield=True):
                    await unix.aclose()
        if waiting.cancelled_caught:
            self.given += 1
            log.warning("worker %d neither took nor refused a %s connection in %.0f s: let go (it serves or closes "
                        "it)", worker, self.protocol, ACK_TIMEOUT)
            return True
        if answer != ACK:
            self.refused += 1
            log.info("worker %d did not take a %s connection (relayed instead)", worker, self.protocol)
            return False
        self.given += 1
        return True


async def listen_handover(sock: socket.socket, protocols: dict, connections, limits, conn_nursery: trio.Nursery,
                          *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Take the connections the other workers hand over on this worker's hand-over socket (`sock`, bound and
    listening: `relays.bind_relay`) and serve each in `conn_nursery` with its protocol of `protocols` (by name)."""
    task_status.started()

    async def accepted(unix: trio.SocketStream) -> None:
        taken = await _admit(unix, protocols, connections)
        if taken is not None:
            protocol, conn, tcp, resumed = taken
            protocol.hand_over.taken += 1
            await serve(tcp, conn, protocol, connections, limits, resumed=resumed)

    await serve_backlog(trio.SocketListener(trio.socket.from_stdlib_socket(sock)), accepted, conn_nursery)


async def _admit(unix: trio.SocketStream, protocols: dict, connections):
    """The connection handed over on `unix`, admitted and acknowledged — (protocol, conn, its stream, `Resumed`) —
    or None: refused (every descriptor received is closed; the giver relays). `unix` is closed either way."""
    fds: list[int] = []
    tcp = conn = None
    try:
        if not same_user(unix.socket):
            raise _Refused("a process of another user connected")
        with trio.fail_after(TAKE_TIMEOUT):
            await unix.send_all(HELLO)
            protocol, state, data = await _take(unix, protocols, fds)
        tcp = trio.SocketStream(trio.socket.from_stdlib_socket(_tcp_socket(fds)))
        conn = connections.admit_handed(protocol.name, tcp)
        if conn is None:
            raise _Refused("shutting down")
        await unix.send_all(ACK)  # from here on the connection is this worker's
        taken, tcp = (protocol, conn, tcp, Resumed(state, data)), None
        return taken
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, _Refused) as exc:
        log.warning("hand-over refused: %s", str(exc) or type(exc).__name__)
        if conn is not None:
            connections.release(conn)
        return None
    finally:
        for fd in fds:  # (not taken: closed, so the client's connection stays the giver's alone)
            _close_fd(fd)
        with trio.CancelScope(shield=True):
            if tcp is not None:
                await tcp.aclose()
            await unix.aclose()


async def _take(unix: trio.SocketStream, protocols: dict, fds: list[int]):
    """(protocol, session state, data) of the message on `unix`; its descriptors are appended to `fds`."""
    head = b""
    while len(head) < HEADER.size:
        chunk, ancillary, flags, _ = await unix.socket.recvmsg(HEADER.size - len(head), _ANCILLARY)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", payload[:len(payload) - len(payload) % _INT]))
        if flags & socket.MSG_CTRUNC:
            raise _Refused("more descriptors than one")
        if not chunk:
            raise _Refused("the giving worker closed the hand-over")
        head += chunk
    magic, meta_size, data_size = HEADER.unpack(head)
    if magic != MAGIC or len(fds) != 1:
        raise _Refused(f"not a hand-over (magic {magic!r}, {len(fds)} descriptor(s))")
    if meta_size > MAX_META:
        raise _Refused(f"meta of {meta_size} bytes exceeds {MAX_META}")
    try:
        meta = orjson.loads(await _exactly(unix, meta_size))
        protocol = protocols[meta["protocol"]]
        state = meta["state"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise _Refused("unreadable meta, or a protocol this worker does not serve") from None
    if protocol.hand_over is None:
        raise _Refused(f"{protocol.name} connections are not handed over")
    if type(state) is not dict:
        raise _Refused("a session state that is not an object")
    if data_size > protocol.hand_over.max_data:
        raise _Refused(f"data of {data_size} bytes exceeds {protocol.hand_over.max_data}")
    return protocol, state, await _exactly(unix, data_size)


async def _exactly(unix: trio.SocketStream, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = await unix.receive_some(min(size - len(out), RECEIVE_CHUNK))
        if not chunk:
            raise _Refused("the giving worker closed the hand-over")
        out += chunk
    return bytes(out)


def _tcp_socket(fds: list[int]) -> socket.socket:
    """The one descriptor received, as a non-blocking socket (taken out of `fds`); _Refused unless it is TCP."""
    try:
        sock = socket.socket(fileno=fds[0])  # (not a socket at all: OSError, and the descriptor stays in `fds`)
    except OSError:
        raise _Refused("the descriptor is not a TCP connection") from None
    fds.pop()
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        sock.close()
        raise _Refused("the descriptor is not a TCP connection")
    sock.setblocking(False)
    return sock


def _close_fd(fd: int) -> None:
    try:
        socket.close(fd)
    except OSError:
        pass
