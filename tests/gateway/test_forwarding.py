"""The relays of logway.gateway.cluster.forwarding against real relay sockets (abstract Unix-domain sockets, as the
workers use): native answers relayed byte for byte, internal connections pooled and reused, an idle one the owner closed
dropped before use, a cancelled request's connection never reused, an owner that cannot be reached or hangs up answered
with the native `storage error: worker i did not answer` (the client's connection goes on); TANK answers decoded past
the owner's greeting Ping, `Unreachable` when the owner is gone; a relay socket another user's process holds is never
sent a byte. The relaying through two real workers is in tests/e2e/test_workers.py."""

from __future__ import annotations

import os

import pytest
import trio

from logway.codecs.native import (CLOSED, NEED_DATA, ErrorResponse, FetchRequest, NativeConnection, PingRequest,
                                  PongResponse, ProduceRequest, RelayedResponse)
from logway.codecs.records import Record
from logway.codecs.tank import StatusRequest, StatusResponse, TankServerConnection
from logway.codecs.tank.messages import PingEvent
from logway.gateway.cluster.forwarding import NativeForwarder, TankForwarder, Unreachable
from logway.gateway.cluster.relays import PREAMBLE_BYTES, bind_relay, preamble, preamble_protocol, relay_address

from ..conftest import until
from ..other_user import CAN_SWITCH, WHY_NOT, OtherUser


async def requests_of(stream, codec):
    """The requests arriving on `stream`, parsed by the server side `codec`, until the peer closes."""
    while True:
        event = codec.next_event()
        if event is NEED_DATA:
            codec.receive_data(await stream.receive_some(65536))
        elif event is CLOSED:
            return
        else:
            yield event


def relay_listener() -> tuple[str, trio.SocketListener]:
    """A new relay socket's name, and a listener on it."""
    address = relay_address(os.urandom(4).hex(), 1, "native")
    return address, trio.SocketListener(trio.socket.from_stdlib_socket(bind_relay(address)))


def nobody_there() -> str:
    """A relay socket's name that no process holds."""
    return relay_address(os.urandom(4).hex(), 2, "native")


class Owner:
    """A native server standing in for the worker that owns a partition: Pong to Ping; a Fetch parks until
    `release` is set; `hang_up` closes a connection instead of answering."""

    def __init__(self) -> None:
        self.accepted = 0
        self.closed = 0  # connections it has closed
        self.release = trio.Event()
        self.hang_up = False
        self.close_after_answer = False
        self.address = None

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED):
        self.address, listener = relay_listener()
        task_status.started()
        await trio.serve_listeners(self.handle, [listener])

    async def handle(self, stream):
        self.accepted += 1
        codec = NativeConnection("server")
        try:
            async with stream:
                async for event in requests_of(stream, codec):
                    if self.hang_up:
                        return
                    if isinstance(event, FetchRequest):
                        await self.release.wait()
                        try:
                            await stream.send_all(codec.send(ErrorResponse("offset out of range: parked")))
                        except trio.BrokenResourceError:  # the relay gave up on it and closed (as a worker, go on)
                            return
                    else:
                        await stream.send_all(codec.send(PongResponse()))
                    if self.close_after_answer:  # e.g. the worker is stopped, or killed and started again
                        return
        finally:
            self.closed += 1


@pytest.mark.trio
async def test_answers_are_relayed_as_they_are_and_connections_reused(nursery):
    owner = Owner()
    await nursery.start(owner.serve)
    fwd = NativeForwarder(lambda: [None, owner.address], max_frame=1 << 20)
    for _ in range(5):
        answer = await fwd.call(1, PingRequest())
        assert answer == RelayedResponse(b'{"Pong":{}}', 0)
    assert owner.accepted == 1 and fwd.relayed == 5
    # two at once need two connections; both stay for the next ones
    async with trio.open_nursery() as both:
        for _ in range(2):
            both.start_soon(fwd.call, 1, PingRequest())
    assert owner.accepted == 2
    await fwd.call(1, PingRequest())
    assert owner.accepted == 2


@pytest.mark.trio
async def test_a_cancelled_request_never_leaves_its_connection_for_reuse(nursery):
    owner = Owner()
    await nursery.start(owner.serve)
    fwd = NativeForwarder(lambda: [None, owner.address], max_frame=1 << 20)
    with trio.move_on_after(0.2):  # the client went away while its long-poll was parked at the owner
        await fwd.call(1, FetchRequest("t", 0, 0, 1024, None, 10_000, 1))
    owner.release.set()  # its late answer must not become the next request's
    assert await fwd.call(1, PingRequest()) == RelayedResponse(b'{"Pong":{}}', 0)
    assert owner.accepted == 2
    error = RelayedResponse.of(b'{"Error":{"message":"offset out of range: parked"}}')
    assert await fwd.call(1, FetchRequest("t", 0, 0, 1024)) == error and error.error_code == 1


