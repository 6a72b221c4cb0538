"""How the pump moves bytes: receive and send for one connection, counted, with the fewest syscalls and scheduler
passes the stream allows.

- `SocketTransport` (plain TCP, the usual case) drives the socket's file descriptor itself: a receive waits until
  the socket is readable (the one scheduler pass a request needs) and then reads once — or, `eager`, when the
  caller has just waited in a scheduler pass of its own (a turn, `pump.py`), reads first and waits only if nothing
  is there; a send writes at once with
  `os.writev` — header and payload in one syscall, no copy — and only waits (`wait_writable`) when the socket buffer
  is full. A file range (a stored slice the reader asked for unconverted) goes with `os.sendfile` when large; when
  small (≤ `COALESCE_FILE_BYTES`) it is read (`read()`: a pread, or the bytes the segment still holds) and leaves in
  the same `writev` as the bytes around it, so a small answer is one syscall; a slice whose bytes are in memory
  (`data`: a segment's last batch, or a backend without files) leaves in the `writev` whatever its size. trio's
  `SocketStream` would add a checkpoint to every send and a failed `recv` before every wait — two scheduler passes
  and an exception per request.
- `StreamTransport`: any other trio stream (TLS, in-memory connections) through its own `receive_some`/`send_all`;
  file ranges are read and sent.

A client must keep taking its answers: while a send waits for the client, the connection's `write_deadline` is
set `send_timeout` seconds ahead and moved on whenever the client takes more (`connections.py` closes a connection
whose deadline passed), so one that never reads cannot hold its answer, and the memory it takes, for good.

`send_now(pieces)` writes without ever waiting — what the appending task uses to answer a parked long-poll on the
spot — and returns what it could not write (None when all is out); the caller then hands the rest to `send`.
Errors: a peer that reset or closed the connection raises `trio.BrokenResourceError`, as trio's streams do; a file
shorter than its range raises OSError.
"""

from __future__ import annotations

import errno
import math
import os

import trio

from .admin.stats import ProtocolStats

__all__ = ["COALESCE_FILE_BYTES", "SocketTransport", "StreamTransport", "transport_for"]

#: File ranges up to this size are read and sent with the bytes around them (one writev) instead of sendfile.
COALESCE_FILE_BYTES = 64 * 1024
#: Bytes read per step when a file range goes through a stream without sendfile (TLS, memory).
FALLBACK_CHUNK = 1024 * 1024
#: writev takes at most this many buffers per call (IOV_MAX is 1024 on Linux).
_IOV_MAX = 1024
_BYTES = (bytes, bytearray, memoryview)
_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def transport_for(stream: trio.abc.Stream, stats: ProtocolStats, conn=None,
                  send_timeout: float = math.inf) -> "StreamTransport":
    """The transport for a connection's stream: `SocketTransport` for plain TCP, `StreamTransport` otherwise. With
    `conn` (a `connections.Connection`), a send that waits for the client sets its `write_deadline`."""
    if type(stream) is trio.SocketStream:
        return SocketTransport(stream, stats, conn, send_timeout)
    return StreamTransport(stream, stats, conn, send_timeout)


def _size(pieces) -> int:
    if isinstance(pieces, _BYTES):
        return len(pieces)
    return sum(len(p) if isinstance(p, _BYTES) else p.length for p in pieces)


class StreamTransport:
    """Any trio stream (see the module docstring)."""

    __slots__ = ("stream", "stats", "conn", "send_timeout")

    def __init__(self, stream: trio.abc.Stream, stats: ProtocolStats, conn=None,
                 send_timeout: float = math.inf) -> None:
        self.stream = stream
        self.stats = stats
        self.conn = conn
        self.send_timeout = send_timeout

    def _waiting(self) -> None:
        """A send is about to wait for the client: it has `send_timeout` from now to take more."""
        if self.conn is not None:
            self.conn.write_deadline = trio.current_time() + self.send_timeout

    def _done(self) -> None:
        if self.conn is not None:
            self.conn.write_deadline = math.inf

    async def receive(self, max_bytes: int, eager: bool = False) -> bytes:
        """At least one byte, or b"" at EOF. `eager`: the bytes are likely there already — read before waiting for
        them (a socket's `receive` does; a stream's own `receive_some` decides for itself)."""
        data = await self.stream.receive_some(max_bytes)
        self.stats.bytes_in += len(data)
        return data

    async def send(self, pieces) -> None:
        """Send a codec's output (`send(event)`): bytes, or a list of bytes and file slices (objects with
        fileno/position/length), in order."""
        self.stats.bytes_out += _size(pieces)
        if isinstance(pieces, _BYTES):
            pieces = [pieces]
        try:
            for piece in pieces:
                if not isinstance(piece, _BYTES) and piece.data is not None:  # a slice whose bytes are in memory
                    piece = piece.data
                if isinstance(piece, _BYTES):
                    for start in range(0, len(piece), FALLBACK_CHUNK):  # the deadline moves on per chunk taken
                        self._waiting()
                        await self.stream.send_all(memoryview(piece)[start:start + FALLBACK_CHUNK])
                    continue
                fd, offset, count = piece.fileno(), piece.position, piece.length
                while count > 0:
                    data = os.pread(fd, min(count, FALLBACK_CHUNK), offset)
                    if not data:
                        raise OSError(f"pread: file ended {count} bytes before the range did")
                    self._waiting()
                    await self.stream.send_all(data)
                    offset += len(data)
                    count -= len(data)
        finally:
            self._done()

    def send_now(self, pieces):
        """Nothing can be written without waiting on a generic stream: everything is left for `send`."""
        return pieces


