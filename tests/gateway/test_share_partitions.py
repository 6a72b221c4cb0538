"""One share-partition's records in flight (KIP-932), as plain rules: acquiring released records before new ones,
locks that expire, acknowledgements (accept, release, reject, gap) of records only their holder may acknowledge,
the delivery count limit, the start offset moving past what is done, and the durable snapshot (acquired records
saved as available, with their delivery counts)."""

from __future__ import annotations

from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.gateway.protocols.kafka.share_partitions import (ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE,
                                                              SharePartition)

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def test_acquire_acknowledge_and_the_start_offset():
    part = SharePartition(10, limit=3)
    assert part.acquire_new("a", 15, deadline=100) == (10, 14, 1)
    assert part.acquire_new("b", 15, deadline=100) is None  # nothing new
    assert part.acquired == 5 and part.state_of(12) == (ACQUIRED, 1)
    assert part.acknowledge("b", 10, 11, [ACCEPT]) == E.INVALID_RECORD_STATE  # b holds none of them
    assert part.acknowledge("a", 10, 12, [ACCEPT, GAP, RELEASE]) == E.NONE
    assert part.start == 12 and part.state_of(12) == (AVAILABLE, 1)  # 10 done, 11 a gap: archived
    assert part.acquire_available("b", 10, deadline=200) == [(12, 12, 2)]  # the released one first, count 2
    assert part.acknowledge("a", 13, 14, [REJECT]) == E.NONE
    assert part.acknowledge("b", 12, 12, [ACCEPT]) == E.NONE
    assert (part.start, part.end, part.records) == (15, 15, {})


def test_malformed_acknowledgements_change_nothing():
    part = SharePartition(0, limit=3)
    part.acquire_new("a", 4, deadline=1)
    for first, last, types in ((3, 1, [ACCEPT]), (0, 3, [ACCEPT, ACCEPT]), (0, 0, [9]), (0, 1 << 21, [ACCEPT])):
        assert part.acknowledge("a", first, last, types) == E.INVALID_REQUEST
    assert part.acknowledge("a", 2, 5, [ACCEPT]) == E.INVALID_RECORD_STATE  # 4 and 5 were never handed out
    assert [part.state_of(o) for o in range(4)] == [(ACQUIRED, 1)] * 4


def test_locks_expire_members_release_and_the_limit_archives():
    part = SharePartition(0, limit=2)
    part.acquire_new("a", 3, deadline=10)
    assert part.expire(now=5) == 0
    assert part.expire(now=10) == 3 and part.state_of(0) == (AVAILABLE, 1)
    assert part.acquire_available("b", 2, deadline=20) == [(0, 1, 2)]
    assert part.release_member("b") == 2  # the second delivery was the last allowed: archived
    assert part.state_of(0) == (ACKNOWLEDGED, 0) and part.start == 2  # (before the start: done)
    assert part.acquire_available("c", 5, deadline=30) == [(2, 2, 2)]
    assert part.acknowledge("c", 2, 2, [RELEASE]) == E.NONE
    assert part.start == 3 and not part.records


def test_snapshot_saves_acquired_records_as_available_and_restores():
    part = SharePartition(5, limit=5)
    part.acquire_new("a", 12, deadline=1)
    part.acknowledge("a", 6, 7, [ACCEPT])
    part.acknowledge("a", 8, 8, [REJECT])
    part.acknowledge("a", 9, 9, [RELEASE])
    snap = part.snapshot()
    assert snap == {"start": 5, "end": 12, "batches": [[5, 5, AVAILABLE, 1], [6, 7, ACKNOWLEDGED, 1],
                                                     [8, 8, ARCHIVED, 1], [9, 11, AVAILABLE, 1]]}
    back = SharePartition.restore(snap, limit=5)
    assert back.snapshot() == snap and back.acquired == 0
    assert back.acquire_available("b", 10, deadline=2) == [(5, 5, 2), (9, 11, 2)]
    lost = SharePartition.restore({"start": 0, "end": 3, "batches": [[1, 1, ACKNOWLEDGED, 1]]}, limit=5)
    assert [lost.state_of(o) for o in range(3)] == [(AVAILABLE, 0), (ACKNOWLEDGED, 1), (AVAILABLE, 0)]


def test_the_log_start_moving_up_drops_what_retention_deleted():
    part = SharePartition(0, limit=5)
    part.acquire_new("a", 10, deadline=1)
    part.move_start(4)
    assert part.start == 4 and min(part.records) == 4
    part.move_start(20)
    assert (part.start, part.end, part.records) == (20, 20, {})
    part.reset(7)
    assert (part.start, part.end) == (7, 7)
