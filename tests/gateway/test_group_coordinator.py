"""The Kafka consumer-group coordinator (gateway/protocols/kafka/coordinator.py, group_state.py) driven through its public API
with trio time and short timeouts: handshakes, rebalances, syncs, heartbeats, expiry, static membership,
describe/list, offset-commit checks, cancellation and shutdown. The coordinator reads trio's clock only, so the tests
that wait for a timeout run on virtual time (`autojump_clock`): the timeouts play out exactly, at once, and a loaded
machine cannot stretch them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.gateway.protocols.kafka import coordinator as C
from logway.gateway.protocols.kafka.group_state import Group, GroupState, Member
from logway.gateway.protocols.kafka.coordinator import GroupCoordinator

PROTOS = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]
SESSION = 10_000  # long enough never to expire by accident
REBALANCE = 10_000
HOST = "127.0.0.1"


class Bg:
    """A call running in the test's nursery; `await bg.result()` waits (boundedly) for its answer."""

    def __init__(self, nursery: trio.Nursery, coro) -> None:
        self.done = trio.Event()
        self.value = None

        async def runner():
            self.value = await coro
            self.done.set()

        nursery.start_soon(runner)

    async def result(self, timeout: float = 1.0):
        with trio.fail_after(timeout):
            await self.done.wait()
        return self.value


def join(c, member_id, group="g", *, instance=None, protocols=PROTOS, session=SESSION, rebalance=REBALANCE,
         ptype="consumer", client_id="cli", require_known=True):
    return c.join_group(group, member_id, instance, ptype, protocols, session, rebalance, client_id, HOST,
                        require_known)


async def handshake(c, group="g", *, session=SESSION, client_id="cli") -> str:
    r = await join(c, "", group, session=session, client_id=client_id)
    assert r.error_code == E.MEMBER_ID_REQUIRED, r
    return r.member_id


async def stable_pair(c, nursery, group="g", *, session_a=SESSION, session_b=SESSION, rebalance=REBALANCE):
    """Members a (leader) and b, generation 1, assignments b"A"/b"B" distributed: the group is Stable."""
    a = await handshake(c, group, session=session_a)
    b = await handshake(c, group, session=session_b)
    ja = Bg(nursery, join(c, a, group, session=session_a, rebalance=rebalance))
    await wait_all_tasks_blocked()
    assert not ja.done.is_set()  # b's pending id holds the rebalance back
    rb = await join(c, b, group, session=session_b, rebalance=rebalance)
    ra = await ja.result()
    assert (ra.error_code, rb.error_code, ra.generation_id, rb.generation_id) == (0, 0, 1, 1)
    assert ra.leader == rb.leader == a
    sb = Bg(nursery, c.sync_group(group, 1, b, None, []))
    await wait_all_tasks_blocked()
    assert not sb.done.is_set()
    sa = await c.sync_group(group, 1, a, None, [(a, b"A"), (b, b"B")])
    assert (sa.error_code, sa.assignment) == (0, b"A")
    assert (await sb.result()).assignment == b"B"
    return a, b


def state(c, group="g") -> str:
    return c.describe_groups([group])[0].state


@pytest.fixture
async def c(nursery):
    coordinator = GroupCoordinator(min_session_timeout_ms=10)
    await nursery.start(coordinator.run)
    yield coordinator
    coordinator.close()


# -- joining ------------------------------------------------------------------------------------------------
async def test_lone_consumer_gets_generation_one_and_leadership_promptly(c, autojump_clock):
    start = trio.current_time()
    member = await handshake(c)
    r = await join(c, member)
    assert trio.current_time() - start < 0.1
    assert (r.error_code, r.generation_id, r.leader, r.member_id) == (E.NONE, 1, member, member)
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [tuple(m) for m in r.members] == [(member, None, b"range-meta")]
    s = await c.sync_group("g", 1, member, None, [(member, b"mine")])
    assert (s.error_code, s.assignment, s.protocol_name) == (E.NONE, b"mine", "range")
    assert state(c) == "Stable"
    assert c.heartbeat("g", 1, member, None) == E.NONE


