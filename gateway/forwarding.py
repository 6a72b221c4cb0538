"""`NativeForwarder`: native requests for partitions another worker owns, relayed to that worker (`workers: N`).

Native clients do not route by partition: they talk to worker 0's native listener, which serves its own
partitions and forwards a request for another worker's partition to that worker's native listener (every worker
runs one, on the configured port + its index), then relays the answer's bytes unchanged (`RelayedResponse`: no
decode and re-encode of the records). One forwarded request per internal connection at a time — the native
protocol has no request ids — so connections are pooled per worker: a request takes an idle one or opens one,
and gives it back once answered (at most `IDLE_PER_WORKER` stay open). A long-poll parks at the owner and holds
its connection until answered. A connection whose request was cancelled (the client went away) or failed is
closed, never reused: its answer may still be on the way.

When the owner cannot be reached or its connection breaks, the client gets the native error `storage error:
worker i did not answer: …` and the connection goes on.
"""

from __future__ import annotations

import logging
from typing import Callable

import trio

from logway.codecs.errors import LocalProtocolError, RemoteProtocolError
from logway.codecs.native import CLOSED, NEED_DATA, ErrorResponse, NativeConnection, RelayedResponse

log = logging.getLogger("logway.gateway.forwarding")

__all__ = ["NativeForwarder", "IDLE_PER_WORKER", "CONNECT_TIMEOUT"]

#: Idle internal connections kept per worker (more are opened while more requests are in flight, then closed).
IDLE_PER_WORKER = 32
#: Seconds to connect to another worker before the request is answered with an error.
CONNECT_TIMEOUT = 5.0
_RECEIVE_BYTES = 256 * 1024


class _Link:
    """One internal connection to a worker's native listener."""

    __slots__ = ("stream", "codec")

    def __init__(self, stream: trio.SocketStream, max_frame: int) -> None:
        self.stream = stream
        self.codec = NativeConnection("client", max_frame=max_frame)

    async def call(self, event) -> bytes:
        """Send `event`, return the answer's JSON payload (raises OSError, trio errors, ProtocolError)."""
        await self.stream.send_all(self.codec.send(event))
        while True:
            payload = self.codec.next_payload()
            if payload is NEED_DATA:
                data = await self.stream.receive_some(_RECEIVE_BYTES)
                self.codec.receive_data(data)  # b"": end of stream, then CLOSED
                continue
            if payload is CLOSED:
                raise ConnectionResetError("the worker closed the connection")
            return payload


class NativeForwarder:
    """Relays native requests to the worker that owns their partition; `addresses()` is every worker's native
    listener (host, port) by index, known once the workers have started."""

    def __init__(self, addresses: Callable[[], list], max_frame: int) -> None:
        self._addresses = addresses
        self._max_frame = max_frame
        self._idle: dict[int, list[_Link]] = {}
        #: Requests relayed, and those answered with an error because the owner did not answer (metrics, tests).
        self.relayed = 0
        self.failed = 0

    async def call(self, worker: int, event) -> RelayedResponse | ErrorResponse:
        """`event` answered by worker `worker` (its answer's bytes), or a native error when it cannot be."""
        idle = self._idle.setdefault(worker, [])
        link = idle.pop() if idle else None
        try:
            if link is None:
                link = await self._connect(worker)
            payload = await link.call(event)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, RemoteProtocolError,
                LocalProtocolError, LookupError) as exc:
            self.failed += 1
            if link is not None:
                await self._close(link)
            log.warning("forwarding %s to worker %d failed: %s", type(event).__name__, worker, exc)
            return ErrorResponse(f"storage error: worker {worker} did not answer: {exc or type(exc).__name__}")
        except BaseException:  # cancelled (the client went away): the answer may still come, so never reuse it
            if link is not None:
                await self._close(link)
            raise
        self.relayed += 1
        if len(idle) < IDLE_PER_WORKER:
            idle.append(link)
        else:
            await self._close(link)
        return RelayedResponse.of(payload)

    async def call_decoded(self, worker: int, event):
        """`call`, with the answer decoded into its response event (for answers this worker merges)."""
        answer = await self.call(worker, event)
        if type(answer) is not RelayedResponse:
            return answer
        codec = NativeConnection("client", max_frame=self._max_frame)
        codec.receive_data(len(answer.payload).to_bytes(4, "big") + answer.payload)
        try:
            return codec.next_event()
        except RemoteProtocolError as exc:
            return ErrorResponse(f"storage error: worker {worker} answered {exc}")

    async def _connect(self, worker: int) -> _Link:
        addresses = self._addresses()
        if not 0 <= worker < len(addresses) or addresses[worker] is None:
            raise LookupError(f"no native listener of worker {worker} is known")
        host, port = addresses[worker]
        with trio.fail_after(CONNECT_TIMEOUT):
            stream = await trio.open_tcp_stream(host, port)
        return _Link(stream, self._max_frame)

    @staticmethod
    async def _close(link: _Link) -> None:
        with trio.CancelScope(shield=True):
            await link.stream.aclose()

    async def aclose(self) -> None:
        """Close every idle connection (the gateway is stopping)."""
        for links in self._idle.values():
            while links:
                await self._close(links.pop())
