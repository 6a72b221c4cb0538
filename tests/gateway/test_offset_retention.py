"""Retention of committed offsets (gateway/offset_retention.py) over a real offset store in a temp dir, with a test
clock: nothing forgotten within one retention of the start; a group with members keeps everything however old; a group
without members loses each offset older than the retention once its last activity (the first pass that saw it without
members) is that old too; an offset committed since stays; a retention of 0 keeps offsets for good. Through a real
gateway and a kafka-python consumer group: tests/e2e/test_offset_retention.py."""

from __future__ import annotations

import trio

from logway.gateway.offset_retention import OffsetRetention
from logway.storage.offsets import OffsetStore

T0 = 1_700_000_000.0
DAY_MS = 86_400_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def ms(self, days: float = 0) -> int:
        return int(self.now * 1000 + days * DAY_MS)


def test_offsets_expire_by_age_and_by_their_groups_activity(tmp_path):
    clock = Clock()
    with OffsetStore(tmp_path) as store:
        store.commit("standalone", "t", 0, 5, commit_time_ms=clock.ms(-30))  # from before the start
        store.commit("standalone", "t", 1, 6, commit_time_ms=clock.ms(3))  # (as if committed on day 3)
        store.commit("members", "t", 0, 7, commit_time_ms=clock.ms(-30))
        store.commit("left", "t", 0, 8, commit_time_ms=clock.ms(-30))
        retention = OffsetRetention(store, 7 * DAY_MS, lambda: set(), clock=clock)
        clock.now += 6 * 86_400
        assert retention.expire({"members", "left"}) == 0  # within one retention of the start: nothing
        clock.now += 2 * 86_400  # day 8: "left" seen without members for the first time
        assert retention.expire({"members"}) == 1  # "standalone"'s 38-day-old offset
        assert set(store.fetch_group("standalone")) == {("t", 1)}  # 5 days old: kept
        clock.now += 5.5 * 86_400  # day 13.5
        store.commit("standalone", "t", 2, 9, commit_time_ms=clock.ms())
        assert retention.expire({"members"}) == 1  # "standalone"'s (t, 1), 10.5 days old
        assert store.fetch_group("left")  # its last activity: day 8
        clock.now += 2 * 86_400  # day 15.5
        assert retention.expire({"members"}) == 1  # "left"'s
        assert store.groups() == ["members", "standalone"]
        assert set(store.fetch_group("standalone")) == {("t", 2)}  # committed on day 13.5: kept
        assert retention.expire(set()) == 0  # "members" had members until the last pass: active now
        clock.now += 8 * 86_400
        assert retention.expire(set()) == 2
        assert store.groups() == []
        assert retention.expired == 5  # (the metric logway_expired_total{what="committed_offsets"})


async def test_the_loop_expires_on_its_own_and_a_retention_of_0_keeps_everything(tmp_path):
    clock = Clock()
    with OffsetStore(tmp_path) as store:
        store.commit("g", "t", 0, 1, commit_time_ms=clock.ms())
        kept = OffsetRetention(store, 0, lambda: set(), clock=clock)
        with trio.fail_after(5):
            await kept.run()  # returns at once: nothing to do, ever
        retention = OffsetRetention(store, 50, lambda: set(), clock=clock)  # 50 ms
        clock.now += 1
        async with trio.open_nursery() as nursery:
            nursery.start_soon(retention.run)
            with trio.fail_after(5):
                while store.groups():
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
