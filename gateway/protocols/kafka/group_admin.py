"""The Kafka group admin APIs: DeleteGroups (42) and OffsetDelete (47), as Kafka's group coordinator answers them.

A group exists while the coordinator holds state for it or it has committed offsets in the shared offset store
(a consumer that only commits, with manual assignment, never joins). Offsets are the offset store's: what a
native client committed under the same group id goes too. Deletions are durable when answered (the offset store
is synced under every `storage.flush`).

- DeleteGroups: a group with members (or in a rebalance) is NON_EMPTY_GROUP; an Empty one loses its state and
  every committed offset — a share group its share-partition state and configs; an unknown one (no state, no
  offsets) is GROUP_ID_NOT_FOUND; an empty id is INVALID_GROUP_ID. Classic, consumer (KIP-848) and share groups
  alike.
- OffsetDelete: the group-level error is GROUP_ID_NOT_FOUND / INVALID_GROUP_ID / NON_EMPTY_GROUP (an active group
  of another protocol type than "consumer"), with no partitions in the answer; otherwise each partition is
  UNKNOWN_TOPIC_OR_PARTITION when it does not exist, GROUP_SUBSCRIBED_TO_TOPIC when an active consumer group's
  (classic or KIP-848) members subscribe to its topic, else its offset is deleted (NONE, whether or not one was
  committed).
A storage failure while deleting answers COORDINATOR_NOT_AVAILABLE (retriable; nothing is acknowledged).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...errors import FAILURES
from .errors import error_code

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

log = logging.getLogger("logway.gateway.kafka")

__all__ = ["delete_groups", "offset_delete"]


def _has_offsets(broker: "BrokerState", group_id: str) -> bool:
    try:
        return bool(broker.steps.committed_group(group_id))
    except ValueError:  # a name the offset store cannot hold: it holds nothing for it
        return False


async def delete_groups(broker: "BrokerState", body, version, conn):
    results = []
    for group_id in body.groups_names:
        results.append(G.DeletableGroupResult(group_id=group_id, error_code=await _delete_group(broker, group_id)))
    return G.DeleteGroupsResponse(throttle_time_ms=0, results=results)


async def _delete_group(broker: "BrokerState", group_id: str) -> int:
    if not group_id:
        return E.INVALID_GROUP_ID
    shares = broker.share_groups
    if group_id in shares.groups or shares.has_state(group_id):  # a share group: its state goes
        if shares.holds(group_id):
            return E.NON_EMPTY_GROUP
        try:
            await shares.delete_group(group_id)
        except FAILURES as exc:
            log.error("deleting the state of share group %r failed: %s", group_id, exc)
            return E.COORDINATOR_NOT_AVAILABLE
        return E.NONE
    if group_id in broker.consumer_groups.groups:  # a KIP-848 group: only an empty one
        code = E.NONE if broker.consumer_groups.forget_if_empty(group_id) else E.NON_EMPTY_GROUP
    else:
        code = broker.coordinator.delete_group(group_id)
    if code == E.GROUP_ID_NOT_FOUND and _has_offsets(broker, group_id):
        code = E.NONE  # a group that only ever committed offsets
    if code != E.NONE:
        return code
    try:
        await broker.steps.delete_group_offsets(group_id)
    except ValueError:
        return E.INVALID_GROUP_ID
    except FAILURES as exc:
        log.error("deleting the offsets of group %r failed: %s", group_id, exc)
        return E.COORDINATOR_NOT_AVAILABLE
    return E.NONE


async def offset_delete(broker: "BrokerState", body, version, conn):
    group_id = body.group_id
    if not group_id:
        return O.OffsetDeleteResponse(error_code=E.INVALID_GROUP_ID, throttle_time_ms=0, topics=[])
    if group_id in broker.consumer_groups.groups:  # a KIP-848 group: its members' subscriptions
        code, subscribed = E.NONE, broker.consumer_groups.subscribed_topics(group_id)
    else:
        code, subscribed = broker.coordinator.offset_delete_status(group_id)
    if code == E.GROUP_ID_NOT_FOUND and _has_offsets(broker, group_id):
        code = E.NONE
    if code != E.NONE:
        return O.OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
    steps = broker.steps
    answers: list[tuple[str, list[list[int]]]] = []  # (topic, [[partition, code]]) in request order
    doomed: list[tuple[str, int]] = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            code = E.NONE
            try:
                steps.partition(t.name, p.partition_index)
            except FAILURES as exc:
                code = error_code(exc)
            else:
                if subscribed is None or t.name in subscribed:
                    code = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    doomed.append((t.name, p.partition_index))
            parts.append([p.partition_index, code])
        answers.append((t.name, parts))
    if doomed:
        try:
            await steps.delete_group_offsets(group_id, doomed)
        except ValueError:
            return O.OffsetDeleteResponse(error_code=E.INVALID_GROUP_ID, throttle_time_ms=0, topics=[])
        except FAILURES as exc:
            log.error("deleting offsets of group %r failed: %s", group_id, exc)
            return O.OffsetDeleteResponse(error_code=E.COORDINATOR_NOT_AVAILABLE, throttle_time_ms=0, topics=[])
    return O.OffsetDeleteResponse(error_code=E.NONE, throttle_time_ms=0, topics=[
        O.OffsetDeleteResponseTopic(name=name, partitions=[
            O.OffsetDeleteResponsePartition(partition_index=p, error_code=c) for p, c in parts])
        for name, parts in answers])
