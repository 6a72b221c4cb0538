"""Handing a client's connection to the worker that owns its partitions (`workers: N`): `HandOvers` (one per
native and TANK protocol: the giving side, and the counts) and `listen_handover` (the taking side, on the worker's
hand-over socket). The design: docs/scaling.md, "Handing connections over".

A native or TANK connection lands on whichever worker the kernel picks (the shared port). When a request on it is
wholly for another worker's partitions (the handler answers `pump.HandOver`), nothing else is in flight, the
connection is plain TCP and was never handed over or tried before, the pump calls `HandOvers.give`. The worker
sends the hand-over over a link to the owner's hand-over socket (a Unix-domain socket in the abstract namespace,
bound and held by the supervisor like the relay sockets: `relays.py`, `SO_PEERCRED` checked both ways). A link is
opened once and kept (`IDLE_LINKS` per worker, one hand-over at a time each): a new one counts only once the owner
greeted it with `HELLO` (a worker that is down or starting leaves the connection in the socket's backlog, and no
descriptor should wait there). On it go, in one message, the connection's descriptor (`SCM_RIGHTS`) and

    magic b"LWH1" | meta length u32 BE | data length u32 BE | meta (JSON: protocol, session state) | data

where data is the request re-encoded by the protocol's client codec, then whatever the connection's codec still held
unframed (a pipelined request, part of the next frame). The owner checks every bound (one descriptor, of a TCP socket;
meta ≤ `MAX_META`; data ≤ the protocol's frame limit plus one receive; the rest of a message within `TAKE_TIMEOUT` of
its first bytes), admits the connection under its own client limits (`limits.max_connections`, `max_connections_per_ip`:
at a limit it refuses, and the giver keeps the connection), answers one byte (`ACK`) and serves it with the pump from
that state (`pump.Resumed`): no greeting, the codec fed the data first. The giver, on the acknowledgement, forgets the
connection without answering (the owner does) and closes its own descriptor, which leaves the connection open: the owner
holds another. Whatever goes wrong before the acknowledgement — the owner unreachable, shutting down, refusing, dying —
the owner's copy is closed (and the link) and the giver relays the request as before. The giver waits for the answer as
a relayed request waits for the owner's: as long as the link is open (a stopped owner delays both alike), so that it
always knows which of the two serves the connection — two workers must never read one connection.
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

from ..listeners import serve, serve_backlog
from ..pump import HandOver, Resumed
from ..reading import RECEIVE_CHUNK
from .relays import same_user, stale

log = logging.getLogger("logway.gateway.handover")

__all__ = ["HandOvers", "listen_handover", "HEADER", "MAGIC", "HELLO", "ACK", "MAX_META", "IDLE_LINKS",
           "CONNECT_TIMEOUT", "TAKE_TIMEOUT"]

MAGIC = b"LWH1"
#: magic, meta length, data length.
HEADER = struct.Struct(">4sII")
#: The owner's first byte on a new link, as soon as it accepted it: it is up and takes hand-overs.
HELLO = b"\x00"
#: The owner's answer once it holds the connection.
ACK = b"\x01"
#: Bytes of the meta JSON at most (a protocol name and a session state of a few flags).
MAX_META = 4096
#: Bytes asked for by the first read of a message: a small one (a request of a few KiB) arrives in that read.
FIRST_READ = 64 * 1024
#: Open links kept per worker between hand-overs (each carries one hand-over at a time).
IDLE_LINKS = 4
#: Seconds the giver tries to reach the owner (its HELLO) and send the message before relaying instead.
CONNECT_TIMEOUT = 2.0
#: Seconds the owner waits for the rest of a message once its first bytes came, before refusing it.
TAKE_TIMEOUT = 5.0
_INT = array.array("i").itemsize
#: Room for a few descriptors: more than one is refused, and every one received is closed.
_ANCILLARY = socket.CMSG_SPACE(4 * _INT)


class _Refused(Exception):
    """The owner does not take the connection (the reason, for the log)."""


class _Link:
    """One link between two workers: a non-blocking Unix-domain socket driven directly — an operation that can be
    done at once is done without a scheduler pass (trio's socket methods take one each), one that cannot waits for
    the socket."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock

    @classmethod
    def of(cls, stream: trio.SocketStream) -> "_Link":
        """The link over a connected trio socket stream (which is not to be used any more)."""
        return cls(socket.socket(fileno=stream.socket.detach()))

    async def send(self, data: bytes, fd: int | None = None) -> None:
        """All of `data`, with descriptor `fd` (SCM_RIGHTS) on its first byte."""
        view = memoryview(data)
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))] if fd is not None else []
        while view:
            try:
                sent = self.sock.sendmsg([view], ancillary)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
                continue
            view, ancillary = view[sent:], []

    async def receive(self, size: int, fds: list[int] | None = None) -> bytes:
        """At most `size` bytes (b"": the other end closed the link); with `fds`, the descriptors that came with
        them are appended to it (more than fit: _Refused, each received one still appended)."""
        while True:
            try:
                if fds is None:
                    return self.sock.recv(size)
                data, ancillary, flags, _ = self.sock.recvmsg(size, _ANCILLARY)
                break
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.sock)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", payload[:len(payload) - len(payload) % _INT]))
        if flags & socket.MSG_CTRUNC:
            raise _Refused("more descriptors than one")
        return data

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


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
        self._idle: dict[int, list[_Link]] = {}  # open links to each worker's hand-over socket
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
        message = b"".join((HEADER.pack(MAGIC, len(meta), len(request) + len(rest)), meta, request, rest))
        link = self._idle_link(worker)
        try:
            with trio.fail_after(CONNECT_TIMEOUT):
                if link is None:
                    link = await self._connect(addresses[worker])
                await link.send(message, stream.socket.fileno())
            # The answer is awaited as a relayed request's is, for as long as the owner keeps the link open: an ACK
            # (it serves the connection now), or a refusal or its end — then it holds no copy of the descriptor.
            answer = await link.receive(1)
        except (OSError, trio.TooSlowError, _Refused) as exc:
            # The owner did not get the whole message, or refused it: it does not serve the connection.
            self.refused += 1
            log.warning("handing a %s connection to worker %d failed (relayed instead): %s", self.protocol, worker,
                        str(exc) or type(exc).__name__)
            if link is not None:
                link.close()
            return False
        except BaseException:  # cancelled: the owner may take it or not, but this link is never used again
            if link is not None:
                link.close()
            raise
        if answer != ACK:
            self.refused += 1
            log.info("worker %d did not take a %s connection (relayed instead)", worker, self.protocol)
            link.close()
            return False
        self.given += 1
        idle = self._idle.setdefault(worker, [])
        if len(idle) < IDLE_LINKS:
            idle.append(link)
        else:
            link.close()
        return True

    def _idle_link(self, worker: int) -> _Link | None:
        """An open link to the worker's hand-over socket that it did not close meanwhile (e.g. started again)."""
        idle = self._idle.get(worker)
        while idle:
            link = idle.pop()
            if not stale(link.sock):
                return link
            link.close()
        return None

    @staticmethod
    async def _connect(address: str) -> _Link:
        """A new link to a hand-over socket, once its worker greeted it."""
        link = _Link.of(await trio.open_unix_socket(address))
        try:
            if not same_user(link.sock):
                raise _Refused("its hand-over socket belongs to a process of another user")
            if await link.receive(1) != HELLO:  # (not while it is down, or started again: in its backlog)
                raise _Refused("it closed the hand-over socket's connection unanswered")
        except BaseException:
            link.close()
            raise
        return link


