"""The server-side assignors of KIP-848 consumer groups: every partition of a subscribed topic to exactly one member
subscribed to it; `uniform` balanced (within one partition where subscriptions allow) and sticky, `range` in
contiguous ranges per topic in member-id order."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logway.gateway.protocols.kafka.assignors import ASSIGNORS, range_assignor, uniform

A, B, C = uuid.UUID(int=10), uuid.UUID(int=11), uuid.UUID(int=12)
TOPICS = {"a": (A, 6), "b": (B, 3), "c": (C, 1)}


def flat(assignment):
    return {m: sorted((t.int, p) for t, ps in parts.items() for p in ps) for m, parts in assignment.items()}


def check_complete(assignment, subscriptions, topics):
    owners = {}
    for member, parts in assignment.items():
        for topic_id, ps in parts.items():
            name = next(n for n, (t, _) in topics.items() if t == topic_id)
            assert name in subscriptions[member], (member, name)
            for p in ps:
                assert (topic_id, p) not in owners, "a partition has two owners"
                owners[(topic_id, p)] = member
    subscribed = {n for names in subscriptions.values() for n in names}
    assert set(owners) == {(t, p) for n, (t, count) in topics.items() if n in subscribed for p in range(count)}


def test_range_assigns_contiguous_ranges_per_topic_in_member_order():
    subs = {"m2": {"a", "b"}, "m1": {"a", "b"}, "m3": {"a"}}
    out = range_assignor(subs, TOPICS, {})
    check_complete(out, subs, TOPICS)
    assert out["m1"] == {A: {0, 1}, B: {0, 1}} and out["m2"] == {A: {2, 3}, B: {2}} and out["m3"] == {A: {4, 5}}


def test_uniform_balances_and_keeps_partitions_where_they_are():
    subs = {"m1": {"a", "b", "c"}, "m2": {"a", "b", "c"}}
    first = uniform(subs, TOPICS, {})
    check_complete(first, subs, TOPICS)
    assert sorted(len(flat(first)[m]) for m in subs) == [5, 5]
    subs3 = {**subs, "m3": {"a", "b", "c"}}
    second = uniform(subs3, TOPICS, first)
    check_complete(second, subs3, TOPICS)
    assert sorted(len(flat(second)[m]) for m in subs3) == [3, 3, 4]
    for m in ("m1", "m2"):  # sticky: the old members only gave partitions away, none moved between them
        assert set(flat(second)[m]) <= set(flat(first)[m])
    assert uniform(subs3, TOPICS, second) == second  # stable once balanced


def test_uniform_with_different_subscriptions_gives_each_topic_only_to_its_subscribers():
    subs = {"m1": {"a"}, "m2": {"a", "b"}, "m3": {"c"}}
    out = uniform(subs, TOPICS, {})
    check_complete(out, subs, TOPICS)
    counts = {m: len(ps) for m, ps in flat(out).items()}
    assert counts == {"m1": 5, "m2": 4, "m3": 1} or counts == {"m1": 4, "m2": 5, "m3": 1}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_assignor_is_complete_and_uniform_balanced_for_like_subscriptions(data):
    members = [f"m{i}" for i in range(data.draw(st.integers(1, 6)))]
    counts = data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=4))
    topics = {f"t{i}": (uuid.UUID(int=100 + i), n) for i, n in enumerate(counts)}
    names = sorted(topics)
    subs = {m: set(names) for m in members}
    previous = ASSIGNORS["uniform"](subs, topics, {})
    random.Random(7).shuffle(members)
    subs = {m: set(names) for m in members[:data.draw(st.integers(1, len(members)))]}
    for name, assignor in ASSIGNORS.items():
        out = assignor(subs, topics, previous)
        check_complete(out, subs, topics)
        if name == "uniform":
            loads = [sum(len(ps) for ps in out[m].values()) for m in subs]
            assert max(loads) - min(loads) <= 1


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_no_members_or_no_topics(name):
    assert ASSIGNORS[name]({}, TOPICS, {}) == {}
    assert ASSIGNORS[name]({"m": {"zz"}}, TOPICS, {}) == {"m": {}}