async def test_member_id_required_handshake(c):
    r = await join(c, "", client_id="rdkafka")
    assert r.error_code == E.MEMBER_ID_REQUIRED and r.generation_id == -1
    assert r.member_id.startswith("rdkafka-") and len(r.member_id) > len("rdkafka-") + 30
    # the pending id is not a member yet: the group holds nobody
    d = c.describe_groups(["g"])[0]
    assert (d.state, d.members) == ("Empty", [])
    assert c.heartbeat("g", 0, r.member_id, None) == E.UNKNOWN_MEMBER_ID
    # a made-up id is refused; the handed-out one is accepted
    assert (await join(c, "rdkafka-made-up")).error_code == E.UNKNOWN_MEMBER_ID
    ok = await join(c, r.member_id)
    assert (ok.error_code, ok.member_id, ok.generation_id) == (E.NONE, r.member_id, 1)
    # JoinGroup v0-v3 clients (no handshake) get an id and join directly
    old = await join(c, "", "legacy", require_known=False, client_id="kp")
    assert old.error_code == E.NONE and old.member_id.startswith("kp-") and old.generation_id == 1


async def test_pending_member_id_expires_after_the_session_timeout(c, nursery, autojump_clock):
    pending = await handshake(c, session=100)
    a = await handshake(c)
    start = trio.current_time()
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    assert not ja.done.is_set()  # waits for the handshake in flight
    ra = await ja.result()
    assert 0.08 <= trio.current_time() - start < 0.5
    assert (ra.generation_id, [m.member_id for m in ra.members]) == (1, [a])
    assert (await join(c, pending)).error_code == E.UNKNOWN_MEMBER_ID


async def test_two_members_complete_one_generation_and_the_leader_gets_both_metadata(c, nursery):
    a = await handshake(c)
    b = await handshake(c)
    ja = Bg(nursery, join(c, a, protocols=[("range", b"meta-a")]))
    await wait_all_tasks_blocked()
    assert not ja.done.is_set() and state(c) == "PreparingRebalance"
    rb = await join(c, b, protocols=[("range", b"meta-b")])
    ra = await ja.result()
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == a
    assert [tuple(m) for m in ra.members] == [(a, None, b"meta-a"), (b, None, b"meta-b")]
    assert rb.members == []
    assert state(c) == "CompletingRebalance"
    # heartbeats between JoinGroup and SyncGroup are fine (modern Kafka)
    assert c.heartbeat("g", 1, b, None) == E.NONE


async def test_leader_sync_distributes_assignments_to_parked_followers(c, nursery):
    a, b, x = await handshake(c), await handshake(c), await handshake(c)
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()  # a joins first, so a leads
    jb = Bg(nursery, join(c, b))
    await wait_all_tasks_blocked()
    await join(c, x)
    assert (await ja.result()).leader == a and (await jb.result()).generation_id == 1
    sb = Bg(nursery, c.sync_group("g", 1, b, None, []))
    sx = Bg(nursery, c.sync_group("g", 1, x, None, []))
    await wait_all_tasks_blocked()
    assert not sb.done.is_set() and not sx.done.is_set()
    assert state(c) == "CompletingRebalance"
    # the leader leaves itself and x out: both get an empty assignment; an unknown id is ignored
    sa = await c.sync_group("g", 1, a, None, [(b, b"for-b"), ("stranger", b"?")])
    assert (sa.error_code, sa.assignment) == (E.NONE, b"")
    assert (await sb.result()).assignment == b"for-b"
    assert ((await sx.result()).error_code, sx.value.assignment) == (E.NONE, b"")
    assert state(c) == "Stable"
    # a late or repeated sync in Stable gets the stored assignment back
    assert (await c.sync_group("g", 1, b, None, [])).assignment == b"for-b"


