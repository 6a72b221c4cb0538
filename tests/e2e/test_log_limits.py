"""`log_repeat_limit` (gateway/log_limits.py) in a real `logway serve`: a storm of connections past the connection
limit — each one a WARNING line — logs at most the limit's lines, counts the rest in
`logway_log_lines_suppressed_total`, and the gateway serves on."""

from __future__ import annotations

import socket
import urllib.request

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient


def _suppressed(gw) -> float:
    text = urllib.request.urlopen("http://%s:%d/metrics" % tuple(gw.addresses["admin"]), timeout=10).read().decode()
    line = next(x for x in text.splitlines() if x.startswith('logway_log_lines_suppressed_total{level="WARNING"}'))
    return float(line.split()[-1])


def test_a_storm_of_refused_connections_logs_a_bounded_number_of_lines(tmp_path):
    log_path = tmp_path / "gateway.log"
    with open(log_path, "wb") as log_file:
        gw = GatewayProcess(str(tmp_path / "data"), "limits.max_connections=1", "log_repeat_limit=5",
                            stderr=log_file)
    try:
        host, port = gw.addresses["native"]
        with NativeClient(host, port) as held:  # the one connection the limit lets in
            held.ping()
            for _ in range(200):
                with socket.create_connection((host, port), timeout=10) as refused:
                    assert refused.recv(16) == b""  # closed unserved
            held.ping()  # serving on
            assert _suppressed(gw) == 195
    finally:
        assert gw.stop() == 0
    lines = log_path.read_text().splitlines()
    assert sum("connection limit reached" in line for line in lines) == 5, lines[-10:]
