"""The trio side every async client stands on: a trio byte stream, and a codec driven over it.

`await TrioStream.connect(host, port, connect_timeout=, ssl_context=, server_hostname=)` opens a TCP stream (trio
sets TCP_NODELAY) and, with `ssl_context`, a `trio.SSLStream` whose handshake completes within the connect
timeout (`TimeoutError` otherwise). `TrioStream(stream)` wraps any trio `Stream` already open. Reads take an
absolute `deadline` of `trio.current_time()` (`deadline(timeout)`; None waits, cancellable as anything in trio)
and raise `TimeoutError` past it; a broken stream (a reset) reads as EOF (b""), and a write to one raises
`ConnectionClosed`.

`TrioClient` is a sans-I/O codec over such a stream, mirroring `blocking.BlockingClient` with awaitables:
`send_raw`, `next_event(deadline)`, `send_eof`, `closed_by_peer`, `aclose`, and `async with`. `drive(operation,
request)` runs an operation generator (see `blocking.drive`) with an async `request`.

trio is imported on first use: the blocking clients share modules with these, and a Spark task that only needs
the blocking Kafka client should not pay for importing trio.
"""

from __future__ import annotations

import ssl
from typing import Any, Awaitable, Callable, Generator

from logway.codecs.stream import NEED_DATA

from .errors import ConnectionClosed

__all__ = ["TrioStream", "TrioClient", "drive"]

#: Bytes asked from the stream per read when nothing says more.
RECEIVE_BYTES = 1024 * 1024


class TrioStream:
    """A connected trio stream (see the module docstring)."""

    def __init__(self, stream) -> None:
        self.stream = stream

    @classmethod
    async def connect(cls, host: str, port: int, *, connect_timeout: float | None = 10.0, ssl_context=None,
                      server_hostname: str | None = None) -> "TrioStream":
        import trio

        with trio.move_on_after(float("inf") if connect_timeout is None else connect_timeout) as scope:
            stream = await trio.open_tcp_stream(host, port)
            if ssl_context is not None:
                stream = trio.SSLStream(stream, ssl_context, server_hostname=server_hostname or host)
                try:
                    await stream.do_handshake()
                except BaseException as exc:
                    await trio.aclose_forcefully(stream)
                    if isinstance(exc, trio.BrokenResourceError) and isinstance(exc.__cause__, ssl.SSLError):
                        raise exc.__cause__ from None  # e.g. SSLCertVerificationError, as the blocking stream
                    raise
            return cls(stream)
        assert scope.cancelled_caught
        raise TimeoutError(f"cannot connect to {host}:{port} within {connect_timeout} s")

    @staticmethod
    def deadline(timeout: float | None) -> float | None:
        if timeout is None:
            return None
        import trio

        return trio.current_time() + timeout

    async def send_all(self, data) -> None:
        import trio

        try:
            await self.stream.send_all(data)
        except trio.BrokenResourceError as exc:
            raise ConnectionClosed(f"the connection broke: {exc.__cause__ or exc}") from exc

    async def receive_some(self, max_bytes: int = RECEIVE_BYTES, deadline: float | None = None) -> bytes:
        """At least one byte, or b"" at EOF (or a reset); TimeoutError past `deadline`."""
        import trio

        try:
            if deadline is None:
                return await self.stream.receive_some(max_bytes)
            with trio.move_on_at(deadline):
                return await self.stream.receive_some(max_bytes)
        except trio.BrokenResourceError:
            return b""
        raise TimeoutError("no answer from the gateway in time")

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def closed_by_peer(self, timeout: float = 5.0) -> bool:
        deadline = self.deadline(timeout)
        while True:
            try:
                if not await self.receive_some(65536, deadline):
                    return True
            except TimeoutError:
                return False

    async def aclose(self) -> None:
        await self.stream.aclose()


class TrioClient:
    """A codec over a `TrioStream` (see the module docstring). Subclasses set `codec` and `timeout`."""

    codec: Any
    transport: TrioStream
    timeout: float | None = None
    receive_bytes = RECEIVE_BYTES

    @property
    def stream(self):
        """The trio stream underneath, for what no method covers."""
        return self.transport.stream

    async def send_raw(self, data) -> None:
        """Write bytes as they are (hand-made, prepared or hostile frames)."""
        await self.transport.send_all(data)

    async def next_event(self, deadline: float | None = None) -> Any:
        """The codec's next event, receiving as needed: an answer, or CLOSED once the peer closed."""
        codec = self.codec
        while True:
            event = codec.next_event()
            if event is not NEED_DATA:
                return event
            codec.receive_data(await self.transport.receive_some(self.receive_bytes, deadline))

    def _deadline(self, timeout: float | None) -> float | None:
        return self.transport.deadline(self.timeout if timeout is None else timeout)

    async def send_eof(self) -> None:
        await self.transport.send_eof()

    async def closed_by_peer(self, timeout: float = 5.0) -> bool:
        return await self.transport.closed_by_peer(timeout)

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


async def drive(operation: Generator[Any, Any, Any], request: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run `operation` (a generator yielding requests, each answered with `await request(item)`); its result."""
    try:
        item = next(operation)
        while True:
            item = operation.send(await request(item))
    except StopIteration as done:
        return done.value
