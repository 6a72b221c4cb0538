"""The socket transport's reads (`gateway/transport.py`): a receive waits for the socket to be readable — one
scheduler pass — and reads once; an `eager` receive (the pump's, once a connection has waited for its turn) reads
first and costs no pass when the bytes are there, and waits for them when they are not. Real connected sockets; the
passes counted with a trio instrument."""

from __future__ import annotations

import socket

import trio

from logway.gateway.admin.stats import ProtocolStats
from logway.gateway.transport import SocketTransport


class Steps(trio.abc.Instrument):
    """Counts the steps the current task takes (each resumption after a scheduler pass)."""

    def __init__(self) -> None:
        self.task = trio.lowlevel.current_task()
        self.count = 0

    def before_task_step(self, task) -> None:
        if task is self.task:
            self.count += 1


async def _pair():
    a, b = socket.socketpair()
    return SocketTransport(trio.SocketStream(trio.socket.from_stdlib_socket(a)), ProtocolStats("test")), b


async def test_an_eager_receive_of_bytes_already_there_takes_no_scheduler_pass():
    transport, peer = await _pair()
    with peer:
        peer.sendall(b"request")
        steps = Steps()
        trio.lowlevel.add_instrument(steps)
        try:
            assert await transport.receive(1024, eager=True) == b"request"
            eager = steps.count
            peer.sendall(b"again")
            assert await transport.receive(1024) == b"again"  # the usual receive: it waits for readability
            waited = steps.count - eager
        finally:
            trio.lowlevel.remove_instrument(steps)
        assert (eager, waited) == (0, 1)
        assert transport.stats.bytes_in == len(b"requestagain")


async def test_an_eager_receive_with_nothing_there_waits_for_the_bytes():
    transport, peer = await _pair()
    with peer:
        async with trio.open_nursery() as nursery:
            async def later():
                await trio.testing.wait_all_tasks_blocked()  # the receive found nothing and waits for the socket
                peer.sendall(b"late")
            nursery.start_soon(later)
            with trio.fail_after(5):
                assert await transport.receive(1024, eager=True) == b"late"
        peer.close()
        assert await transport.receive(1024, eager=True) == b""  # EOF, read at once