async def listen_handover(sock: socket.socket, protocols: dict, connections, limits, conn_nursery: trio.Nursery,
                          *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Take the connections the other workers hand over on this worker's hand-over socket (`sock`, bound and
    listening: `relays.bind_relay`) and serve each in `conn_nursery` with its protocol of `protocols` (by name).
    A link carries one hand-over after another, each acknowledged before the next is sent; the first refusal (or
    anything unexpected) closes it."""
    task_status.started()

    async def accepted(stream: trio.SocketStream) -> None:
        link = _Link.of(stream)
        if not same_user(link.sock):
            log.warning("hand-over socket: a process of another user connected; closed")
            link.close()
            return
        try:
            await link.send(HELLO)
        except OSError:
            link.close()  # (the giver went away: a link left in the backlog while this worker was down)
            return
        await take_over(link)

    async def take_over(link: _Link) -> None:
        """The next connection handed over on `link`, served in this task — the link, in a new one, waits for the
        one after (so a connection's first answer does not wait for a task to start); or the link's end."""
        try:
            taken = await _admit(link, protocols, connections)
        except BaseException:
            link.close()
            raise
        if taken is None:
            link.close()
            return
        conn_nursery.start_soon(take_over, link)
        protocol, conn, tcp, resumed = taken
        protocol.hand_over.taken += 1
        await serve(tcp, conn, protocol, connections, limits, None, resumed)

    await serve_backlog(trio.SocketListener(trio.socket.from_stdlib_socket(sock)), accepted, conn_nursery)


async def _admit(link: _Link, protocols: dict, connections):
    """The next connection handed over on `link`, admitted and acknowledged — (protocol, conn, its stream,
    `Resumed`) — or None: the giver closed the link between two messages, or the message is refused (every
    descriptor received is closed; the giver relays, and the link is to be closed)."""
    fds: list[int] = []
    tcp = conn = None
    try:
        first = await link.receive(FIRST_READ, fds)  # (an idle link waits here as long as the giver keeps it)
        if not first:
            return None  # the giver closed the link between two messages
        with trio.fail_after(TAKE_TIMEOUT):
            protocol, state, data = await _take(link, protocols, fds, first)
        tcp = trio.SocketStream(trio.socket.from_stdlib_socket(_tcp_socket(fds)))
        conn = connections.admit_handed(protocol.name, tcp)
        if conn is None:
            raise _Refused("shutting down, or a connection limit reached")
        await link.send(ACK)  # from here on the connection is this worker's
        taken, tcp = (protocol, conn, tcp, Resumed(state, data)), None
        return taken
    except (OSError, trio.TooSlowError, _Refused) as exc:
        log.warning("hand-over refused: %s", str(exc) or type(exc).__name__)
        if conn is not None:
            connections.release(conn)
        return None
    finally:
        for fd in fds:  # (not taken: closed, so the client's connection stays the giver's alone)
            _close_fd(fd)
        if tcp is not None:
            with trio.CancelScope(shield=True):
                await tcp.aclose()


async def _take(link: _Link, protocols: dict, fds: list[int], first: bytes):
    """(protocol, session state, data) of the message whose first bytes are `first` (a small message: all of it,
    in one read); its descriptors are appended to `fds`."""
    buf = bytearray(first)

    async def up_to(size: int) -> None:
        while len(buf) < size:
            chunk = await link.receive(min(size - len(buf), RECEIVE_CHUNK), fds)
            if not chunk:
                raise _Refused("the giving worker closed the hand-over")
            buf.extend(chunk)

    await up_to(HEADER.size)
    magic, meta_size, data_size = HEADER.unpack_from(buf)
    if magic != MAGIC or len(fds) != 1:
        raise _Refused(f"not a hand-over (magic {magic!r}, {len(fds)} descriptor(s))")
    if meta_size > MAX_META:
        raise _Refused(f"meta of {meta_size} bytes exceeds {MAX_META}")
    await up_to(HEADER.size + meta_size)
    try:
        meta = orjson.loads(buf[HEADER.size:HEADER.size + meta_size])
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
    end = HEADER.size + meta_size + data_size
    if len(buf) > end:
        raise _Refused(f"{len(buf) - end} bytes more than the message declares")
    await up_to(end)
    return protocol, state, bytes(buf[HEADER.size + meta_size:])


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
