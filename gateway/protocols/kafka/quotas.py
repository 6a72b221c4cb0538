"""Client quotas on the Kafka protocol (`security.quotas`): each request is charged to its connection's user and
client id — the bytes of the records a Produce carries and a Fetch answers, and the time the gateway spent on it —
and a request that takes a budget past its bound is answered at once with `throttle_time_ms` set, after which the
connection reads no further request until that time has passed (KIP-219: the broker mutes the channel; the client,
told the time, waits too). So a client past its quota slows down; the others are not touched.

A Fetch that parks is charged when its answer is built (by whoever builds it), its time on the event loop only.
"""

from __future__ import annotations

from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.primitives import piece_length

from ...security.quotas import ConnectionQuota

__all__ = ["KafkaQuotas"]


def _produced(body) -> int:
    return sum(piece_length(pd.records) for td in body.topic_data for pd in td.partition_data
               if pd.records is not None)


def _fetched(answer) -> int:
    return sum(piece_length(pd.records) for t in answer.responses for pd in t.partitions if pd.records is not None)


class KafkaQuotas(ConnectionQuota):
    """One Kafka connection's quota state (`security.quotas.ConnectionQuota`), and how its answers carry it."""

    __slots__ = ()

    def charged(self, request, answer, seconds: float):
        """`answer` (a response body, or None: acks=0) to `request`, which took `seconds` of the gateway's time, with
        its throttle time when the connection is past a quota (and the connection muted for as long)."""
        key = request.api_key
        delay = self.charge(seconds, produced=_produced(request.body) if key == P.API_KEY else 0,
                            fetched=_fetched(answer) if key == F.API_KEY and answer is not None else 0)
        if delay <= 0:
            return answer
        self.mute(delay)
        if answer is not None and hasattr(answer, "throttle_time_ms"):
            answer.throttle_time_ms = max(answer.throttle_time_ms or 0, int(delay * 1000))
        return answer
