"""The `logway` command against a real gateway process: serve (with SIGTERM shutdown) and topics admin."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kafka import OffsetAndMetadata, TopicPartition

from logway.bench.launcher import GatewayProcess as _GatewayProcess
from logway.clients.native import NativeClient
from logway.gateway import load_config

from ..kafka_groups import group_consumer, poll_values

#: `--set` items giving every configured listener an ephemeral port (the admin listener's default 9644 may be taken
#: by another gateway of the test run), and the ones `GatewayProcess` does not set itself.
EPHEMERAL = [f"listeners.{name}.port=0" for name in load_config().listeners]
_EXTRA = [item for item in EPHEMERAL if item.split(".")[1] not in ("native", "kafka", "tank")]


#: The header lines of `topics list` and `groups list` (every table has one).
TOPICS = "name\tpartitions\n"
GROUPS = "group\tstate\tmembers\ttype\n"


def GatewayProcess(data_dir: str, *overrides: str, **kwargs) -> _GatewayProcess:
    return _GatewayProcess(data_dir, *_EXTRA, *overrides, **kwargs)


def ephemeral_ports() -> list[str]:
    """`--set listeners.X.port=0` for every listener, as `logway serve` arguments."""
    return [arg for item in EPHEMERAL for arg in ("--set", item)]


def logway(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logway.cli", *args], capture_output=True, text=True,
                          timeout=60)


def offsets_of(describe_output: str) -> list[str]:
    """`topics describe` rows cut to partition, log start and log end offsets (the header line left out)."""
    return ["\t".join(line.split("\t")[:3]) for line in describe_output.splitlines()[1:]]


def test_topics_commands_and_restart_persistence(tmp_path):
    data = str(tmp_path / "data")
    with GatewayProcess(data, "log_level=WARNING") as gw:
        target = "%s:%d" % gw.native
        r = logway("topics", "--gateway", target, "create", "events", "--partitions", "3")
        assert r.returncode == 0 and "created topic events with 3 partition(s)" in r.stdout, r.stderr
        r = logway("topics", "--gateway", target, "create", "events")
        assert r.returncode == 1 and "topic already exists: events" in r.stderr
        r = logway("topics", "--gateway", target, "create", "bad/name")
        assert r.returncode == 1 and "invalid topic name" in r.stderr
        with NativeClient(*gw.native) as c:
            assert c.produce("events", 1, [b"a", b"b", b"c"]) == [0, 1, 2]
        assert logway("topics", "--gateway", target, "list").stdout == TOPICS + "events\t3\n"
        r = logway("topics", "--gateway", target, "describe", "events")
        assert offsets_of(r.stdout) == ["0\t0\t0", "1\t0\t3", "2\t0\t0"]
        assert gw.stop() == 0  # SIGTERM: graceful, exit status 0
    with GatewayProcess(data, "log_level=WARNING") as gw:  # persistence across a restart
        target = "%s:%d" % gw.native
        with NativeClient(*gw.native) as c:
            assert [r.value for r in c.fetch("events", 1, 0).records] == [b"a", b"b", b"c"]
            assert c.produce("events", 1, [b"d"]) == [3]
        r = logway("topics", "--gateway", target, "delete", "events")
        assert r.returncode == 0, r.stderr
        assert logway("topics", "--gateway", target, "list").stdout == TOPICS


def test_unreachable_gateway_and_bad_config(tmp_path):
    r = logway("topics", "--gateway", "127.0.0.1:1", "list")
    assert r.returncode == 1 and "cannot reach the gateway" in r.stderr
    r = logway("serve", "--set", "storage.flush=sometimes")
    assert r.returncode == 2 and "storage.flush must be one of" in r.stderr
    r = logway("serve", "--print-config", "--set", "storage.flush=always")
    assert r.returncode == 0 and "flush: always" in r.stdout


def test_second_gateway_on_a_locked_data_dir_exits_with_one_line(tmp_path):
    """The one `logway:` line names the gateway holding the directory by its pid, and what to do."""
    data = str(tmp_path / "data")
    for workers in ("workers=1", "workers=2"):
        with GatewayProcess(data, "log_level=WARNING", workers) as gw:
            r = logway("serve", "--data-dir", data, *ephemeral_ports(), "--set", "log_level=WARNING")
        assert (r.returncode, r.stderr) == (1, f"logway: data directory {tmp_path}/data is in use by another logway "
                                               f"process (pid {gw.pid}): stop that gateway, or give this one another "
                                               "data directory (--data-dir DIR)\n"), workers


def test_config_shows_every_key_with_its_value_and_source(tmp_path):
    """`logway config`: the configuration `serve` would run with, each value's source; secrets never shown."""
    (tmp_path / "logway.yaml").write_text("storage:\n  flush: always\nlisteners:\n  tank:\n    enabled: false\n"
                                          "auth:\n  users:\n    alice: from-the-file\n")
    env = {name: value for name, value in os.environ.items() if not name.startswith("LOGWAY_")}  # (the test run's)
    env |= {"LOGWAY_LIMITS__MAX_CONNECTIONS": "77", "LOGWAY_AUTH__NATIVE_TOKEN": "s3cret"}
    args = ("config", "--config", str(tmp_path / "logway.yaml"), "--set", "listeners.kafka.port=1234",
            "--data-dir", "/srv/logway")
    r = subprocess.run([sys.executable, "-m", "logway.cli", *args], capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "key\tvalue\tsource"
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in lines[1:]}
    assert rows["storage.flush"] == ["always", f"file {tmp_path}/logway.yaml"]
    assert rows["listeners.tank.enabled"] == ["false", f"file {tmp_path}/logway.yaml"]
    assert rows["limits.max_connections"] == ["77", "environment LOGWAY_LIMITS__MAX_CONNECTIONS"]
    assert rows["listeners.kafka.port"] == ["1234", "flag --set listeners.kafka.port"]
    assert rows["data_dir"] == ["/srv/logway", "flag --data-dir"]
    assert rows["listeners.native.port"] == ["9898", "default"]
    assert rows["storage.segment_bytes"] == ["1073741824", "default"]
    assert rows["auth.native_token"] == ["(set)", "environment LOGWAY_AUTH__NATIVE_TOKEN"]
    assert rows["auth.users.alice"] == ["(set)", f"file {tmp_path}/logway.yaml"]
    assert "s3cret" not in r.stdout and "from-the-file" not in r.stdout
    from logway.gateway.config import settings  # every setting has its row
    assert {key for key, _, _ in settings()} - set(rows) == {"auth.users"}  # (a row per user instead)
    r = subprocess.run([sys.executable, "-m", "logway.cli", *args, "--changed", "--json"], capture_output=True,
                       text=True, timeout=60, env=env)
    changed = [json.loads(line) for line in r.stdout.splitlines()]
    assert {c["key"] for c in changed} == {"data_dir", "listeners.kafka.port", "listeners.tank.enabled",
                                           "auth.users.alice", "auth.native_token", "storage.flush",
                                           "limits.max_connections"}
    assert {"key": "data_dir", "value": "/srv/logway", "source": "flag --data-dir"} in changed
    # what serve would refuse, config refuses the same way
    r = logway("config", "--set", "storage.flush=sometimes")
    assert (r.returncode, r.stdout) == (2, "") and r.stderr.startswith("logway: configuration error: storage.flush "
                                                                        "must be one of none, interval, always")