async def test_third_joiner_triggers_rebalance_in_progress_then_a_new_generation(c, nursery):
    a, b = await stable_pair(c, nursery)
    x = await handshake(c)
    jx = Bg(nursery, join(c, x, protocols=[("range", b"meta-x")]))
    await wait_all_tasks_blocked()
    assert not jx.done.is_set() and state(c) == "PreparingRebalance"
    assert c.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    assert c.heartbeat("g", 1, b, None) == E.REBALANCE_IN_PROGRESS
    assert (await c.sync_group("g", 1, b, None, [])).error_code == E.REBALANCE_IN_PROGRESS
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    assert not ja.done.is_set()
    rb = await join(c, b)
    ra, rx = await ja.result(), await jx.result()
    assert ra.generation_id == rb.generation_id == rx.generation_id == 2
    assert ra.leader == a and [m.member_id for m in ra.members] == [a, b, x]
    assert rx.members == [] and rb.members == []
    assert c.heartbeat("g", 1, a, None) == E.ILLEGAL_GENERATION


async def test_a_join_during_completing_rebalance_sends_parked_syncs_back_to_join(c, nursery):
    a, b = await handshake(c), await handshake(c)
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    await join(c, b)
    await ja.result()
    sb = Bg(nursery, c.sync_group("g", 1, b, None, []))
    await wait_all_tasks_blocked()
    x = await handshake(c)
    jx = Bg(nursery, join(c, x))
    assert (await sb.result()).error_code == E.REBALANCE_IN_PROGRESS
    assert state(c) == "PreparingRebalance" and not jx.done.is_set()


async def test_follower_rejoin_without_change_keeps_the_generation_but_a_leader_rejoin_rebalances(c, nursery):
    a, b = await stable_pair(c, nursery)
    r = await join(c, b)  # a follower that lost its way: same metadata, answered at once
    assert (r.error_code, r.generation_id, r.leader, r.members) == (E.NONE, 1, a, [])
    assert state(c) == "Stable"
    ja = Bg(nursery, join(c, a))  # the leader asks for a rebalance (e.g. topic metadata changed)
    await wait_all_tasks_blocked()
    assert state(c) == "PreparingRebalance" and not ja.done.is_set()
    await join(c, b)
    assert (await ja.result()).generation_id == 2


# -- timeouts -----------------------------------------------------------------------------------------------
async def test_session_timeout_evicts_a_silent_member_and_the_survivor_rejoins_alone(c, nursery, autojump_clock):
    a, b = await stable_pair(c, nursery, session_a=SESSION, session_b=150)
    start = trio.current_time()
    with trio.fail_after(1):
        while (code := c.heartbeat("g", 1, a, None)) == E.NONE:
            await trio.sleep(0.02)
    assert code == E.REBALANCE_IN_PROGRESS
    assert 0.1 <= trio.current_time() - start < 0.5
    assert c.heartbeat("g", 1, b, None) == E.UNKNOWN_MEMBER_ID
    r = await join(c, a)
    assert (r.generation_id, r.leader, [m.member_id for m in r.members]) == (2, a, [a])


async def test_heartbeats_keep_a_member_alive_past_its_session_timeout(c, nursery, autojump_clock):
    a, b = await stable_pair(c, nursery, session_a=100, session_b=100)
    for _ in range(10):  # 0.25 s, well past the 0.1 s session timeout
        await trio.sleep(0.025)
        assert c.heartbeat("g", 1, a, None) == E.NONE
        assert c.heartbeat("g", 1, b, None) == E.NONE
    assert state(c) == "Stable"


