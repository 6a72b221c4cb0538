"""`logway produce` and `logway consume` against a real gateway process, in each protocol (issue 39): records in from
arguments and stdin (text, `KEY:VALUE`, JSON lines with headers, timestamps and bytes), out as text or JSON lines,
from an offset, the last N, a time or a group's committed position, and followed as they arrive; every refusal one
line with the exit status the other commands use."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.pipeline.producer import partition_for_key

from .test_cli import GatewayProcess, address

COLUMNS = "partition\toffset\ttime\tkey\tvalue\theaders"


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with GatewayProcess(str(tmp_path_factory.mktemp("records") / "data"), "log_level=WARNING") as gateway:
        yield gateway


def run(gw, *args: str, protocol: str = "native", stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
    """`logway ARGS --gateway <protocol's listener>`."""
    where = address(gw.addresses[protocol])
    extra = ("--protocol", protocol) if protocol != "native" else ()
    return subprocess.run([sys.executable, "-m", "logway.cli", *args, *extra, "--gateway", where],
                          input=stdin.encode() if isinstance(stdin, str) else stdin, capture_output=True, timeout=60)


def rows(r: subprocess.CompletedProcess) -> list[list[str]]:
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    return [line.split("\t") for line in lines[1:]]


def one_line(r: subprocess.CompletedProcess, code: int, text: str) -> None:
    stderr = r.stderr.decode()
    assert r.returncode == code and stderr.startswith(text), (r.returncode, stderr)
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr


def create(gw, name: str, partitions: int) -> None:
    with NativeClient(*gw.native) as c:
        c.create_topic(name, partitions)


def test_produce_values_and_consume_them_as_text_and_json(gw):
    create(gw, "orders", 3)
    r = run(gw, "produce", "orders", "--key", "alice", "first order", "second\torder")
    p = partition_for_key(b"alice", 3)  # where a Kafka producer puts alice's records too
    assert r.stdout.decode().splitlines() == ["topic\tpartition\toffset", f"orders\t{p}\t0", f"orders\t{p}\t1"]
    r = run(gw, "produce", "orders", "--partition", "1", "--timestamp", "2024-05-01T12:00:00Z", "--json",
            stdin="one\n\nthree")  # an empty line is an empty value; the last line needs no newline
    assert [json.loads(line) for line in r.stdout.decode().splitlines()] == [
        {"topic": "orders", "partition": 1, "offset": i} for i in range(3)]
    out = rows(run(gw, "consume", "orders", "--partition", "1"))
    assert out[0] == ["1", "0", "2024-05-01T12:00:00.000Z", "-", "one", "-"]
    assert [r[4] for r in out] == ["one", "-", "three"]
    out = rows(run(gw, "consume", "orders", "--partition", str(p), "--offset", "0"))
    assert [r[3:5] for r in out[-2:]] == [["alice", "first order"], ["alice", "second\\torder"]]  # escaped
    lines = run(gw, "consume", "orders", "--partition", str(p), "--json").stdout.decode().splitlines()
    first = json.loads(lines[0])
    assert {k: first[k] for k in ("topic", "partition", "offset", "key", "value", "headers")} == {
        "topic": "orders", "partition": p, "offset": 0, "key": "alice", "value": "first order", "headers": []}
    assert first["time"].endswith("Z") and isinstance(first["timestamp"], int)
    assert json.loads(lines[1])["value"] == "second\torder"


def test_stdin_lines_keys_json_and_bytes(gw):
    create(gw, "lines", 2)
    r = run(gw, "produce", "lines", "--key-separator", ":", "--partition", "0", stdin="k1:v:1\nk2:v2\n")
    assert rows(r) == [["lines", "0", "0"], ["lines", "0", "1"]]
    records = [{"value_hex": "00ff", "key": "bin", "partition": 1, "timestamp": 1714564800000},
               {"value": "ü", "partition": 1, "timestamp": "2024-05-01T12:00:00+02:00"}]
    r = run(gw, "produce", "lines", "--input", "json", stdin="\n".join(json.dumps(x) for x in records) + "\n\n")
    assert rows(r) == [["lines", "1", "0"], ["lines", "1", "1"]]
    r = run(gw, "produce", "lines", "--input", "json", stdin='{"value": null, "key": "gone", "partition": 1}',
            protocol="kafka")  # a tombstone: Kafka's
    assert rows(r) == [["lines", "1", "2"]]
    out = rows(run(gw, "consume", "lines"))
    assert [(r[0], r[1], r[3], r[4]) for r in out] == [
        ("0", "0", "k1", "v:1"), ("0", "1", "k2", "v2"), ("1", "0", "bin", "\\x00\\xff"), ("1", "1", "-", "ü"),
        ("1", "2", "gone", "-")]
    assert out[2][2] == "2024-05-01T12:00:00.000Z" and out[3][2] == "2024-05-01T10:00:00.000Z"
    got = [json.loads(line) for line in run(gw, "consume", "lines", "--partition", "1", "--json").stdout.splitlines()]
    assert [{k: g.get(k) for k in ("value", "value_hex", "key")} for g in got] == [
        {"value": None, "value_hex": "00ff", "key": "bin"}, {"value": "ü", "value_hex": None, "key": None},
        {"value": None, "value_hex": None, "key": "gone"}]
    one_line(run(gw, "produce", "lines", "--input", "json", stdin='{"value": null}'), 2,
             "logway: a record without a value (a tombstone) needs --protocol kafka")
    # a line that is not a record: the lines before it are written, then one line naming it, exit 2
    r = run(gw, "produce", "lines", "--input", "json", "--partition", "0",
            stdin='{"value": "ok"}\n{"value": 5}\n{"value": "never"}\n')
    one_line(r, 2, "logway: stdin line 2: 'value' must be text (or value_hex for bytes), got int")
    assert r.stdout.decode().splitlines()[1:] == ["lines\t0\t2"]
    one_line(run(gw, "produce", "lines", "--input", "json", stdin="[1]\n"), 2,
             "logway: stdin line 1: each line must be a JSON object")
    one_line(run(gw, "produce", "lines", "--input", "json", stdin='{"value": "x", "vlaue": 1}\n'), 2,
             "logway: stdin line 1: unknown field(s) vlaue")
    one_line(run(gw, "produce", "lines", "--key-separator", ":", stdin="no separator\n"), 2,
             "logway: stdin line 1 has no key separator ':'")


def test_where_consume_starts_and_stops(gw):
    create(gw, "starts", 2)
    with NativeClient(*gw.native) as c:
        from logway.codecs.records import Record

        c.produce("starts", 0, [Record(f"r{i}".encode(), timestamp=1_000_000 + i * 1000) for i in range(10)])
        c.produce("starts", 1, [Record(b"only", timestamp=5_000_000)])

    def values(*args: str, protocol: str = "native") -> list[str]:
        return [r[4] for r in rows(run(gw, "consume", "starts", *args, protocol=protocol))]

    assert values("--partition", "0", "--offset", "7") == ["r7", "r8", "r9"]
    assert values("--last", "2") == ["r8", "r9", "only"]
    assert values("--partition", "0", "--max-records", "3") == ["r0", "r1", "r2"]
    for protocol in ("native", "kafka"):  # the first record at or after the time; none that late: nothing
        assert values("--from-time", "1005000", protocol=protocol) == ["r5", "r6", "r7", "r8", "r9", "only"]
        assert values("--from-time", "1970-01-01T00:16:48Z", protocol=protocol) == ["r8", "r9", "only"]
    assert values("--from-time", "9999999999999") == []
    r = run(gw, "consume", "starts", "--partition", "1", "--offset", "5")  # past the end: moved there, said so
    assert rows(r) == [] and r.stderr.decode() == "logway: offset 5 is past the end of partition 1: reading from 1\n"
    # a group's committed position, and --commit moving it on
    with NativeClient(*gw.native) as c:
        c.commit("starts", 0, "billing", 8)
    assert values("--group", "billing") == ["r8", "r9", "only"]  # partition 1: nothing committed, from the start
    assert values("--group", "billing", protocol="kafka") == ["r8", "r9", "only"]
    assert values("--group", "billing", "--commit", "--max-records", "1") == ["r8"]
    assert values("--group", "billing", "--commit") == ["r9", "only"]
    assert values("--group", "billing") == []
    with NativeClient(*gw.native) as c:
        assert [c.committed("starts", p, "billing") for p in (0, 1)] == [10, 1]


def test_kafka_and_tank(gw):
    """Headers need the Kafka protocol (the others carry none: refused, never dropped); TANK answers no offsets."""
    create(gw, "multi", 1)
    one_line(run(gw, "produce", "multi", "--header", "h=1", "x"), 2,
             "logway: record headers need --protocol kafka: the native protocol carries none")
    one_line(run(gw, "produce", "multi", "--input", "json", stdin='{"value": "x", "headers": {"h": "1"}}\n'), 2,
             "logway: record headers need --protocol kafka: the native protocol carries none")
    r = run(gw, "produce", "multi", "--header", "source=cli", "--header", "empty=", "--key", "k", "via kafka",
            protocol="kafka")
    assert rows(r) == [["multi", "0", "0"]]
    r = run(gw, "produce", "multi", "via tank", protocol="tank")
    assert rows(r) == [["multi", "0", "-"]]  # TANK's produce answer has no offsets
    out = rows(run(gw, "consume", "multi", protocol="kafka"))
    assert [r[1:2] + r[3:] for r in out] == [["0", "k", "via kafka", "source=cli, empty="], ["1", "-", "via tank", "-"]]
    assert [r[4] for r in rows(run(gw, "consume", "multi", protocol="tank"))] == ["via kafka", "via tank"]
    headers = json.loads(run(gw, "consume", "multi", "--json", "-n", "1", protocol="kafka").stdout)["headers"]
    assert headers == [{"key": "source", "value": "cli"}, {"key": "empty", "value": ""}]
    one_line(run(gw, "consume", "multi", "--from-time", "0", protocol="tank"), 2,
             "logway: --from-time needs --protocol native or kafka")
    one_line(run(gw, "consume", "multi", "--group", "g", protocol="tank"), 2,
             "logway: --group needs --protocol native or kafka: the tank protocol has no consumer groups")
    one_line(run(gw, "consume", "multi", "--group", "g", "--commit", protocol="kafka"), 2,
             "logway: --commit needs --protocol native")
    # the Kafka protocol's produce does not create a topic (whatever kafka.auto_create_topics says)
    one_line(run(gw, "produce", "typo-topc", "x", protocol="kafka"), 1,
             "logway: topic not found: typo-topc (create it with: logway topics create typo-topc)")
    with KafkaClient(KafkaConfig(*gw.addresses["kafka"])) as k:
        assert "typo-topc" not in k.partition_counts()


@pytest.mark.parametrize("protocol", ["native", "kafka", "tank"])
def test_follow_prints_records_as_they_arrive(gw, protocol):
    topic = f"tail-{protocol}"
    create(gw, topic, 2)
    with NativeClient(*gw.native) as c:
        c.produce(topic, 1, [b"before"])
    where = address(gw.addresses[protocol])
    proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "consume", topic, "--follow", "--protocol", protocol,
                             "--gateway", where], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == COLUMNS + "\n"
        assert proc.stdout.readline().split("\t")[:2] == ["1", "0"]  # what was there
        for partition, value in ((0, b"new 0"), (1, b"new 1")):
            with NativeClient(*gw.native) as c:
                c.produce(topic, partition, [value])
            assert proc.stdout.readline().split("\t")[4] == value.decode()  # each as it arrives
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130 and "Traceback" not in proc.stderr.read()


def test_follow_stops_after_max_records(gw):
    create(gw, "tail-n", 1)
    proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "consume", "tail-n", "-f", "-n", "2", "--json",
                             "--gateway", address(gw.native)], stdout=subprocess.PIPE, text=True)
    with NativeClient(*gw.native) as c:
        c.produce("tail-n", 0, [b"a"])
        c.produce("tail-n", 0, [b"b", b"c"])
    assert [json.loads(line)["value"] for line in proc.stdout] == ["a", "b"]
    assert proc.wait(30) == 0


def test_refusals_are_one_line(gw):
    create(gw, "small", 2)
    for args, code, text in [
        (("produce", "nope", "x"), 1, "logway: topic not found: nope (create it with: logway topics create nope)"),
        (("consume", "nope"), 1, "logway: topic not found: nope"),
        (("produce", "small", "--partition", "2", "x"), 1, "logway: partition not found: topic=small, partition=2 "
                                                          "(it has 2)"),
        (("consume", "small", "--partition", "0,5"), 1, "logway: partition not found: topic=small, partition=5"),
        (("consume", "small", "--partition", "x"), 2, "logway: --partition expects P or P,P,"),
        (("consume", "small", "--last", "0"), 2, "logway: --last must be 1 or more, got 0"),
        (("consume", "small", "--offset", "-1"), 2, "logway: --offset must be 0 or more, got -1"),
        (("consume", "small", "--commit"), 2, "logway: --commit needs --group GROUP"),
        (("consume", "small", "--from-time", "soon"), 2, "logway: --from-time expects an ISO 8601 date and time"),
        (("consume", "small", "--offset", "1", "--last", "1"), 2,
         "logway consume: argument --last: not allowed with argument --offset"),
        (("produce", "small", "--timestamp", "yesterday", "x"), 2, "logway: --timestamp expects an ISO 8601"),
        (("produce", "small", "--header", "novalue", "x"), 2, "logway: --header expects KEY=VALUE, got 'novalue'"),
        (("produce", "small", "--input", "json", "x"), 2, "logway: --input json reads stdin: give no VALUE"),
        (("produce", "small", "--bogus", "x"), 2, "logway: unrecognized arguments: --bogus"),
    ]:
        one_line(run(gw, *args), code, text)
    for protocol, port in (("kafka", "native"), ("tank", "native"), ("native", "kafka")):
        r = subprocess.run([sys.executable, "-m", "logway.cli", "consume", "small", "--protocol", protocol,
                            "--gateway", address(gw.addresses[port])], capture_output=True, timeout=60)
        one_line(r, 1, f"logway: {address(gw.addresses[port])} does not speak")
    with NativeClient(*gw.native) as c:
        assert [p.log_end_offset for p in c.describe_topic("small").partitions] == [0, 0]  # nothing was written