def test_serve_help_says_what_the_defaults_are():
    r = logway("serve", "--help")
    assert r.returncode == 0
    for text in ("--config FILE", "--data-dir DIR", "data_dir ./data", "native  127.0.0.1:9898",
                 "kafka   127.0.0.1:9092", "tank    127.0.0.1:11011", "admin   127.0.0.1:9644", "logway config"):
        assert text in r.stdout, (text, r.stdout)


def test_unloadable_certificate_exits_with_a_configuration_error(tmp_path):
    r = logway("serve", "--data-dir", str(tmp_path / "data"), *ephemeral_ports(), "--set", "listeners.kafka.tls=true",
               "--set", f"tls.cert_file={tmp_path}/nope.pem", "--set", f"tls.key_file={tmp_path}/nope.key")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_topics_alter_config_add_partitions_and_delete_records(tmp_path):
    data = str(tmp_path / "data")
    with GatewayProcess(data, "log_level=WARNING") as gw:
        target = "%s:%d" % gw.native

        def topics(*args):
            return logway("topics", "--gateway", target, *args)

        assert topics("create", "events", "--partitions", "2").returncode == 0
        # alter / config
        r = topics("alter", "events", "--config", "retention.ms=3600000", "--config", "max.message.bytes=4096")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "altered topic events; its overrides: max.message.bytes=4096, retention.ms=3600000\n"
        r = topics("alter", "events", "--config", "segment.bytes=2048", "--validate-only")
        assert r.returncode == 0 and "nothing altered" in r.stdout, r.stderr
        r = topics("alter", "events", "--delete-config", "max.message.bytes")
        assert r.stdout == "altered topic events; its overrides: retention.ms=3600000\n", r.stderr
        lines = topics("config", "events").stdout.splitlines()
        assert lines[0] == "name\tvalue\tsource\tdefault"
        assert "retention.ms\t3600000\ttopic\t604800000" in lines
        assert "segment.bytes\t1073741824\tdefault\t1073741824" in lines
        assert "storage.format\tkafka\tdefault (read-only)\tkafka" in lines
        r = topics("alter", "events", "--config", "cleanup.policy=delete,compact", "--config",
                   "min.cleanable.dirty.ratio=0.2")
        assert r.returncode == 0, r.stderr
        lines = topics("config", "events").stdout.splitlines()
        assert "cleanup.policy\tcompact,delete\ttopic\tdelete" in lines
        assert "min.cleanable.dirty.ratio\t0.2\ttopic\t0.5" in lines
        r = topics("alter", "events", "--delete-config", "cleanup.policy", "--delete-config",
                   "min.cleanable.dirty.ratio")
        assert r.returncode == 0, r.stderr
        # add-partitions
        r = topics("add-partitions", "events", "--count", "4")
        assert r.returncode == 0 and r.stdout == "topic events has 4 partition(s)\n", r.stderr
        assert topics("list").stdout == TOPICS + "events\t4\n"
        r = topics("add-partitions", "events", "--partitions", "6", "--validate-only")
        assert r.returncode == 0 and "nothing altered" in r.stdout
        assert topics("list").stdout == TOPICS + "events\t4\n"
        # delete-records
        with NativeClient(*gw.native) as c:
            c.produce("events", 3, [b"a", b"b", b"c", b"d"])
            c.produce("events", 0, [b"x"])
        r = topics("delete-records", "events", "--partition", "3", "--offset", "2")
        assert r.returncode == 0 and r.stdout == "topic events partition 3: log start offset 2\n", r.stderr
        assert offsets_of(topics("describe", "events").stdout)[3] == "3\t2\t4"
        r = topics("delete-records", "events", "--all-partitions", "--offset", "end")
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [f"topic events partition {p}: log start offset {s}"
                                         for p, s in ((0, 1), (1, 0), (2, 0), (3, 4))]
        with NativeClient(*gw.native) as c:
            assert c.fetch("events", 3, 4).records == [] and c.produce("events", 3, [b"e"]) == [4]
        # an offset some partitions do not reach: those say so, the others go on, exit 1
        r = topics("delete-records", "events", "--all-partitions", "--offset", "5")
        assert r.returncode == 1
        assert r.stdout == "topic events partition 3: log start offset 5\n"
        assert len(r.stderr.splitlines()) == 3 and "partition 0: offset out of range" in r.stderr
        assert gw.stop() == 0
    with GatewayProcess(data, "log_level=WARNING") as gw:  # everything persisted
        target = "%s:%d" % gw.native
        assert logway("topics", "--gateway", target, "list").stdout == TOPICS + "events\t4\n"
        assert offsets_of(logway("topics", "--gateway", target, "describe", "events").stdout) == [
            "0\t1\t1", "1\t0\t0", "2\t0\t0", "3\t5\t5"]
        assert "retention.ms\t3600000\ttopic" in logway("topics", "--gateway", target, "config", "events").stdout


