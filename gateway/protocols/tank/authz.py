"""Authorization of TANK requests. TANK has no authentication request: a connection's principal is its client
certificate's (mutual TLS) or the one its listener names (`listeners.tank.principal`, `User:ANONYMOUS` by default),
and it is held to the ACLs like any other. TANK has no "not authorized" code either, so each refusal is the
nearest answer TANK has — or a closed connection where it has none:

| request | needs | refused with |
|---|---|---|
| Produce | Write on each topic | READ_ONLY for that topic's entries (the others are appended) |
| Consume | Read on each topic | that topic answered as unknown (the others are served) |
| DiscoverPartitions | Describe on the topic | the unknown topic's answer (no partitions) |
| DiscoverTopics | nothing | lists only the topics the principal may Describe |
| CreateTopic | Create on the cluster or on the topic | READ_ONLY |
| ReloadConf | AlterConfigs on the topic | UNKNOWN_TOPIC |
| Status | Describe on the cluster | the connection is closed |

`TankAuthz.split(request, conn)` is called by the session before the handler: the part to serve and the answer to
the refused part (merged into the served part's answer by `merge`), or the whole answer when nothing is left.
"""

from __future__ import annotations

from dataclasses import replace

from logway.codecs.tank import (ConsumeRequest, ConsumeResponse, ConsumeTopicResult, CreateTopicError,
                                CreateTopicRequest, CreateTopicResponse, DiscoverPartitionsRequest,
                                DiscoverPartitionsResponse, DiscoverTopicsResponse, ProduceError, ProduceRequest,
                                ProduceResponse, ProduceResult, ReloadConfError, ReloadConfRequest,
                                ReloadConfResponse, StatusRequest)

from ...pump import Close
from ...security import CLUSTER, Operation as Op, ResourceType as R

__all__ = ["TankAuthz"]


class TankAuthz:
    def __init__(self, authorizer) -> None:
        self.authorizer = authorizer

    def _denied(self, conn, op: Op, names) -> set[str]:
        """The names of `names` (topics) `conn` may not do `op` on (each refusal counted and logged once)."""
        check = self.authorizer.check
        return {name for name in dict.fromkeys(names) if not check(conn, op, R.TOPIC, name)}

    def split(self, request, conn):
        """(request to serve or None, answer to its refused part or None): see the module docstring."""
        if self.authorizer.open:
            return request, None
        kind = type(request)
        if kind is ProduceRequest:
            denied = self._denied(conn, Op.WRITE, (e.topic for e in request.entries))
            if not denied:
                return request, None
            refused = ProduceResponse(request.request_id, [ProduceResult(e.topic, e.partition, ProduceError.READ_ONLY)
                                                           for e in request.entries if e.topic in denied])
            kept = [e for e in request.entries if e.topic not in denied]
            return (replace(request, entries=kept) if kept else None), refused
        if kind is ConsumeRequest:
            denied = self._denied(conn, Op.READ, (t.name for t in request.topics))
            if not denied:
                return request, None
            refused = ConsumeResponse(request.request_id, [
                ConsumeTopicResult(t.name, unknown=True, requested_count=len(t.partitions))
                for t in request.topics if t.name in denied])
            kept = [t for t in request.topics if t.name not in denied]
            return (replace(request, topics=kept) if kept else None), refused
        if kind is DiscoverPartitionsRequest:
            if self._denied(conn, Op.DESCRIBE, (request.topic,)):
                return None, DiscoverPartitionsResponse(request.request_id, request.topic, [])
        elif kind is CreateTopicRequest:
            if not (self.authorizer.allowed(conn.principal, conn.address, Op.CREATE, *CLUSTER)
                    or self.authorizer.check(conn, Op.CREATE, R.TOPIC, request.topic)):
                return None, CreateTopicResponse(request.request_id, request.topic, CreateTopicError.READ_ONLY)
        elif kind is ReloadConfRequest:
            if not self.authorizer.check(conn, Op.ALTER_CONFIGS, R.TOPIC, request.topic):
                return None, ReloadConfResponse(request.request_id, request.topic, request.partition,
                                                ReloadConfError.UNKNOWN_TOPIC)
        elif kind is StatusRequest:
            if not self.authorizer.check(conn, Op.DESCRIBE, *CLUSTER):
                return None, Close()
        return request, None

    @staticmethod
    def merge(request, served, refused):
        """The answer to `request`: `served` (the kept part's answer) with `refused` put back in request order."""
        if refused is None:
            return served
        if served is None:
            return refused
        if type(refused) is ProduceResponse:  # (results match entries by position)
            by_key = {}
            for r in served.results + refused.results:
                by_key.setdefault((r.topic, r.partition), []).append(r)
            return ProduceResponse(request.request_id, [by_key[(e.topic, e.partition)].pop(0)
                                                        for e in request.entries])
        topics = {t.name: t for t in served.topics + refused.topics}
        return ConsumeResponse(request.request_id, [topics[t.name] for t in request.topics if t.name in topics])

    def visible(self, answer, conn):
        """A DiscoverTopics answer with only the topics `conn` may Describe (any other answer as it is)."""
        if type(answer) is not DiscoverTopicsResponse or conn.internal or self.authorizer.open:
            return answer
        allowed = self.authorizer.allowed
        return replace(answer, topics=[t for t in answer.topics
                                       if allowed(conn.principal, conn.address, Op.DESCRIBE, R.TOPIC, t.name)])