async def test_members_parked_in_join_or_sync_outlive_their_session_timeout(c, nursery, autojump_clock):
    a, b = await handshake(c), await handshake(c, session=100)
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    await join(c, b, session=100)
    await ja.result()
    sb = Bg(nursery, c.sync_group("g", 1, b, None, []))  # b waits on a slow leader, 2.5 sessions long
    for _ in range(5):
        await trio.sleep(0.05)
        assert c.heartbeat("g", 1, a, None) == E.NONE
    assert (await c.sync_group("g", 1, a, None, [(b, b"B")])).error_code == E.NONE
    assert ((await sb.result()).error_code, sb.value.assignment) == (E.NONE, b"B")
    # the same for a JoinGroup parked while the leader takes its time to re-join
    jb = Bg(nursery, join(c, b, protocols=[("range", b"new-meta")], session=100))
    for _ in range(5):
        await trio.sleep(0.05)
        assert c.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    ra = await join(c, a)
    assert [m.member_id for m in ra.members] == [a, b] and (await jb.result()).generation_id == 2


async def test_rebalance_timeout_removes_members_that_never_rejoin(c, nursery, autojump_clock):
    a, b = await stable_pair(c, nursery, rebalance=150)
    x = await handshake(c)
    start = trio.current_time()
    jx = Bg(nursery, join(c, x, rebalance=150))
    await wait_all_tasks_blocked()  # x's join has opened the rebalance
    jb = Bg(nursery, join(c, b, rebalance=150))  # the follower re-joins, the leader a stays silent
    rx, rb = await jx.result(), await jb.result()
    assert 0.13 <= trio.current_time() - start < 0.6
    assert rx.generation_id == rb.generation_id == 2
    assert rb.leader == b  # the old leader was dropped: a member that did re-join leads
    assert [m.member_id for m in rb.members] == [b, x]
    assert c.heartbeat("g", 1, a, None) == E.UNKNOWN_MEMBER_ID


async def test_initial_rebalance_delay_holds_the_first_rebalance(nursery, autojump_clock):
    c = GroupCoordinator(initial_rebalance_delay_ms=100, min_session_timeout_ms=10)
    await nursery.start(c.run)
    start = trio.current_time()
    m = await handshake(c, "solo")
    r = await join(c, m, "solo")
    assert 0.09 <= trio.current_time() - start < 0.4 and r.generation_id == 1
    # a second member arriving during the delay extends it once and lands in the same generation
    a, b = await handshake(c, "pair"), await handshake(c, "pair")
    start = trio.current_time()
    ja = Bg(nursery, join(c, a, "pair"))
    await trio.sleep(0.05)
    jb = Bg(nursery, join(c, b, "pair"))
    ra, rb = await ja.result(), await jb.result()
    assert 0.18 <= trio.current_time() - start < 0.5
    assert ra.generation_id == rb.generation_id == 1 and len(ra.members) == 2
    c.close()


