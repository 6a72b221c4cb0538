"""The operator's view of groups of every type: a classic group (kafka-python), a KIP-848 consumer group and a
KIP-932 share group (their members speaking the wire protocol) on one gateway process, as the native group admin
requests (`logway groups`), the admin API (`/api/groups`, the console's) and the metrics show them: each group's
type, state, members and the partitions each member holds; a reset of a live consumer group's offsets refused."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import NativeError
from logway.clients.native import NativeClient

from ..kafka_groups import group_consumer, poll_values
from ..kafka_wire import client  # noqa: F401 - the fixture
from ..kafka_wire import new_topic
from .test_kafka_consumer_groups import Member as ConsumerMember
from .test_kafka_consumer_groups import topic_id
from .test_kafka_share_groups import Member as ShareMember


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = GatewayProcess(str(tmp_path_factory.mktemp("views") / "data"), "log_level=ERROR")
    yield g
    g.stop()


def http_json(gw, path):
    with urllib.request.urlopen("http://{}:{}{}".format(*gw.addresses["admin"], path), timeout=10) as r:
        return json.loads(r.read())


def metrics(gw) -> str:
    with urllib.request.urlopen("http://{}:{}/metrics".format(*gw.addresses["admin"]), timeout=10) as r:
        return r.read().decode()


def test_every_group_type_is_listed_and_described_with_its_members(gw, client):
    topic = new_topic(gw, 2)
    tid = topic_id(client, topic)
    suffix = uuid.uuid4().hex[:6]
    classic_id, consumer_id, share_id = f"classic-{suffix}", f"consumer-{suffix}", f"share-{suffix}"
    with NativeClient(*gw.native) as native:
        native.produce(topic, 0, [b"a", b"b"])
        native.commit(topic, 0, consumer_id, 1)  # a commit before the group's members (offsets are shared)

    modern = ConsumerMember(client, consumer_id, [topic])
    modern.beat()
    assert sorted(modern.partitions(tid)) == [0, 1]
    sharing = ShareMember(client, share_id, [topic])
    assert sharing.beat().error_code == 0 and sorted(sharing.assigned[tid]) == [0, 1]
    classic = group_consumer("{}:{}".format(*gw.addresses["kafka"]), topic, classic_id,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        assert len(poll_values(classic, 2)) == 2
        with NativeClient(*gw.native) as native:
            listed = {g.group_id: g for g in native.list_groups()}
            assert (listed[classic_id].type, listed[classic_id].state, listed[classic_id].members) == \
                ("classic", "Stable", 1)
            assert (listed[consumer_id].type, listed[consumer_id].protocol_type, listed[consumer_id].members) == \
                ("consumer", "consumer", 1)
            assert listed[share_id].type == "share" and listed[share_id].state == "Stable"

            d = native.describe_group(consumer_id)
            assert d.type == "consumer" and d.state in ("Stable", "Reconciling")
            (member,) = d.members
            assert member.member_id == modern.member_id
            assert sorted(map(tuple, member.partitions)) == [(topic, 0), (topic, 1)]
            assert [(p.partition, p.committed_offset, p.log_end_offset) for p in d.partitions] == \
                [(0, 1, 2), (1, None, 0)]
            d = native.describe_group(share_id)
            assert d.type == "share" and sorted(map(tuple, d.members[0].partitions)) == [(topic, 0), (topic, 1)]
            assert native.describe_group(classic_id).type == "classic"

            # a live consumer group's offsets are not reset (as a classic one's)
            with pytest.raises(NativeError, match=f"group has active members: '{consumer_id}'"):
                native.reset_group_offsets(consumer_id, "earliest", None, topics=[(topic, None)])

        # `logway groups list`: the type in the fourth column
        out = subprocess.run([sys.executable, "-m", "logway.cli", "groups", "list", "--gateway",
                              "{}:{}".format(*gw.native)], capture_output=True, text=True, timeout=60)
        rows = {line.split("\t")[0]: line.split("\t")[1:] for line in out.stdout.splitlines()}
        assert rows[classic_id] == ["Stable", "1", "classic"] and rows[consumer_id][1:] == ["1", "consumer"]
        assert rows[share_id] == ["Stable", "1", "share"], out.stderr

        # the admin API (the console's groups table) and the metrics
        api = {g["group"]: g for g in http_json(gw, "/api/groups")["groups"]}
        assert (api[consumer_id]["type"], api[share_id]["type"], api[classic_id]["type"]) == \
            ("consumer", "share", "classic")
        assert api[consumer_id]["members"][0]["assignment"] == [[topic, 0], [topic, 1]]
        assert api[consumer_id]["partitions"][0]["committed"] == 1
        text = metrics(gw)
        for group, kind in ((classic_id, "classic"), (consumer_id, "consumer"), (share_id, "share")):
            assert any(line.startswith("logway_consumer_group_members{") and f'group="{group}"' in line
                       and f'type="{kind}"' in line and line.endswith(" 1.0") for line in text.splitlines()), group
    finally:
        classic.close()

    # members gone: the consumer group is Empty (and its offsets may be reset), the share group too
    assert modern.beat(epoch=-1).error_code == 0
    assert sharing.beat(epoch=-1).error_code == 0
    with NativeClient(*gw.native) as native:
        listed = {g.group_id: g for g in native.list_groups()}
        assert (listed[consumer_id].state, listed[consumer_id].type) == ("Empty", "consumer")
        assert (listed[share_id].state, listed[share_id].members) == ("Empty", 0)
        answer = native.reset_group_offsets(consumer_id, "earliest", None, topics=[(topic, [0])], validate_only=True)
        assert [(r.partition, r.previous_offset, r.offset) for r in answer.offsets] == [(0, 1, 0)]
