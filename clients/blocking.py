"""The blocking side every blocking client stands on: a socket byte stream, and a codec driven over it.

`BlockingStream.connect(host, port, connect_timeout=, timeout=, ssl_context=, server_hostname=)` opens a TCP
connection (TCP_NODELAY; TLS when `ssl_context` is given, the handshake within the connect timeout). Its reads take
an absolute `deadline` of `time.monotonic()` (`deadline(timeout)`; None waits forever) and raise `TimeoutError`
past it; a reset reads as EOF (b"" / 0 bytes), since the peer is gone either way. Writes are bounded by the
stream's `timeout`. `send_eof()` half-closes, `closed_by_peer(timeout)` tells whether the peer hangs up.

`BlockingClient` is a sans-I/O codec (any `logway.codecs` connection: `receive_data`, `next_event`, `NEED_DATA`,
`CLOSED`) over such a stream: `send_raw(bytes)`, `next_event(deadline)` (the next event, receiving as needed; CLOSED
at EOF), `send_eof`, `closed_by_peer`, `close`, and the context manager.

`drive(operation, request)` runs a client operation written once for both flavours: a generator that yields
requests and receives their answers, returning its result (the trio twin is `trio_io.drive`).
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import Any, Callable, Generator

from logway.codecs.stream import NEED_DATA

__all__ = ["BlockingStream", "BlockingClient", "drive"]

#: Bytes asked from the socket per read when nothing says more: answers are often megabytes (fetches).
RECEIVE_BYTES = 1024 * 1024


class BlockingStream:
    """A connected socket (see the module docstring)."""

    def __init__(self, sock: socket.socket, timeout: float | None = None) -> None:
        self.sock = sock
        self.timeout = timeout  # bound on each write; reads take a deadline
        self._sock_timeout: float | None | object = object()  # what settimeout last set (a syscall saved)

    @classmethod
    def connect(cls, host: str, port: int, *, connect_timeout: float | None = 10.0, timeout: float | None = None,
                ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None) -> "BlockingStream":
        sock = socket.create_connection((host, port), timeout=connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
        except BaseException:
            sock.close()
            raise
        return cls(sock, timeout)

    @staticmethod
    def deadline(timeout: float | None) -> float | None:
        return None if timeout is None else time.monotonic() + timeout

    def _settimeout(self, value: float | None) -> None:
        if value != self._sock_timeout:
            self.sock.settimeout(value)
            self._sock_timeout = value

    def _wait_until(self, deadline: float | None) -> None:
        if deadline is None:
            self._settimeout(None)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer from the gateway in time")
        self._settimeout(left)

    def send_all(self, data) -> None:
        self._settimeout(self.timeout)
        self.sock.sendall(data)

    def receive_some(self, max_bytes: int = RECEIVE_BYTES, deadline: float | None = None) -> bytes:
        """At least one byte, or b"" at EOF (or a reset); TimeoutError past `deadline`."""
        self._wait_until(deadline)
        try:
            return self.sock.recv(max_bytes)
        except socket.timeout:
            raise TimeoutError("no answer from the gateway in time") from None
        except (ConnectionResetError, ssl.SSLEOFError):
            return b""

    def receive_into(self, view: memoryview, deadline: float | None = None) -> int:
        """Fill the start of `view`: the number of bytes (0 at EOF or a reset); TimeoutError past `deadline`."""
        self._wait_until(deadline)
        try:
            return self.sock.recv_into(view)
        except socket.timeout:
            raise TimeoutError("no answer from the gateway in time") from None
        except (ConnectionResetError, ssl.SSLEOFError):
            return 0

    def send_eof(self) -> None:
        """Half-close: the peer reads EOF, we can still read its answers."""
        self.sock.shutdown(socket.SHUT_WR)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the peer closes the connection within `timeout` s (what it sends meanwhile is dropped);
        False when it is still open then."""
        deadline = self.deadline(timeout)
        while True:
            try:
                if not self.receive_some(65536, deadline):
                    return True
            except TimeoutError:
                return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class BlockingClient:
    """A codec over a `BlockingStream` (see the module docstring). Subclasses set `codec` and `timeout`."""

    codec: Any
    stream: BlockingStream
    timeout: float | None = None
    receive_bytes = RECEIVE_BYTES

    @property
    def sock(self) -> socket.socket:
        """The socket, for what no method covers (socket options, a shutdown of one direction)."""
        return self.stream.sock

    def send_raw(self, data) -> None:
        """Write bytes as they are (hand-made, prepared or hostile frames)."""
        self.stream.send_all(data)

    def next_event(self, deadline: float | None = None) -> Any:
        """The codec's next event, receiving as needed: an answer, or CLOSED once the peer closed."""
        codec = self.codec
        while True:
            event = codec.next_event()
            if event is not NEED_DATA:
                return event
            codec.receive_data(self.stream.receive_some(self.receive_bytes, deadline))

    def _deadline(self, timeout: float | None) -> float | None:
        return self.stream.deadline(self.timeout if timeout is None else timeout)

    def send_eof(self) -> None:
        self.stream.send_eof()

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        return self.stream.closed_by_peer(timeout)

    def close(self) -> None:
        self.stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def drive(operation: Generator[Any, Any, Any], request: Callable[[Any], Any]) -> Any:
    """Run `operation` (a generator yielding requests, each answered with `request(item)`); its return value."""
    try:
        item = next(operation)
        while True:
            item = operation.send(request(item))
    except StopIteration as done:
        return done.value
