"""The supervisor's admin listener (gateway/admin/supervisor.py) over real admin listeners: a `logway serve`
child stands for worker 0 and a port nobody listens on for a worker that does not answer; the merge of several
expositions; TLS both ways. (With a real `workers: 2` supervisor: tests/e2e/test_workers.py.)"""

from __future__ import annotations

import http.client
import socket
import ssl

import orjson
import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.gateway.admin.supervisor import SupervisorAdmin, WorkerView, merge_expositions
from logway.gateway.cluster.ownership import partition_leader
from logway.gateway.config import TlsSettings
from logway.gateway.tls import server_ssl_context

from ..certs import self_signed


def _get(address, path: str, method: str = "GET", context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    if context is not None:
        conn = http.client.HTTPSConnection(*address, timeout=20, context=context)
    else:
        conn = http.client.HTTPConnection(*address, timeout=20)
    try:
        conn.request(method, path)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def _samples(text: bytes) -> dict[tuple, float]:
    """(sample name, sorted labels) -> value of an exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


def _dead_address() -> tuple[str, int]:
    """An address nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    gw = GatewayProcess(str(tmp_path_factory.mktemp("worker") / "data"), "log_level=WARNING",
                        "listeners.tank.enabled=true")
    yield gw
    assert gw.stop() == 0


def _admin(view: WorkerView, **kw) -> SupervisorAdmin:
    admin = SupervisorAdmin("127.0.0.1", 0, view, 10.0, **kw)
    admin.start()
    return admin


def test_metrics_label_every_sample_with_its_worker_and_say_who_answered(worker):
    dead = _dead_address()
    view = WorkerView(2, lambda: [worker.addresses["admin"], dead], lambda i: True, lambda i: 3 * i)
    admin = _admin(view)
    try:
        status, body = _get(admin.address, "/metrics")
        assert status == 200
        merged = _samples(body)
        own = _samples(_get(worker.addresses["admin"], "/metrics")[1])
        assert merged[("logway_worker_up", (("worker", "0"),))] == 1
        assert merged[("logway_worker_up", (("worker", "1"),))] == 0  # not answering: no series of its own
        assert merged[("logway_worker_restarts_total", (("worker", "1"),))] == 3
        from_workers = {key for key in merged if not key[0].startswith("logway_worker_")}
        assert from_workers and all(dict(labels).get("worker") == "0" for _, labels in from_workers)
        # every series of the worker, under its label; a value that does not move between scrapes is the same
        assert {(name, tuple(sorted(dict(labels, worker="0").items()))) for name, labels in own} == from_workers
        start = ("logway_start_time_seconds", (("worker", "0"),))
        assert merged[start] == own[("logway_start_time_seconds", ())]
    finally:
        admin.close()


def test_ready_is_503_until_every_worker_started_and_answers(worker):
    dead = _dead_address()
    started = {0: True, 1: False}
    addresses = [worker.addresses["admin"], dead]
    admin = _admin(WorkerView(2, lambda: addresses, started.get, lambda i: 0))
    try:
        status, body = _get(admin.address, "/ready")
        assert status == 503 and orjson.loads(body)["workers"] == {"0": "ready", "1": "starting"}
        assert orjson.loads(body)["state"] == "worker 1 starting"
        started[1] = True
        status, body = _get(admin.address, "/ready")
        assert status == 503 and orjson.loads(body)["workers"] == {"0": "ready", "1": "not answering"}
        addresses[1] = worker.addresses["admin"]  # (both "workers" answer now)
        status, body = _get(admin.address, "/ready")
        assert status == 200 and orjson.loads(body) == {
            "ready": True, "state": "ready", "workers": {"0": "ready", "1": "ready"},
            "listeners": {f"admin.{i}": "%s:%d" % worker.addresses["admin"] for i in (0, 1)}}
        status, body = _get(admin.address, "/health")
        assert status == 200 and orjson.loads(body) == {"status": "live", "workers": 2}
        status, body = _get(admin.address, "/api/nothing")
        assert status == 404 and orjson.loads(body) == {"error": "not found: /api/nothing"}
        assert _get(admin.address, "/metrics", "POST")[0] == 405
    finally:
        admin.close()


def test_merging_keeps_each_familys_type_and_help_and_labels_every_sample():
    texts = {}
    for i in range(2):
        registry = CollectorRegistry()
        Counter("logway_things", "Things seen", ["kind"], registry=registry).labels("a").inc(i + 1)
        waits = Histogram("logway_wait_seconds", "Waits", buckets=(0.1, 1.0), registry=registry)
        waits.observe(0.05 if i == 0 else 0.5)
        texts[i] = generate_latest(registry).decode()
    registry = CollectorRegistry()

    class Merged:
        def collect(self):
            return merge_expositions({**texts, 2: "this is not an exposition {"})[0]

    assert merge_expositions({**texts, 2: "this is not an exposition {"})[1] == {0, 1}  # the bad one left out
    registry.register(Merged())
    out = generate_latest(registry).decode()
    assert "# TYPE logway_things_total counter" in out and "# HELP logway_wait_seconds Waits" in out
    assert "# TYPE logway_wait_seconds histogram" in out
    samples = _samples(out.encode())
    assert samples[("logway_things_total", (("kind", "a"), ("worker", "0")))] == 1
    assert samples[("logway_things_total", (("kind", "a"), ("worker", "1")))] == 2
    assert samples[("logway_wait_seconds_bucket", (("le", "0.1"), ("worker", "0")))] == 1
    assert samples[("logway_wait_seconds_bucket", (("le", "0.1"), ("worker", "1")))] == 0
    assert samples[("logway_wait_seconds_count", (("worker", "1"),))] == 1


def test_with_tls_it_serves_tls_and_trusts_only_the_configured_certificate(tmp_path):
    cert, key = self_signed(tmp_path, "admin")
    other_cert, other_key = self_signed(tmp_path, "other")
    right = GatewayProcess(str(tmp_path / "right"), f"tls.cert_file={cert}", f"tls.key_file={key}",
                           "listeners.admin.tls=true", "log_level=WARNING")
    try:
        wrong = GatewayProcess(str(tmp_path / "wrong"), f"tls.cert_file={other_cert}", f"tls.key_file={other_key}",
                               "listeners.admin.tls=true", "log_level=WARNING")
        try:
            view = WorkerView(2, lambda: [right.addresses["admin"], wrong.addresses["admin"]], lambda i: True,
                              lambda i: 0)
            admin = _admin(view, server_context=server_ssl_context(TlsSettings(cert_file=cert, key_file=key)),
                           cert_file=cert)
            try:
                client = ssl.create_default_context(cafile=cert)
                status, body = _get(admin.address, "/metrics", context=client)
                assert status == 200
                merged = _samples(body)
                assert merged[("logway_worker_up", (("worker", "0"),))] == 1
                assert merged[("logway_worker_up", (("worker", "1"),))] == 0  # another certificate: not trusted
                with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
                    _get(admin.address, "/health")  # plain HTTP to a TLS listener: no answer
            finally:
                admin.close()
        finally:
            assert wrong.stop() == 0
    finally:
        assert right.stop() == 0


def test_a_port_in_use_fails_start():
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        admin = SupervisorAdmin("127.0.0.1", blocker.getsockname()[1], WorkerView(1, list, bool, int), 10.0)
        with pytest.raises(OSError, match=f"admin listener cannot listen on 127.0.0.1:{blocker.getsockname()[1]}: "
                                          "address already in use .*: stop it or set listeners.admin.port"):
            admin.start()
        admin.close()


def test_bench_readings_sum_the_workers(worker):
    """`bench load --workers N` reads the supervisor's /metrics (bench/requests.py `metric_readings`): counters are
    summed over the `worker` label — here the same worker twice, idle after a transcoded read, so exactly twice
    its own."""
    from logway.bench.requests import metric_readings

    with NativeClient(*worker.addresses["native"]) as native:
        native.create_topic("sums")
        native.produce("sums", 0, [b"one", b"two"])  # stored as Kafka batches
    with TankClient(*worker.addresses["tank"]) as tank:
        assert [m.value for m in tank.get("sums", 0, 1).messages] == [b"one", b"two"]  # transcoded to a bundle

    twice = [worker.addresses["admin"], worker.addresses["admin"]]
    admin = _admin(WorkerView(2, lambda: twice, lambda i: True, lambda i: 0))
    try:
        own, both = metric_readings(worker.addresses["admin"]), metric_readings(admin.address)
        assert own["transcoded_reads"][0] >= 1
        for name in ("transcoded_reads", "transcoded_reads_shared", "transcoded_batches"):
            assert both[name] == [2 * own[name][0]], name
        assert both["python_gc_threshold"] == own["python_gc_threshold"]  # a setting: not summed
    finally:
        admin.close()


def test_the_console_endpoints_say_which_worker_did_not_answer(worker):
    """Worker 0 is a dead port here and the real gateway plays worker 1: topics come from whoever answered (and say
    who did not), groups need worker 0 (the coordinator), the message browser needs the partition's owner."""
    dead = _dead_address()
    admin = _admin(WorkerView(2, lambda: [dead, worker.addresses["admin"]], lambda i: True, lambda i: 0))
    with NativeClient(*worker.addresses["native"]) as native:
        native.create_topic("halves", 2)
        native.produce("halves", 0, [b"a"])
    try:
        status, body = _get(admin.address, "/api/topics")
        listed = orjson.loads(body)
        assert status == 200 and listed["workers_not_answering"] == [0]
        halves = next(t for t in listed["topics"] if t["name"] == "halves")
        assert [(p["partition"], p["worker"]) for p in halves["partitions"]] == [(0, 1), (1, 1)]
        status, body = _get(admin.address, "/api/groups")
        assert status == 503 and orjson.loads(body) == {"error": "worker 0 (the group coordinator) did not answer"}
        on_dead = partition_leader("halves", 0, 2) == 0
        status, body = _get(admin.address, f"/api/topics/halves/partitions/{0 if on_dead else 1}/messages")
        assert status == 503 and orjson.loads(body) == {"error": "worker 0, the partition's owner, did not answer"}
        status, body = _get(admin.address, "/api/rates")
        assert status == 200 and "native" in orjson.loads(body)["totals"]
        status, body = _get(admin.address, "/api/topics/halves/partitions/%C2%B2/messages")  # "²": not a number
        assert status == 503 and "worker 0" in orjson.loads(body)["error"]  # (worker 0 would answer it 400)
    finally:
        admin.close()