def test_topics_admin_errors_are_one_line(tmp_path):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw:
        target = "%s:%d" % gw.native
        assert logway("topics", "--gateway", target, "create", "t", "--partitions", "2").returncode == 0
        cases = [
            (("alter", "nope", "--config", "retention.ms=1"), 1, "logway: topic not found: nope"),
            (("alter", "t", "--config", "no.such=1"), 1, "logway: invalid request: unknown topic config 'no.such'"),
            (("alter", "t", "--config", "retention.ms=soon"), 1, "logway: invalid request: topic config"),
            (("alter", "t", "--config", "storage.format=tank"), 1, "logway: invalid request: storage.format"),
            (("alter", "t", "--delete-config", "nope"), 1, "logway: invalid request: unknown topic config 'nope'"),
            (("alter", "t", "--config", "retention.ms"), 2, "logway: --config expects KEY=VALUE"),
            (("alter", "t"), 2, "logway: topics alter needs --config"),
            (("config", "nope"), 1, "logway: topic not found: nope"),
            (("add-partitions", "t", "--count", "2"), 1, "logway: invalid request: topic 't' has 2 partition(s)"),
            (("add-partitions", "t", "--count", "1"), 1, "logway: invalid request:"),
            (("add-partitions", "t", "--count", "0"), 2, "logway: --count must be at least 1"),
            (("add-partitions", "nope", "--count", "3"), 1, "logway: topic not found: nope"),
            (("delete-records", "t", "--partition", "0", "--offset", "3"), 1,
             "logway: offset out of range: offset=3, log_start_offset=0, log_end_offset=0"),
            (("delete-records", "t", "--partition", "7", "--offset", "0"), 1,
             "logway: partition not found: topic=t, partition=7"),
            (("delete-records", "nope", "--partition", "0", "--offset", "0"), 1, "logway: partition not found"),
            (("delete-records", "nope", "--all-partitions", "--offset", "0"), 1, "logway: topic not found: nope"),
            (("delete-records", "t", "--partition", "0", "--offset", "-1"), 2, "logway: --offset expects"),
            (("delete-records", "t", "--partition", "-1", "--offset", "0"), 2, "logway: --partition must be"),
        ]
        for args, code, message in cases:
            r = logway("topics", "--gateway", target, *args)
            assert r.returncode == code and r.stderr.startswith(message), (args, r.returncode, r.stderr)
            assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
        assert logway("topics", "--gateway", target, "list").stdout == TOPICS + "t\t2\n"


