"""`logway bench floor` and `load-floor` (bench/floor.py): a minimal relay process of each kind (bare epoll, trio)
copies the client's messages from one connection to the other and the benchmark reports their round trips; a minimal
server of each kind answers many closed-loop connections and the benchmark reports requests/s and the server's CPU
per request. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from logway.bench.floor import MODES, bench_floor, bench_load_floor


@pytest.mark.parametrize("mode", MODES)
def test_each_relay_carries_every_message(mode):
    rtts = bench_floor(mode, samples=30, warmup=3, gap_ms=0.2)
    assert len(rtts) == 30
    assert rtts == sorted(rtts) and rtts[0] > 0


def test_the_command_reports_both_relays_and_refuses_unknown_ones():
    out = subprocess.run([sys.executable, "-m", "logway.cli", "bench", "floor", "--samples", "10", "--warmup", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "epoll  relay: p50" in out.stdout and "trio   relay: p50" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "logway.cli", "bench", "floor", "--modes", "uring"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--modes takes epoll, trio" in bad.stderr


@pytest.mark.parametrize("mode", MODES)
def test_each_load_floor_server_answers_every_connection(mode):
    answered, wall, cpu = bench_load_floor(mode, connections=40, seconds=0.3)
    assert answered >= 40  # each connection's first request at least (a connection past the end sends no more)
    assert wall >= 0.3 and cpu > 0


def test_the_load_floor_command_reports_both_servers_and_checks_its_arguments():
    out = subprocess.run([sys.executable, "-m", "logway.cli", "bench", "load-floor", "--connections", "20",
                          "--seconds", "0.2"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for mode in MODES:
        line = next(x for x in out.stdout.splitlines() if x.strip().startswith(f"{mode} "))
        assert "requests/s" in line and "µs of server CPU per request" in line
    for bad in (["--modes", "uring"], ["--connections", "0"]):
        out = subprocess.run([sys.executable, "-m", "logway.cli", "bench", "load-floor", *bad],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "logway bench load-floor: --" in out.stderr
