"""Transactions across workers (`workers: N`): the transaction coordinator's `Peers` — its requests to the other
workers, as native `TxnEndRequest` / `TxnQueryRequest` over their native relay sockets (`forwarding.py`) — and
`serve`, the answer a worker's relay socket gives them (`TxnResponse`). The coordination itself is
`transactions.py`'s; these requests are internal: on a client's connection they are unknown request types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from logway.codecs.native import ErrorResponse, TxnEndRequest, TxnQueryRequest, TxnResponse

from ..errors import FAILURES
from ..transactions import Peers, PeerUnavailable, TransactionCoordinator

if TYPE_CHECKING:  # pragma: no cover
    from .seam import Cluster

__all__ = ["make_peers", "serve", "INTERNAL_REQUESTS", "REQUEST_TIMEOUT"]

#: Seconds a worker waits for another's answer to a transaction request (a worker that is stopped, not dead).
REQUEST_TIMEOUT = 30.0

#: The native requests only the other workers send (on a relay socket), with their wire names: a client's
#: connection is answered as for a request type that does not exist.
INTERNAL_REQUESTS = {TxnEndRequest: "TxnEnd", TxnQueryRequest: "TxnQuery"}


def _why(answer) -> str:
    return answer.message if type(answer) is ErrorResponse else f"answered {type(answer).__name__}"


def make_peers(cluster: "Cluster") -> Peers:
    """The `Peers` of this member of `cluster`, asking the others on their native relay sockets (pooled connections
    of their own, authenticated with `auth.native_token` as every relay is); one that has not answered in
    `REQUEST_TIMEOUT` seconds counts as unavailable (the coordinator tries again later)."""
    forwarder = cluster.native_forwarder()

    async def ask(to: int, event):
        with trio.move_on_after(REQUEST_TIMEOUT):
            return await forwarder.call_decoded(to, event)
        return ErrorResponse(f"no answer in {REQUEST_TIMEOUT:g} s")

    async def end(to: int, producer_id: int, epoch: int, committed: bool, partitions: list) -> None:
        answer = await ask(to, TxnEndRequest(producer_id, epoch, committed, list(partitions)))
        if type(answer) is not TxnResponse or answer.state != "ok":
            raise PeerUnavailable(f"worker {to} did not end the transaction of producer {producer_id}: "
                                  f"{_why(answer)}")

    async def query(producer_id: int, epoch: int, topic: str, partition: int) -> str:
        coordinator = cluster.coordinator()  # (a cluster's can move)
        answer = await ask(coordinator, TxnQueryRequest(producer_id, epoch, topic, partition))
        if type(answer) is not TxnResponse or answer.state == "ok":
            raise PeerUnavailable(f"the transaction coordinator (worker {coordinator}) did not answer: "
                                  f"{_why(answer)}")
        return answer.state

    return Peers(cluster.me, cluster.leader, end, query, lambda: cluster.is_coordinator)


async def serve(coordinator: TransactionCoordinator | None, event) -> TxnResponse | ErrorResponse:
    """The answer to an internal transaction request from another worker."""
    peers = coordinator.peers if coordinator is not None else None
    if peers is None:
        return ErrorResponse("transactions: this gateway is not one of several workers")
    if type(event) is TxnQueryRequest:
        if not peers.coordinating:
            return ErrorResponse(f"transactions: worker {peers.index} is not the coordinator")
        return TxnResponse(coordinator.query(event.producer_id, event.epoch, event.topic, event.partition))
    try:
        await coordinator.end_here(event.producer_id, event.epoch, event.committed, event.partitions)
    except FAILURES as exc:  # e.g. the disk full: the coordinator tries again
        return ErrorResponse(f"storage error: {exc}")
    return TxnResponse("ok")
