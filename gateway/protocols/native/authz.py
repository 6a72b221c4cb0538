"""Authorization of native requests: what each one needs (Kafka's operations on the same resources, as a Kafka
client doing the same thing would need them) and the native answer to a refusal — an `Error`
"not authorized: User:alice may not WRITE TOPIC 'orders'"; the connection stays open.

| request | needs |
|---|---|
| Produce | Write on the topic |
| Fetch | Read on the topic (and Describe on the group, with `group_id`) |
| OffsetCommit · ResetGroupOffsets | Read on the group and on each topic |
| OffsetFetch | Describe on the group and on the topic |
| CreateTopic | Create on the cluster or on the topic |
| DeleteTopic · DeleteRecords | Delete on the topic |
| DescribeTopic | Describe on the topic |
| CreatePartitions | Alter on the topic |
| AlterTopicConfig / DescribeTopicConfig | AlterConfigs / DescribeConfigs on the topic |
| DeleteGroupOffsets | Delete on the group (and Read on each topic named) |
| DescribeGroup | Describe on the group |
| ListTopics · ListGroups | nothing: the answer lists only what the principal may Describe |
| DescribeAcls · DescribeUsers / CreateAcls · DeleteAcls · AlterUser | Describe / Alter on the cluster |
| DescribeQuotas / AlterQuotas | DescribeConfigs / AlterConfigs on the cluster (as Kafka's client quota APIs) |
| Ping · Auth | nothing |

ListGroups lists every group to a principal that may Describe the cluster. The console's actions
(`admin/actions.py`) go through the same checks with the principal the admin listener authenticated.
"""

from __future__ import annotations

from dataclasses import replace

from logway.codecs.native import events as nev
from logway.codecs.native import security as sec

from ...security import CLUSTER, Operation as Op, ResourceType as R

__all__ = ["NativeAuthz"]

_CLUSTER_NAME = CLUSTER[1]


def _topic(op):
    return lambda ev: [(op, R.TOPIC, ev.topic)]


def _cluster(op):
    return lambda ev: [(op, R.CLUSTER, _CLUSTER_NAME)]


def _fetch(ev: nev.FetchRequest):
    needs = [(Op.READ, R.TOPIC, ev.topic)]
    return needs if ev.group_id is None else [(Op.DESCRIBE, R.GROUP, ev.group_id), *needs]


#: request type -> what it needs: [(operation, resource type, name)], every one.
_NEEDS = {
    nev.ProduceRequest: _topic(Op.WRITE),
    nev.FetchRequest: _fetch,
    nev.OffsetCommitRequest: lambda ev: [(Op.READ, R.GROUP, ev.group_id), (Op.READ, R.TOPIC, ev.topic)],
    nev.OffsetFetchRequest: lambda ev: [(Op.DESCRIBE, R.GROUP, ev.group_id), (Op.DESCRIBE, R.TOPIC, ev.topic)],
    nev.DeleteTopicRequest: _topic(Op.DELETE),
    nev.DeleteRecordsRequest: _topic(Op.DELETE),
    nev.DescribeTopicRequest: _topic(Op.DESCRIBE),
    nev.CreatePartitionsRequest: _topic(Op.ALTER),
    nev.AlterTopicConfigRequest: _topic(Op.ALTER_CONFIGS),
    nev.DescribeTopicConfigRequest: _topic(Op.DESCRIBE_CONFIGS),
    nev.DeleteGroupOffsetsRequest: lambda ev: [(Op.DELETE, R.GROUP, ev.group_id)] + [
        (Op.READ, R.TOPIC, topic) for topic in sorted({t for t, _ in ev.partitions or ()})],
    nev.DescribeGroupRequest: lambda ev: [(Op.DESCRIBE, R.GROUP, ev.group_id)],
    sec.DescribeAclsRequest: _cluster(Op.DESCRIBE),
    sec.DescribeUsersRequest: _cluster(Op.DESCRIBE),
    sec.CreateAclsRequest: _cluster(Op.ALTER),
    sec.DeleteAclsRequest: _cluster(Op.ALTER),
    sec.AlterUserRequest: _cluster(Op.ALTER),
    sec.DescribeQuotasRequest: _cluster(Op.DESCRIBE_CONFIGS),
    sec.AlterQuotasRequest: _cluster(Op.ALTER_CONFIGS),
}


class NativeAuthz:
    """`refusal(event, who)` before a request is handled, `filtered(answer, who)` after: `who` is the
    `Connection` (or the admin listener's caller: anything with `principal`, `address`, `peer`, `protocol` and
    `internal`)."""

    def __init__(self, authorizer, steps) -> None:
        self.authorizer = authorizer
        self.steps = steps

    def refusal(self, event, who) -> nev.ErrorResponse | None:
        if self.authorizer.open:
            return None
        kind = type(event)
        if kind is nev.CreateTopicRequest:
            if self.authorizer.allowed(who.principal, who.address, Op.CREATE, R.CLUSTER, _CLUSTER_NAME):
                return None
            needs = [(Op.CREATE, R.TOPIC, event.topic)]
        elif kind is nev.ResetGroupOffsetsRequest:
            needs = [(Op.READ, R.GROUP, event.group_id)] + [(Op.READ, R.TOPIC, t) for t in self._reset_topics(event)]
        else:
            need = _NEEDS.get(kind)
            if need is None:
                return None
            needs = need(event)
        check = self.authorizer.check
        for op, rtype, name in needs:
            if not check(who, op, rtype, name):
                return nev.ErrorResponse(f"not authorized: {who.principal} may not {op.name} {rtype.name} {name!r}")
        return None

    def _reset_topics(self, ev: nev.ResetGroupOffsetsRequest) -> list[str]:
        if ev.topics is not None:
            return sorted({topic for topic, _ in ev.topics})
        return sorted({topic for topic, _ in self.steps.committed_group(ev.group_id)})

    def filtered(self, answer, who):
        """A ListTopics or ListGroups answer with only what the principal may Describe (others as they are)."""
        kind = type(answer)
        if who.internal or self.authorizer.open or kind not in (nev.ListTopicsResponse, nev.ListGroupsResponse):
            return answer
        allowed, principal, host = self.authorizer.allowed, who.principal, who.address
        if kind is nev.ListTopicsResponse:
            return replace(answer, topics=[t for t in answer.topics
                                           if allowed(principal, host, Op.DESCRIBE, R.TOPIC, t.name)])
        if allowed(principal, host, Op.DESCRIBE, R.CLUSTER, _CLUSTER_NAME):
            return answer
        return replace(answer, groups=[g for g in answer.groups
                                       if allowed(principal, host, Op.DESCRIBE, R.GROUP, g.group_id)])
