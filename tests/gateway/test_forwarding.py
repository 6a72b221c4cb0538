"""The relays of logway.gateway.forwarding against real sockets on 127.0.0.1: native answers relayed byte for byte,
internal connections pooled and reused, an idle one the owner closed dropped before use, a cancelled request's
connection never reused, an owner that cannot be reached or hangs up answered with the native `storage error:
worker i did not answer` (the client's connection goes on); TANK answers decoded past the owner's greeting Ping,
`Unreachable` when the owner is gone. The relaying through two real workers is in tests/e2e/test_workers.py."""

from __future__ import annotations

import socket

import pytest
import trio

from logway.codecs.native import (CLOSED, NEED_DATA, ErrorResponse, FetchRequest, NativeConnection, PingRequest,
                                  PongResponse, RelayedResponse)
from logway.codecs.tank import StatusRequest, StatusResponse, TankServerConnection
from logway.codecs.tank.messages import PingEvent
from logway.gateway.forwarding import NativeForwarder, TankForwarder, Unreachable


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


class Owner:
    """A native server standing in for the worker that owns a partition: Pong to Ping; a Fetch parks until
    `release` is set; `hang_up` closes a connection instead of answering."""

    def __init__(self) -> None:
        self.accepted = 0
        self.release = trio.Event()
        self.hang_up = False
        self.close_after_answer = False
        self.address = None

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.address = listeners[0].socket.getsockname()[:2]
        task_status.started()
        await trio.serve_listeners(self.handle, listeners)

    async def handle(self, stream):
        self.accepted += 1
        codec = NativeConnection("server")
        async with stream:
            async for event in requests_of(stream, codec):
                if self.hang_up:
                    return
                if isinstance(event, FetchRequest):
                    await self.release.wait()
                    await stream.send_all(codec.send(ErrorResponse("offset out of range: parked")))
                else:
                    await stream.send_all(codec.send(PongResponse()))
                if self.close_after_answer:  # e.g. the worker is stopped, or killed and started again
                    return


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
    with socket.socket() as s:  # a port nothing listens on any more
        s.bind(("127.0.0.1", 0))
        gone = s.getsockname()[:2]
    owner = Owner()
    await nursery.start(owner.serve)
    fwd = NativeForwarder(lambda: [None, gone, owner.address], max_frame=1 << 20)
    refused = await fwd.call(1, PingRequest())
    assert isinstance(refused, ErrorResponse) and refused.message.startswith("storage error: worker 1 did not answer")
    unknown = await fwd.call(3, PingRequest())
    assert unknown.message == "storage error: worker 3 did not answer: no listener of worker 3 is known"
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

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    nursery.start_soon(trio.serve_listeners, owner, listeners)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gone = s.getsockname()[:2]
    fwd = TankForwarder(lambda: [None, listeners[0].socket.getsockname()[:2], gone])
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
    await trio.sleep(0.05)  # the owner's close reaches the idle connection
    owner.close_after_answer = False
    assert await fwd.call(1, PingRequest()) == RelayedResponse(b'{"Pong":{}}', 0)  # on a new connection
    assert owner.accepted == 2 and fwd.failed == 0