# -- errors -------------------------------------------------------------------------------------------------
async def test_illegal_generation_and_unknown_member_paths(c, nursery):
    a, b = await stable_pair(c, nursery)
    assert c.heartbeat("g", 2, a, None) == E.ILLEGAL_GENERATION
    assert c.heartbeat("g", 1, "ghost", None) == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("nope", 1, a, None) == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("", 1, a, None) == E.INVALID_GROUP_ID
    assert (await c.sync_group("g", 0, a, None, [])).error_code == E.ILLEGAL_GENERATION
    assert (await c.sync_group("g", 1, "ghost", None, [])).error_code == E.UNKNOWN_MEMBER_ID
    assert (await c.sync_group("nope", 1, a, None, [])).error_code == E.UNKNOWN_MEMBER_ID
    assert (await c.sync_group("g", 1, a, None, [], "connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(c, "ghost")).error_code == E.UNKNOWN_MEMBER_ID
    assert (await join(c, "ghost", "nope")).error_code == E.UNKNOWN_MEMBER_ID
    assert (await join(c, "", "")).error_code == E.INVALID_GROUP_ID
    assert (await join(c, "", session=5)).error_code == E.INVALID_SESSION_TIMEOUT
    assert (await join(c, "", session=c.max_session_timeout_ms + 1)).error_code == E.INVALID_SESSION_TIMEOUT
    assert state(c) == "Stable"  # none of that disturbed the group
    # a sync during PreparingRebalance
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    assert (await c.sync_group("g", 1, b, None, [])).error_code == E.REBALANCE_IN_PROGRESS
    await join(c, b)
    assert (await ja.result()).generation_id == 2


async def test_inconsistent_group_protocol(c, nursery):
    a = await handshake(c)
    await join(c, a, protocols=[("range", b"")])
    assert (await join(c, "", protocols=[("roundrobin", b"")])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(c, "", ptype="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(c, "", "fresh", protocols=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(c, "", "fresh", ptype="")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert "fresh" not in {g for g, _, _ in c.summaries()}  # a failed first join leaves nothing behind
    # a known member switching to a protocol nobody else has is refused too
    assert (await join(c, a, protocols=[("sticky", b"")])).error_code == E.INCONSISTENT_GROUP_PROTOCOL


async def test_protocol_is_chosen_by_votes_among_the_common_ones(c, nursery):
    a, b, x = await handshake(c), await handshake(c), await handshake(c)
    ja = Bg(nursery, join(c, a, protocols=[("range", b"a1"), ("roundrobin", b"a2"), ("sticky", b"a3")]))
    await wait_all_tasks_blocked()  # a joins first, so a leads
    jb = Bg(nursery, join(c, b, protocols=[("roundrobin", b"b2"), ("range", b"b1")]))
    await wait_all_tasks_blocked()
    rx = await join(c, x, protocols=[("sticky", b"x3"), ("roundrobin", b"x2"), ("range", b"x1")])
    ra = await ja.result()
    await jb.result()
    # common: range, roundrobin; votes: a→range, b→roundrobin, x→roundrobin
    assert ra.protocol_name == rx.protocol_name == "roundrobin"
    assert [m.metadata for m in ra.members] == [b"a2", b"b2", b"x2"]


def test_protocol_vote_ties_go_to_the_leaders_preference():
    g = Group("g")
    for mid, protos in (("m1", ["range", "rr"]), ("m2", ["rr", "range"])):
        g.add(Member(mid, None, "c", "h", 1, 1, "consumer", [(p, b"") for p in protos]))
    assert g.select_protocol() == "range"  # 1 vote each; the leader m1 prefers range
    g.leader_id = "m2"
    assert g.select_protocol() == "rr"
    with pytest.raises(Exception):
        g.transition_to(GroupState.STABLE)  # Empty -> Stable is not a Kafka transition


# -- leaving ------------------------------------------------------------------------------------------------
async def test_leave_group(c, nursery):
    a, b = await stable_pair(c, nursery)
    assert c.leave_group("g", [(b, None)]) == (E.NONE, [E.NONE])
    assert c.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    r = await join(c, a)  # the only member left: completes at once
    assert (r.generation_id, [m.member_id for m in r.members]) == (2, [a])
    assert c.leave_group("g", [("ghost", None), (a, None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID, E.NONE])
    d = c.describe_groups(["g"])[0]
    assert (d.state, d.members) == ("Empty", [])
    assert c.leave_group("nope", [(a, None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    assert c.leave_group("", [(a, None)]) == (E.INVALID_GROUP_ID, [])


async def test_leaving_pending_and_static_members(c, nursery):
    a, pending = await handshake(c), await handshake(c)
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    assert not ja.done.is_set()
    assert c.leave_group("g", [(pending, None)]) == (E.NONE, [E.NONE])  # stops holding the rebalance back
    assert [m.member_id for m in (await ja.result()).members] == [a]
    # an admin removes a static member by instance id alone
    js = Bg(nursery, join(c, "", instance="host-1"))
    await wait_all_tasks_blocked()
    assert c.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    await join(c, a)
    static_id = (await js.result()).member_id
    assert static_id.startswith("host-1-")
    assert c.leave_group("g", [("", "host-1"), ("", "host-2")]) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    assert c.heartbeat("g", 2, static_id, "host-1") == E.UNKNOWN_MEMBER_ID


# -- static membership --------------------------------------------------------------------------------------
async def static_pair(c, nursery):
    b = await handshake(c)
    ja = Bg(nursery, join(c, "", instance="inst-a"))  # static: no handshake, parks behind b's pending id
    await wait_all_tasks_blocked()
    rb = await join(c, b)
    a = (await ja.result()).member_id
    assert rb.leader == a
    sb = Bg(nursery, c.sync_group("g", 1, b, None, []))
    await wait_all_tasks_blocked()
    await c.sync_group("g", 1, a, "inst-a", [(a, b"A"), (b, b"B")])
    await sb.result()
    return a, b


async def test_static_member_rejoin_takes_over_without_a_rebalance(c, nursery):
    a, b = await static_pair(c, nursery)
    r = await join(c, "", instance="inst-a")  # the same instance restarted: new member id
    new_a = r.member_id
    assert (r.error_code, r.generation_id, r.members) == (E.NONE, 1, [])
    assert new_a != a and new_a.startswith("inst-a-")
    assert r.leader == a  # the old id, so the restarted leader does not run a pointless assignment
    assert state(c) == "Stable"
    assert c.heartbeat("g", 1, b, None) == E.NONE  # no rebalance for the others
    s = await c.sync_group("g", 1, new_a, "inst-a", [])
    assert (s.error_code, s.assignment) == (E.NONE, b"A")  # the stored assignment
    # the previous incarnation is fenced wherever it shows up with its instance id
    assert c.heartbeat("g", 1, a, "inst-a") == E.FENCED_INSTANCE_ID
    assert (await c.sync_group("g", 1, a, "inst-a", [])).error_code == E.FENCED_INSTANCE_ID
    assert (await join(c, a, instance="inst-a")).error_code == E.FENCED_INSTANCE_ID
    assert c.validate_commit("g", 1, a, "inst-a") == E.FENCED_INSTANCE_ID
    assert c.leave_group("g", [(a, "inst-a")]) == (E.NONE, [E.FENCED_INSTANCE_ID])
    assert c.heartbeat("g", 1, a, None) == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", 1, new_a, "inst-a") == E.NONE
    assert [m.member_id for m in c.describe_groups(["g"])[0].members] == [new_a, b]


async def test_static_member_rejoin_with_other_protocols_rebalances(c, nursery):
    a, b = await static_pair(c, nursery)
    jn = Bg(nursery, join(c, "", instance="inst-a", protocols=[("roundrobin", b"rr2")]))
    await wait_all_tasks_blocked()
    assert not jn.done.is_set() and state(c) == "PreparingRebalance"
    assert c.heartbeat("g", 1, b, None) == E.REBALANCE_IN_PROGRESS
    rb = await join(c, b)
    rn = await jn.result()
    assert rn.generation_id == rb.generation_id == 2 and rb.protocol_name == "roundrobin"
    assert rn.leader == rn.member_id != a  # leadership followed the instance to its new member id


async def test_static_replacement_fences_a_parked_request(c, nursery):
    pending = await handshake(c)
    old = Bg(nursery, join(c, "", instance="inst-a"))
    await wait_all_tasks_blocked()
    new = Bg(nursery, join(c, "", instance="inst-a"))
    assert (await old.result()).error_code == E.FENCED_INSTANCE_ID
    await join(c, pending)
    rn = await new.result()
    assert rn.error_code == E.NONE and rn.generation_id == 1 and len(rn.members) == 2


# -- describe, list, commit ---------------------------------------------------------------------------------
async def test_describe_and_list_groups_follow_the_states(nursery, autojump_clock):
    c = GroupCoordinator(min_session_timeout_ms=10, empty_group_retention_ms=100)
    await nursery.start(c.run)
    assert c.describe_groups(["g"]) == [C.GroupDescription(E.NONE, "g", "Dead", "", "", [])]
    assert c.summaries() == []
    a, b = await handshake(c, client_id="ca"), await handshake(c, client_id="cb")
    ja = Bg(nursery, join(c, a, client_id="ca"))
    await wait_all_tasks_blocked()
    d = c.describe_groups(["g"])[0]
    assert (d.state, d.protocol_type, d.protocol_name) == ("PreparingRebalance", "consumer", "")
    assert [(m.member_id, m.client_id, m.client_host, m.metadata) for m in d.members] == [(a, "ca", HOST, b"")]
    await join(c, b, client_id="cb")
    await ja.result()
    assert state(c) == "CompletingRebalance"
    sb = Bg(nursery, c.sync_group("g", 1, b, None, []))
    await wait_all_tasks_blocked()
    await c.sync_group("g", 1, a, None, [(a, b"A"), (b, b"B")])
    await sb.result()
    d, other = c.describe_groups(["g", "other"])
    assert (d.error_code, d.state, d.protocol_type, d.protocol_name) == (E.NONE, "Stable", "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [
        (a, b"range-meta", b"A"), (b, b"range-meta", b"B")]
    assert other.state == "Dead"
    assert c.summaries() == [("g", "consumer", "Stable")]
    assert c.leave_group("g", [(a, None), (b, None)]) == (E.NONE, [E.NONE, E.NONE])
    assert state(c) == "Empty" and c.summaries() == [("g", "consumer", "Empty")]
    await trio.sleep(0.15)  # the empty-group retention passes: forgotten
    assert state(c) == "Dead" and c.summaries() == []
    c.close()


async def test_validate_commit(c, nursery):
    # no group in memory: a standalone commit passes, a generation we do not know does not
    assert c.validate_commit("solo", -1, "", None) == E.NONE
    assert c.validate_commit("", -1, "", None) == E.NONE
    assert c.validate_commit("solo", 3, "m", None) == E.ILLEGAL_GENERATION
    a, b = await stable_pair(c, nursery)
    assert c.validate_commit("g", 1, a, None) == E.NONE
    assert c.validate_commit("g", 0, a, None) == E.ILLEGAL_GENERATION
    assert c.validate_commit("g", 1, "ghost", None) == E.UNKNOWN_MEMBER_ID
    assert c.validate_commit("g", -1, "", None) == E.UNKNOWN_MEMBER_ID  # only members commit to an active group
    x = await handshake(c)
    jx = Bg(nursery, join(c, x))
    await wait_all_tasks_blocked()
    assert c.validate_commit("g", 1, a, None) == E.NONE  # PreparingRebalance: members may still commit
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    await join(c, b)
    await ja.result(), await jx.result()
    assert c.validate_commit("g", 2, a, None) == E.REBALANCE_IN_PROGRESS  # CompletingRebalance
    assert c.validate_commit("g", 1, a, None) == E.ILLEGAL_GENERATION
    assert c.leave_group("g", [(a, None), (b, None), (x, None)])[1] == [E.NONE] * 3
    assert state(c) == "Empty"
    assert c.validate_commit("g", -1, "", None) == E.NONE  # Empty group: standalone commits allowed
    assert c.validate_commit("g", 2, a, None) == E.UNKNOWN_MEMBER_ID


# -- cancellation and shutdown ------------------------------------------------------------------------------
async def test_a_cancelled_join_does_not_break_the_group(c, nursery, autojump_clock):
    a = await handshake(c)
    assert (await join(c, a)).generation_id == 1
    await c.sync_group("g", 1, a, None, [(a, b"A")])
    b = await handshake(c, session=150)
    with trio.move_on_after(0.05) as scope:
        await join(c, b, session=150)  # parks: a has not re-joined; then the "connection drops"
    assert scope.cancelled_caught
    assert c.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    r = await join(c, a)  # b counts as joined (its answer was lost): the generation completes at once
    assert (r.generation_id, [m.member_id for m in r.members]) == (2, [a, b])
    await c.sync_group("g", 2, a, None, [(a, b"A"), (b, b"B")])
    with trio.fail_after(1):  # b never comes back: its session timeout evicts it
        while c.heartbeat("g", 2, a, None) == E.NONE:
            await trio.sleep(0.02)
    r = await join(c, a)
    assert (r.generation_id, [m.member_id for m in r.members]) == (3, [a])


async def test_a_cancelled_sync_does_not_break_the_group(c, nursery, autojump_clock):
    a, b = await handshake(c), await handshake(c)
    ja = Bg(nursery, join(c, a))
    await wait_all_tasks_blocked()
    await join(c, b)
    await ja.result()
    with trio.move_on_after(0.02):
        await c.sync_group("g", 1, b, None, [])
    assert (await c.sync_group("g", 1, a, None, [(b, b"B")])).error_code == E.NONE
    assert (await c.sync_group("g", 1, b, None, [])).assignment == b"B"


async def test_close_wakes_parked_callers_and_stops_run(nursery, autojump_clock):
    c = GroupCoordinator(min_session_timeout_ms=10)
    stopped = trio.Event()

    async def run_then_flag(task_status=trio.TASK_STATUS_IGNORED):
        await c.run(task_status=task_status)
        stopped.set()

    await nursery.start(run_then_flag)
    a, _pending = await handshake(c), await handshake(c)
    parked_join = Bg(nursery, join(c, a))
    x, y = await handshake(c, "h"), await handshake(c, "h")
    jx = Bg(nursery, join(c, x, "h"))
    await wait_all_tasks_blocked()
    await join(c, y, "h")
    await jx.result()
    parked_sync = Bg(nursery, c.sync_group("h", 1, y, None, []))
    await wait_all_tasks_blocked()
    assert not parked_join.done.is_set() and not parked_sync.done.is_set()
    c.close()
    assert (await parked_join.result(0.1)).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert (await parked_sync.result(0.1)).error_code == E.COORDINATOR_NOT_AVAILABLE
    with trio.fail_after(0.1):
        await stopped.wait()
    assert c.heartbeat("h", 1, x, None) == E.COORDINATOR_NOT_AVAILABLE
    assert (await join(c, "")).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert c.describe_groups(["h"])[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert c.validate_commit("h", -1, "", None) == E.COORDINATOR_NOT_AVAILABLE


# -- internals that the rest relies on ----------------------------------------------------------------------
def test_deadline_queue_files_only_earlier_deadlines():
    d = C.Deadlines()
    assert d.set("a", 10.0) is True  # the earliest: the run loop must wake
    assert d.set("b", 20.0) is False
    assert d.set("a", 30.0) is False  # later: a dict write, the old entry is re-filed when due
    assert d.next_at() == 10.0
    assert d.pop_due(15.0) is None and d.next_at() == 20.0  # "a" re-filed at 30
    d.cancel("b")
    assert d.pop_due(25.0) is None
    assert d.set("c", 5.0) is True
    assert [d.pop_due(40.0), d.pop_due(40.0), d.pop_due(40.0)] == ["c", "a", None]


def test_the_coordinator_imports_only_the_error_table_and_the_state_model_no_trio():
    """The coordinator answers with the Kafka codec's one error table and imports nothing else of the codec; the
    group state model is plain data (no codec, no trio)."""
    root = Path(__file__).resolve().parent.parent.parent / "gateway" / "protocols" / "kafka"
    allowed = {"logway.codecs.kafka.error_codes"}
    for name, forbidden in (("coordinator.py", ("logway.codecs",)), ("group_state.py", ("logway.codecs", "trio"))):
        tree = ast.parse((root / name).read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.add("." * node.level + (node.module or ""))
        bad = [m for m in imported - allowed for f in forbidden if m == f or m.startswith(f + ".") or "codecs" in m]
        assert not bad, (name, bad)