@pytest.mark.trio
async def test_an_owner_that_cannot_answer_gets_the_native_error(nursery):
    gone = nobody_there()
    owner = Owner()
    await nursery.start(owner.serve)
    fwd = NativeForwarder(lambda: [None, gone, owner.address], max_frame=1 << 20)
    refused = await fwd.call(1, PingRequest())
    assert isinstance(refused, ErrorResponse) and refused.message.startswith("storage error: worker 1 did not answer")
    unknown = await fwd.call(3, PingRequest())
    assert unknown.message == "storage error: worker 3 did not answer: no relay socket of worker 3 is known"
    owner.hang_up = True
    closed = await fwd.call(2, PingRequest())
    assert closed.message == "storage error: worker 2 did not answer: the worker closed the connection"
    owner.hang_up = False
    assert await fwd.call(2, PingRequest()) == RelayedResponse(b'{"Pong":{}}', 0)  # a new connection
    assert fwd.failed == 3 and owner.accepted == 2


@pytest.mark.trio
async def test_tank_answers_are_decoded_past_the_greeting_and_a_gone_owner_is_unreachable(nursery):
    served = []

    async def owner(stream):
        codec = TankServerConnection()
        async with stream:
            await stream.send_all(codec.send(PingEvent()))  # a TANK broker's greeting
            async for event in requests_of(stream, codec):
                served.append(event)
                await stream.send_all(codec.send(StatusResponse(event.request_id, 3, 7)))

    address, listener = relay_listener()
    nursery.start_soon(trio.serve_listeners, owner, [listener])
    fwd = TankForwarder(lambda: [None, address, nobody_there()])
    for rid in (5, 6):
        answer = await fwd.request(1, StatusRequest(rid))
        assert (answer.request_id, answer.topics, answer.partitions) == (rid, 3, 7)
    assert served == [StatusRequest(5), StatusRequest(6)] and fwd.relayed == 2
    with pytest.raises(Unreachable, match="worker 2 did not answer") as caught:
        await fwd.request(2, StatusRequest(7))
    assert caught.value.worker == 2 and fwd.failed == 1


@pytest.mark.trio
async def test_an_idle_connection_the_owner_closed_is_dropped_not_used(nursery):
    owner = Owner()
    await nursery.start(owner.serve)
    fwd = NativeForwarder(lambda: [None, owner.address], max_frame=1 << 20)
    owner.close_after_answer = True
    assert await fwd.call(1, PingRequest()) == RelayedResponse(b'{"Pong":{}}', 0)
    await until(lambda: owner.closed == 1, "the owner closed the connection")  # (its FIN is at the relay's end)
    owner.close_after_answer = False
    assert await fwd.call(1, PingRequest()) == RelayedResponse(b'{"Pong":{}}', 0)  # on a new connection
    assert owner.accepted == 2 and fwd.failed == 0


def _squat(tell, address):
    """(as another user) Serve a relay socket's name; tell "bound", then how many bytes the first connection sent."""
    sock = bind_relay(address)
    tell("bound")
    sock.settimeout(10)
    conn, _ = sock.accept()
    conn.settimeout(2)
    received = b""
    try:
        while chunk := conn.recv(65536):  # until the relay hangs up (or stops sending)
            received += chunk
    except TimeoutError:
        pass
    tell(f"received {len(received)} bytes")


@pytest.mark.skipif(not CAN_SWITCH, reason=WHY_NOT)
@pytest.mark.trio
async def test_a_relay_socket_of_another_user_is_refused_before_a_byte_is_sent():
    """Abstract socket names have no permissions: a process of another user that took a worker's name gets no
    request (a client's records) — the relay fails as if the worker could not be reached."""
    address = relay_address(os.urandom(4).hex(), 1, "native")
    squatter = OtherUser(_squat, address)
    try:
        assert await trio.to_thread.run_sync(squatter.heard) == "bound"
        fwd = NativeForwarder(lambda: [None, address], max_frame=1 << 20)
        answer = await fwd.call(1, ProduceRequest("secrets", 0, [Record(b"card 4111-1111")]))
        assert answer == ErrorResponse("storage error: worker 1 did not answer: its relay socket belongs to a "
                                       "process of another user")
        assert await trio.to_thread.run_sync(squatter.heard) == "received 0 bytes"
        assert fwd.failed == 1 and fwd.relayed == 0
    finally:
        assert await trio.to_thread.run_sync(squatter.wait) == 0


def test_a_tcp_relay_preamble_names_its_protocol_only_with_the_secret():
    secret = os.urandom(32).hex()
    first = preamble("tank", secret)
    assert len(first) == PREAMBLE_BYTES and preamble_protocol(first, secret) == "tank"
    assert preamble_protocol(first, os.urandom(32).hex()) is None  # another cluster's
    assert preamble_protocol(first[:-1], secret) is None  # cut short
    assert preamble_protocol(b"XXRELAY1" + first[8:], secret) is None  # not a relay preamble
    with pytest.raises(ValueError):
        preamble("a-long-protocol", secret)