# -- issue 13: groups, topics describe details, one-line errors, options in either position -------------------------

def address(host_port: tuple[str, int]) -> str:
    return f"{host_port[0]}:{host_port[1]}"


def _one_line(r: subprocess.CompletedProcess, code: int, start: str) -> None:
    assert r.returncode == code and r.stderr.startswith(start), (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


def _rows(stdout: str) -> list[list[str]]:
    return [line.split("\t") for line in stdout.splitlines()[1:]]


def test_topics_describe_shows_size_segments_and_format(tmp_path):
    from logway.clients.tank import TankClient

    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw:
        target = address(gw.native)
        assert logway("topics", "create", "k", "--partitions", "2", "--gateway", target).returncode == 0
        assert logway("topics", "alter", "k", "--config", "segment.bytes=1024", "--gateway", target).returncode == 0
        with NativeClient(*gw.native) as c:
            for _ in range(8):
                c.produce("k", 1, [b"x" * 300])
        with TankClient(*gw.addresses["tank"]) as t:
            t.create_topic("tk", 1)
        r = logway("topics", "describe", "k", "--gateway", target)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[0] == "partition\tlog_start_offset\tlog_end_offset\tsize_bytes\tsegments\tformat"
        (p0, p1) = _rows(r.stdout)
        assert p0 == ["0", "0", "0", "0", "1", "kafka"]
        assert p1[:3] == ["1", "0", "8"] and int(p1[3]) > 8 * 300 and int(p1[4]) >= 3 and p1[5] == "kafka", p1
        r = logway("topics", "--gateway", target, "describe", "tk")
        assert _rows(r.stdout) == [["0", "0", "0", "0", "1", "tank"]], r.stdout + r.stderr


def test_groups_list_describe_and_reset_offsets(tmp_path):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw:
        target = address(gw.native)

        def groups(*args):
            return logway("groups", *args, "--gateway", target)

        assert groups("list").stdout == GROUPS
        with NativeClient(*gw.native) as c:
            c.create_topic("ev", 2)
            c.produce("ev", 0, [b"a"] * 5)
            c.produce("ev", 1, [b"b"] * 3)
            c.commit("ev", 0, "native-g", 2)
        # a native consumer's group: offsets only, Empty, lag = log end - committed
        assert groups("list").stdout == GROUPS + "native-g\tEmpty\t0\t-\n"
        r = groups("describe", "native-g")
        assert r.stdout.splitlines() == [
            "group\ttopic\tpartition\tcurrent_offset\tlog_end_offset\tlag\tconsumer_id\thost\tclient_id",
            "native-g\tev\t0\t2\t5\t3\t-\t-\t-"], r.stderr
        # a live Kafka group: its member owns both partitions
        consumer = group_consumer(address(gw.addresses["kafka"]), "ev", "kafka-g", client_id="cli-1",
                                  enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                                  max_poll_interval_ms=20000)
        try:
            assert len(poll_values(consumer, 8)) == 8
            with NativeClient(*gw.native) as c:
                c.produce("ev", 1, [b"c"] * 4)  # committed 3 below, log end 7: lag 4
            consumer.commit({TopicPartition("ev", 0): OffsetAndMetadata(5, ""),
                             TopicPartition("ev", 1): OffsetAndMetadata(3, "")})
            assert groups("list").stdout == GROUPS + "kafka-g\tStable\t1\tclassic\nnative-g\tEmpty\t0\t-\n"
            rows = _rows(groups("describe", "kafka-g").stdout)
            assert [r[:6] for r in rows] == [["kafka-g", "ev", "0", "5", "5", "0"],
                                             ["kafka-g", "ev", "1", "3", "7", "4"]]
            assert all(r[6].startswith("cli-1") and r[7] == "127.0.0.1" and r[8] == "cli-1" for r in rows), rows
            # the group must be inactive: refused, dry run or not
            for run in ((), ("--execute",)):
                r = groups("reset-offsets", "kafka-g", "--all-topics", "--to-earliest", *run)
                _one_line(r, 1, "logway: group has active members: 'kafka-g' is Stable with 1 member(s)")
        finally:
            consumer.close()
        assert groups("list").stdout == GROUPS + "kafka-g\tEmpty\t0\tclassic\nnative-g\tEmpty\t0\t-\n"
        # a dry run by default: the plan, nothing changed
        r = groups("reset-offsets", "kafka-g", "--all-topics", "--to-earliest")
        assert r.returncode == 0 and r.stdout.splitlines() == [
            "group\ttopic\tpartition\tcurrent_offset\tnew_offset", "kafka-g\tev\t0\t5\t0", "kafka-g\tev\t1\t3\t0"]
        assert "dry run" in r.stderr and "--execute" in r.stderr
        assert [r[3] for r in _rows(groups("describe", "kafka-g").stdout)] == ["5", "3"]
        # --execute applies; --to-offset is moved into the partition's range (as kafka-consumer-groups)
        r = groups("reset-offsets", "kafka-g", "--topic", "ev:1", "--to-offset", "99", "--execute")
        assert r.returncode == 0 and r.stdout.splitlines()[1:] == ["kafka-g\tev\t1\t3\t7"], r.stderr
        assert "99" in r.stderr  # the note about the offset moved to the log end
        r = groups("reset-offsets", "kafka-g", "--topic", "ev", "--to-offset", "1", "--execute")
        assert r.stdout.splitlines()[1:] == ["kafka-g\tev\t0\t5\t1", "kafka-g\tev\t1\t7\t1"], r.stderr
        assert [r[3:6] for r in _rows(groups("describe", "kafka-g").stdout)] == [["1", "5", "4"], ["1", "7", "6"]]
        with NativeClient(*gw.native) as c:
            assert c.committed("ev", 1, "kafka-g") == 1
        r = groups("reset-offsets", "kafka-g", "--topic", "ev", "--to-latest", "--execute")
        assert r.stdout.splitlines()[1:] == ["kafka-g\tev\t0\t1\t5", "kafka-g\tev\t1\t1\t7"], r.stderr
        r = groups("reset-offsets", "kafka-g", "--topic", "ev", "--to-datetime", "2000-01-01T00:00:00Z", "--execute")
        assert r.stdout.splitlines()[1:] == ["kafka-g\tev\t0\t5\t0", "kafka-g\tev\t1\t7\t0"], r.stderr
        r = groups("reset-offsets", "kafka-g", "--topic", "ev:0", "--to-datetime", "2999-01-01T00:00:00", "--execute")
        assert r.stdout.splitlines()[1:] == ["kafka-g\tev\t0\t0\t5"], r.stderr  # no record that late: the end
        # a new group may be given offsets (kafka-consumer-groups allows it for a named topic)
        r = groups("reset-offsets", "fresh", "--topic", "ev:1", "--to-earliest", "--execute")
        assert r.stdout.splitlines()[1:] == ["fresh\tev\t1\t-\t0"], r.stderr
        assert "fresh\tEmpty\t0" in groups("list").stdout
        # errors: one line each
        for args, code, message in [
            (("describe", "nope"), 1, "logway: group not found: nope"),
            (("reset-offsets", "kafka-g", "--topic", "nope", "--to-latest"), 1, "logway: topic not found: nope"),
            (("reset-offsets", "kafka-g", "--topic", "ev:5", "--to-latest"), 1,
             "logway: partition not found: topic=ev, partition=5"),
            (("reset-offsets", "never", "--all-topics", "--to-latest"), 1, "logway: invalid request: group 'never'"),
            (("reset-offsets", "kafka-g", "--to-latest"), 2, "logway: groups reset-offsets needs --topic"),
            (("reset-offsets", "kafka-g", "--topic", "ev", "--to-offset", "-3"), 2, "logway: --to-offset must be"),
            (("reset-offsets", "kafka-g", "--topic", "ev", "--to-datetime", "soon"), 2,
             "logway: --to-datetime expects"),
            (("reset-offsets", "kafka-g", "--topic", "ev"), 2, "logway groups reset-offsets: one of the arguments"),
            (("reset-offsets", "kafka-g", "--topic", "ev", "--to-latest", "--to-earliest"), 2,
             "logway groups reset-offsets: argument --to-earliest: not allowed with argument --to-latest"),
            (("reset-offsets", "kafka-g", "--topic", "ev", "--all-topics", "--to-latest"), 2,
             "logway groups reset-offsets: argument --all-topics: not allowed with argument --topic"),
            (("reset-offsets", "kafka-g", "--topic", "ev", "--to-latest", "--dry-run", "--execute"), 2,
             "logway groups reset-offsets: argument --execute: not allowed with argument --dry-run"),
        ]:
            _one_line(groups(*args), code, message)
        assert gw.stop() == 0
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw:  # offsets outlive a restart
        target = address(gw.native)
        assert logway("groups", "list", "--gateway", target).stdout == GROUPS + (
            "fresh\tEmpty\t0\t-\nkafka-g\tEmpty\t0\t-\nnative-g\tEmpty\t0\t-\n")


def test_bad_cli_input_is_one_line_and_options_go_either_side(tmp_path):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw:
        target = address(gw.native)
        # --gateway before or after the action
        assert logway("topics", "create", "t", "--gateway", target).returncode == 0
        assert logway("topics", "--gateway", target, "list").stdout == TOPICS + "t\t1\n"
        assert logway("topics", "list", "--gateway", target).stdout == TOPICS + "t\t1\n"
        assert logway("groups", "--gateway", target, "list").returncode == 0
        # given on both sides: the one after the action wins
        assert logway("topics", "--gateway", "127.0.0.1:1", "list", "--gateway", target).stdout == TOPICS + "t\t1\n"
        cases = [
            (("topics", "create", "x", "--partitions", "0", "--gateway", target), 2,
             "logway: --partitions must be at least 1, got 0"),
            (("topics", "create", "x", "--partitions", "-4", "--gateway", target), 2, "logway: --partitions must be"),
            (("topics", "create", "x", "--partitions", "many", "--gateway", target), 2,
             "logway topics create: argument --partitions: invalid int value: 'many'"),
            (("topics", "create", "--gateway", target), 2,
             "logway topics create: the following arguments are required: name"),
            (("topics", "lst", "--gateway", target), 2, "logway topics: argument action: invalid choice: 'lst'"),
            (("topics", "list", "--gateway", "localhost"), 2, "logway topics list: argument --gateway: expected"),
            (("topics", "list", "--gateway", "h:70000"), 2, "logway topics list: argument --gateway: expected"),
            (("topics", "list", "--bogus"), 2, "logway: unrecognized arguments: --bogus"),
            (("topics",), 2, "logway topics: the following arguments are required: action"),
            ((), 2, "logway: the following arguments are required: command"),
            (("nope",), 2, "logway: argument command: invalid choice: 'nope'"),
            (("topics", "describe", "nope", "--gateway", target), 1, "logway: topic not found: nope"),
            (("groups", "describe", "--gateway", target), 2,
             "logway groups describe: the following arguments are required: group"),
        ]
        for args, code, message in cases:
            _one_line(logway(*args), code, message)
        assert logway("topics", "list", "--gateway", target).stdout == TOPICS + "t\t1\n"  # nothing was created


def test_gateway_option_pointed_at_another_protocol_says_so(tmp_path):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw:
        for name in ("kafka", "tank"):
            where = address(gw.addresses[name])
            for args in (("topics", "list"), ("groups", "list"), ("topics", "create", "x")):
                _one_line(logway(*args, "--gateway", where), 1,
                          f"logway: {where} does not speak logway's native protocol (is it the Kafka or TANK port?)")
        with NativeClient(*gw.native) as c:
            assert c.list_topics() == []  # the create never reached a native listener
