"""The `logway` command against a real gateway process: serve (with SIGTERM shutdown) and topics admin."""

from __future__ import annotations

import subprocess
import sys

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient


def logway(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logway.cli", *args], capture_output=True, text=True,
                          timeout=60)


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
        assert logway("topics", "--gateway", target, "list").stdout == "events\t3\n"
        r = logway("topics", "--gateway", target, "describe", "events")
        assert r.stdout.splitlines()[1:] == ["0\t0\t0", "1\t0\t3", "2\t0\t0"]
        assert gw.stop() == 0  # SIGTERM: graceful, exit status 0
    with GatewayProcess(data, "log_level=WARNING") as gw:  # persistence across a restart
        target = "%s:%d" % gw.native
        with NativeClient(*gw.native) as c:
            assert [r.value for r in c.fetch("events", 1, 0).records] == [b"a", b"b", b"c"]
            assert c.produce("events", 1, [b"d"]) == [3]
        r = logway("topics", "--gateway", target, "delete", "events")
        assert r.returncode == 0, r.stderr
        assert logway("topics", "--gateway", target, "list").stdout == ""


def test_unreachable_gateway_and_bad_config(tmp_path):
    r = logway("topics", "--gateway", "127.0.0.1:1", "list")
    assert r.returncode == 1 and "cannot reach the gateway" in r.stderr
    r = logway("serve", "--set", "storage.flush=sometimes")
    assert r.returncode == 2 and "storage.flush must be one of" in r.stderr
    r = logway("serve", "--print-config", "--set", "storage.flush=always")
    assert r.returncode == 0 and "flush: always" in r.stdout


def test_second_gateway_on_a_locked_data_dir_exits_with_one_line(tmp_path):
    data = str(tmp_path / "data")
    with GatewayProcess(data, "log_level=WARNING"):
        r = logway("serve", "--data-dir", data, "--set", "listeners.native.port=0", "--set",
                   "listeners.kafka.port=0", "--set", "listeners.tank.port=0")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "lock" in r.stderr.lower(), r.stderr


def test_unloadable_certificate_exits_with_a_configuration_error(tmp_path):
    r = logway("serve", "--data-dir", str(tmp_path / "data"), "--set", "listeners.kafka.tls=true",
               "--set", f"tls.cert_file={tmp_path}/nope.pem", "--set", f"tls.key_file={tmp_path}/nope.key")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr, r.stderr