class SocketTransport(StreamTransport):
    """A plain TCP connection, driven through its file descriptor (see the module docstring). The trio socket
    stays the owner of the descriptor (it closes it and wakes our waits when the connection closes)."""

    __slots__ = ("sock", "fd")

    def __init__(self, stream: trio.SocketStream, stats: ProtocolStats, conn=None,
                 send_timeout: float = math.inf) -> None:
        super().__init__(stream, stats, conn, send_timeout)
        self.sock = stream.socket
        self.fd = self.sock.fileno()

    async def receive(self, max_bytes: int, eager: bool = False) -> bytes:
        while True:
            if not eager:
                await trio.lowlevel.wait_readable(self.sock)
            eager = False
            try:
                data = os.read(self.fd, max_bytes)
            except BlockingIOError:
                continue  # woken, but another reader took the bytes (or a spurious wake-up)
            except _GONE as exc:
                raise trio.BrokenResourceError(f"the peer reset the connection: {exc}") from exc
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the connection was closed") from exc
                raise
            self.stats.bytes_in += len(data)
            return data

    async def send(self, pieces) -> None:
        rest = self.send_now(pieces)
        if rest is None:
            return
        try:
            while rest is not None:
                self._waiting()  # (again after each wake-up: the client took some)
                await trio.lowlevel.wait_writable(self.sock)
                rest = self.send_now(rest)
        finally:
            self._done()

    def send_now(self, pieces):
        """Write what the socket takes now; None when everything went out, else what is left (bytes and file
        slices, to pass to `send_now` or `send` again). Counts the bytes written."""
        if type(pieces) is bytes:  # most answers: one frame, one write
            return self._writev([pieces]) or None
        if isinstance(pieces, _BYTES):
            pieces = [pieces]
        buffers: list = []  # bytes-likes to writev; a large file range flushes them and goes with sendfile
        for i, piece in enumerate(pieces):
            if isinstance(piece, _BYTES):
                if piece:
                    buffers.append(piece)
                continue
            data = piece.data
            if data is not None or piece.length <= COALESCE_FILE_BYTES:  # (in memory: a slice without a file too)
                if data is None:
                    data = piece.read()
                if len(data) != piece.length:
                    raise OSError(f"pread: file ended {piece.length - len(data)} bytes before the range did")
                buffers.append(data)
                continue
            left = self._writev(buffers)
            if left:
                return left + list(pieces[i:])
            buffers = []
            left = self._sendfile(piece)
            if left is not None:
                return [left, *pieces[i + 1:]]
        left = self._writev(buffers)
        return left or None

    def _writev(self, buffers: list) -> list:
        """Write `buffers`; what was not written (empty when all was)."""
        while buffers:
            try:
                sent = os.writev(self.fd, buffers[:_IOV_MAX])
            except BlockingIOError:
                return buffers
            except _GONE as exc:
                raise trio.BrokenResourceError(f"the peer went away: {exc}") from exc
            self.stats.bytes_out += sent
            if len(buffers) <= _IOV_MAX and sent == sum(map(len, buffers)):
                return []  # the usual case: the socket took everything
            while buffers and sent >= len(buffers[0]):
                sent -= len(buffers[0])
                buffers = buffers[1:]
            if sent:
                buffers = [memoryview(buffers[0])[sent:], *buffers[1:]]
                return buffers  # the socket took only part: it is full
        return buffers

    def _sendfile(self, piece):
        """Send a file range; None when all went out, else a `_Range` of what is left."""
        fd, offset, count = piece.fileno(), piece.position, piece.length
        while count > 0:
            try:
                sent = os.sendfile(self.fd, fd, offset, count)
            except BlockingIOError:
                return _Range(piece, offset, count)
            except _GONE as exc:
                raise trio.BrokenResourceError(f"the peer went away: {exc}") from exc
            if sent == 0:  # the file is shorter than the range (truncated under us): fail loudly
                raise OSError(f"sendfile: file ended {count} bytes before the range did")
            self.stats.bytes_out += sent
            offset += sent
            count -= sent
        return None


class _Range:
    """What is left of a file slice after a partial sendfile (keeps the slice, and so its file, alive)."""

    __slots__ = ("slice", "position", "length")
    data = None  # (its bytes are in the file)

    def __init__(self, piece, position: int, length: int) -> None:
        self.slice = piece
        self.position = position
        self.length = length

    def fileno(self) -> int:
        return self.slice.fileno()

    def read(self) -> bytes:
        return os.pread(self.fileno(), self.length, self.position)
