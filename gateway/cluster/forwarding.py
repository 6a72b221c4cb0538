"""Requests for partitions another worker owns, relayed to that worker (`workers: N`): `Forwarder` (pooled
internal connections to one protocol's relay sockets), `NativeForwarder` and `TankForwarder`.

Native and TANK clients do not route by partition: they connect to the port every worker serves (`workers.py`),
and the worker that takes the connection serves its own partitions and forwards a request for another worker's
partition to that worker's relay socket of the same protocol (`relays.py`: a Unix-domain socket, whose process
must run as this one's user), then answers with what the owner answered; native requests on committed offsets and
groups go to worker 0. A native answer's bytes are relayed unchanged (`RelayedResponse`: no decode and re-encode of
the records); a TANK answer is decoded, since a request spanning workers is split by owner and the answers merged
(`tank/handler.py`).

One forwarded request per internal connection at a time (the native protocol has no request ids, and a
connection per request in flight keeps TANK's out-of-order answers out of the way), so connections are pooled
per worker: a request takes an idle one (one the worker closed meanwhile — it was started again — is dropped
first) or opens one, and gives it back once answered (at most `IDLE_PER_WORKER` stay open). A long-poll parks at
the owner and holds its connection until answered. A connection whose request was cancelled (the client went
away, or a split long-poll was answered by another part) or failed is closed, never reused: its answer may still
be on the way.

Gateways on several hosts (`leases.py`) relay the same way over TCP: `dial` opens a connection to a member's TCP
relay socket and sends the cluster's preamble (`relays.preamble`).

When the owner cannot be reached or its connection breaks, `request` raises `Unreachable`: native clients get
`storage error: worker i did not answer: …`, TANK ones a system error for those partitions; the connection goes on.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import trio

from logway.codecs.errors import LocalProtocolError, RemoteProtocolError
from logway.codecs.native import (CLOSED, NEED_DATA, AuthRequest, AuthResponse, ErrorResponse, NativeConnection,
                                  RelayedResponse)
from logway.codecs.tank import TankClientConnection

from .relays import preamble, same_user, stale

log = logging.getLogger("logway.gateway.forwarding")

__all__ = ["Forwarder", "NativeForwarder", "TankForwarder", "Unreachable", "IDLE_PER_WORKER", "CONNECT_TIMEOUT",
           "unix_dial", "tcp_dial"]

#: Idle internal connections kept per worker (more are opened while more requests are in flight, then closed).
IDLE_PER_WORKER = 32
#: Seconds to connect to another worker before the request fails.
CONNECT_TIMEOUT = 5.0
_RECEIVE_BYTES = 256 * 1024


async def unix_dial(address: str) -> trio.SocketStream:
    """A connection to a worker's relay socket (ConnectionRefusedError: its process is another user's)."""
    stream = await trio.open_unix_socket(address)
    if not same_user(stream.socket):
        await stream.aclose()
        raise ConnectionRefusedError("its relay socket belongs to a process of another user")
    return stream


def tcp_dial(protocol: str, secret: str) -> Callable[[str], Any]:
    """Connections to the TCP relay sockets ("host:port") of a cluster's gateways, for `protocol`."""
    first = preamble(protocol, secret)

    async def dial(address: str) -> trio.SocketStream:
        host, _, port = address.rpartition(":")
        stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        try:
            await stream.send_all(first)
        except BaseException:
            await stream.aclose()
            raise
        return stream

    return dial


class Unreachable(Exception):
    """The owner could not be asked, or did not answer (`worker`: its index)."""

    def __init__(self, worker: int, reason: str) -> None:
        super().__init__(f"worker {worker} did not answer: {reason}")
        self.worker = worker


class _Link:
    """One internal connection to a worker's listener, with the client side of the protocol's codec."""

    __slots__ = ("stream", "codec")

    def __init__(self, stream: trio.SocketStream, codec) -> None:
        self.stream = stream
        self.codec = codec

    def stale(self) -> bool:
        """An idle connection the worker closed (or that has bytes no request asked for): not to be used."""
        return stale(self.stream.socket)


class Forwarder:
    """Relays requests to the worker that owns their partition. `addresses()`: every worker's relay socket of the
    protocol (its name) by index, or None where there is none (known once the workers have started);
    `new_codec()`: the client side of its codec; `next_answer(codec)`: the next answer, NEED_DATA or CLOSED."""

    def __init__(self, addresses: Callable[[], list], new_codec: Callable[[], Any],
                 next_answer: Callable[[Any], Any], dial=unix_dial) -> None:
        self._addresses = addresses
        self._dial = dial
        self._new_codec = new_codec
        self._next_answer = next_answer
        self._idle: dict[int, list[_Link]] = {}
        #: Requests relayed, and those that failed because the owner did not answer (metrics, tests).
        self.relayed = 0
        self.failed = 0

    async def request(self, worker: int, event) -> Any:
        """`event` answered by worker `worker`; raises `Unreachable`."""
        idle = self._idle.setdefault(worker, [])
        link = idle.pop() if idle else None
        while link is not None and link.stale():  # the worker closed it meanwhile (e.g. it was started again)
            await self._close(link)
            link = idle.pop() if idle else None
        try:
            if link is None:
                link = await self._connect(worker)
            answer = await self._exchange(link, event)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, RemoteProtocolError,
                LocalProtocolError, LookupError) as exc:
            self.failed += 1
            if link is not None:
                await self._close(link)
            log.warning("forwarding %s to worker %d failed: %s", type(event).__name__, worker, exc)
            raise Unreachable(worker, str(exc) or type(exc).__name__) from None
        except BaseException:  # cancelled: the answer may still come, so the connection is never reused
            if link is not None:
                await self._close(link)
            raise
        self.relayed += 1
        if len(idle) < IDLE_PER_WORKER:
            idle.append(link)
        else:
            await self._close(link)
        return answer

    async def _exchange(self, link: _Link, event) -> Any:
        await link.stream.send_all(link.codec.send(event))
        while True:
            answer = self._next_answer(link.codec)
            if answer is NEED_DATA:
                link.codec.receive_data(await link.stream.receive_some(_RECEIVE_BYTES))  # b"": EOF, then CLOSED
                continue
            if answer is CLOSED:
                raise ConnectionResetError("the worker closed the connection")
            return answer

    async def _connect(self, worker: int) -> _Link:
        addresses = self._addresses()
        if not 0 <= worker < len(addresses) or addresses[worker] is None:
            raise LookupError(f"no relay socket of worker {worker} is known")
        with trio.fail_after(CONNECT_TIMEOUT):
            stream = await self._dial(addresses[worker])
        return _Link(stream, self._new_codec())

    @staticmethod
    async def _close(link: _Link) -> None:
        with trio.CancelScope(shield=True):
            await link.stream.aclose()


class NativeForwarder(Forwarder):
    """Native requests, their answers relayed as bytes (`call`) or decoded (`call_decoded`, for answers merged).
    With `token` (the gateway's `auth.native_token`) every internal connection authenticates first, as a client
    must."""

    def __init__(self, addresses: Callable[[], list], max_frame: int, token: str = "", dial=unix_dial) -> None:
        super().__init__(addresses, lambda: NativeConnection("client", max_frame=max_frame),
                         NativeConnection.next_payload, dial)
        self._max_frame = max_frame
        self._token = token

    async def _connect(self, worker: int) -> _Link:
        link = await super()._connect(worker)
        if self._token:
            try:
                answer = self._decoded(await self._exchange(link, AuthRequest(self._token)))
                if type(answer) is not AuthResponse or not answer.authenticated:
                    raise ConnectionRefusedError("the worker refused the access token")
            except BaseException:
                await self._close(link)
                raise
        return link

    def _decoded(self, payload: bytes):
        """An answer's payload as its response event (raises RemoteProtocolError)."""
        codec = NativeConnection("client", max_frame=self._max_frame)
        codec.receive_data(len(payload).to_bytes(4, "big") + payload)
        return codec.next_event()

    async def call(self, worker: int, event) -> RelayedResponse | ErrorResponse:
        """`event` answered by worker `worker` (its answer's bytes), or a native error when it cannot be."""
        try:
            return RelayedResponse.of(await self.request(worker, event))
        except Unreachable as exc:
            return ErrorResponse(f"storage error: {exc}")

    async def call_decoded(self, worker: int, event):
        """`call`, with the answer decoded into its response event."""
        answer = await self.call(worker, event)
        if type(answer) is not RelayedResponse:
            return answer
        try:
            return self._decoded(answer.payload)
        except RemoteProtocolError as exc:
            return ErrorResponse(f"storage error: worker {worker} answered {exc}")


class TankForwarder(Forwarder):
    """TANK requests, their answers decoded (the handler splits requests by owner and merges the answers)."""

    def __init__(self, addresses: Callable[[], list], dial=unix_dial) -> None:
        super().__init__(addresses, TankClientConnection, TankClientConnection.next_event, dial)
