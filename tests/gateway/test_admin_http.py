"""The admin listener in process: Prometheus metrics that move with traffic (parsed with prometheus_client's own
parser), the probes through start-up and shutdown, the console's JSON endpoints — the message browser's search and
the actions, native requests with their guards — and hostile HTTP answered cleanly while the listener keeps serving.
(The console in a browser, against a gateway process: tests/e2e.)"""

from __future__ import annotations

import ssl
import threading

import h11
import orjson
import pytest
import trio
from trio.testing import wait_all_tasks_blocked
from prometheus_client.parser import text_string_to_metric_families

from logway.clients.kafka import AsyncKafkaClient, KafkaConfig
from logway.codecs import native as nv
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record
from logway.storage import LogEngine
from logway.gateway.admin import http as admin_http
from logway.gateway.formats import KAFKA, STORAGE_FORMATS
from logway.gateway.server import Gateway

from ..certs import self_signed
from ..conftest import AsyncNative, gateway_config, long_polls_parked, running_gateway, until


# -- an HTTP client on h11 --------------------------------------------------------------------------------------------
class Http:
    """One keep-alive HTTP/1.1 connection to the admin listener."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    async def open(cls, gw: Gateway) -> Http:
        return cls(await trio.open_tcp_stream(*gw.addresses["admin"]))

    async def request(self, path: str, method: str = "GET", headers=(), body: bytes = b"") -> tuple[
            int, dict[str, str], bytes]:
        if self.conn.our_state is h11.DONE:
            self.conn.start_next_cycle()
        sized = [("Content-Length", str(len(body)))] if body or method == "POST" else []
        req = h11.Request(method=method, target=path, headers=[("Host", "localhost"), *headers, *sized])
        await self.stream.send_all(self.conn.send(req) + (self.conn.send(h11.Data(data=body)) if body else b"")
                                   + self.conn.send(h11.EndOfMessage()))
        response, body = None, b""
        with trio.fail_after(10):
            while True:
                event = self.conn.next_event()
                if event is h11.NEED_DATA:
                    self.conn.receive_data(await self.stream.receive_some())
                elif type(event) is h11.Response:
                    response = event
                elif type(event) is h11.Data:
                    body += event.data
                elif type(event) is h11.EndOfMessage:
                    break
        return response.status_code, {k.decode().lower(): v.decode() for k, v in response.headers}, body

    async def aclose(self) -> None:
        await self.stream.aclose()


async def get(gw: Gateway, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    http = await Http.open(gw)
    try:
        return await http.request(path, method)
    finally:
        await http.aclose()


async def get_json(gw: Gateway, path: str):
    status, headers, body = await get(gw, path)
    assert headers["content-type"] == "application/json", (status, body)
    return status, orjson.loads(body)


async def scrape(gw: Gateway) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics as {(sample name, sorted labels): value}, parsed by prometheus_client."""
    status, headers, body = await get(gw, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def raw(gw: Gateway, data: bytes, *, read_until_close: bool = True) -> bytes:
    """Send `data` on a fresh connection and return all the listener answers until it closes the connection."""
    stream = await trio.open_tcp_stream(*gw.addresses["admin"])
    try:
        await stream.send_all(data)
        out = b""
        with trio.fail_after(10):
            while True:
                try:
                    chunk = await stream.receive_some()
                except trio.BrokenResourceError:
                    break
                if not chunk:
                    break
                out += chunk
                if not read_until_close and b"\r\n\r\n" in out:
                    break
        return out
    finally:
        await stream.aclose()


# -- metrics ------------------------------------------------------------------------------------------------------
async def test_metrics_move_when_traffic_flows_through_native_and_kafka(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=always") as gw:
        before = await scrape(gw)
        assert value(before, "logway_ready") == 1
        assert value(before, "logway_requests_total", protocol="native", request="Produce") == 0
        assert value(before, "logway_connections_open", listener="native") == 0

        native = await AsyncNative.connect(gw)
        assert await native.request(nv.CreateTopicRequest("events", 2)) == nv.CreateTopicResponse(True)
        await native.produce("events", 0, [b"a", b"b", b"c"])
        fetched = await native.request(nv.FetchRequest("events", 0, 0, 1 << 20))
        assert len(fetched.records) == 3
        assert await native.request(nv.OffsetCommitRequest("events", 0, "billing", 1)) == \
            nv.OffsetCommitResponse(True)
        assert isinstance(await native.request(nv.FetchRequest("nope", 0, 0, 100)), nv.ErrorResponse)

        kafka = AsyncKafkaClient(KafkaConfig.parse("{}:{}".format(*gw.addresses["kafka"])))
        await kafka.produce("events", 1, encode_batch([Record(b"k1", b"key"), Record(b"k2")], default_timestamp=0))
        result = await kafka.fetch("events", 1, 0, 1 << 20)
        assert result is not None

        after = await scrape(gw)
        await kafka.aclose()
        await native.aclose()

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    for request in ("CreateTopic", "Produce", "OffsetCommit"):
        assert moved("logway_requests_total", protocol="native", request=request) == 1, request
    assert moved("logway_requests_total", protocol="native", request="Fetch") == 2
    assert moved("logway_request_errors_total", protocol="native", request="Fetch") == 1  # the unknown topic
    assert moved("logway_request_errors_total", protocol="native", request="Produce") == 0
    assert moved("logway_request_duration_seconds_count", protocol="native", request="Produce") == 1
    assert value(after, "logway_request_duration_seconds_bucket", protocol="native", request="Produce",
                 le="+Inf") == 1
    assert value(after, "logway_request_duration_seconds_sum", protocol="native", request="Produce") > 0
    assert moved("logway_requests_total", protocol="kafka", request="Produce") == 1
    assert moved("logway_requests_total", protocol="kafka", request="Fetch") >= 1
    for protocol in ("native", "kafka"):
        assert moved("logway_bytes_received_total", protocol=protocol) > 0
        assert moved("logway_bytes_sent_total", protocol=protocol) > 0
        assert moved("logway_connections_accepted_total", listener=protocol) == 1
    assert value(after, "logway_connections_open", listener="native") == 1
    assert moved("logway_records_received_total", protocol="native") == 3
    assert moved("logway_records_received_total", protocol="kafka") == 2
    assert moved("logway_records_sent_total", protocol="native") == 3
    assert moved("logway_records_sent_total", protocol="kafka") == 2

    assert value(after, "logway_topic_partitions", topic="events", format="kafka") == 2
    assert value(after, "logway_records_appended_total", topic="events", partition="0") == 3
    assert value(after, "logway_records_appended_total", topic="events", partition="1") == 2
    assert value(after, "logway_bytes_appended_total", topic="events", partition="0") > 0
    assert value(after, "logway_log_end_offset", topic="events", partition="0") == 3
    assert value(after, "logway_last_stable_offset", topic="events", partition="1") == 2
    assert value(after, "logway_log_start_offset", topic="events", partition="0") == 0
    assert value(after, "logway_log_size_bytes", topic="events", partition="0") > 0
    assert value(after, "logway_log_segments", topic="events", partition="0") == 1
    assert value(after, "logway_consumer_group_committed_offset", group="billing", topic="events",
                 partition="0") == 1
    assert value(after, "logway_consumer_group_lag", group="billing", topic="events", partition="0") == 2

    # flush: always: the produces and the commit waited for group-commit rounds
    assert moved("logway_fsyncs_total", trigger="group_commit") >= 2
    assert moved("logway_fsync_duration_seconds_count", trigger="group_commit") >= 2
    assert moved("logway_group_commit_batch_size_count") >= 2
    assert value(after, "logway_recovery_unclean") == 0
    assert ("process_resident_memory_bytes", ()) in after  # prometheus_client's process collector


async def test_long_polls_and_connections_are_counted(tmp_path):
    async with running_gateway(tmp_path / "data", "limits.max_connections_per_ip=2") as gw:
        native = await AsyncNative.connect(gw)
        await native.request(nv.CreateTopicRequest("waits", 1))
        parked = await AsyncNative.connect(gw)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked.request, nv.FetchRequest("waits", 0, 0, 1 << 20, max_wait_ms=10_000))
            await long_polls_parked(gw)
            during = await scrape(gw)
            refused = await trio.open_tcp_stream(*gw.addresses["native"])  # a third from 127.0.0.1: refused
            with trio.fail_after(5):
                assert await refused.receive_some() == b""
            await refused.aclose()
            await native.produce("waits", 0, [b"wake up"])
        after = await scrape(gw)
        await parked.aclose()
        await native.aclose()
    assert value(during, "logway_long_polls_parked") == 1
    assert value(after, "logway_long_polls_parked") == 0
    assert value(after, "logway_long_polls_total") >= 1
    assert value(during, "logway_connections_open", listener="native") == 2
    assert value(after, "logway_connections_refused_total", listener="native") == 1
    assert value(after, "logway_connections_open", listener="admin") == 1  # the scrape's own


async def test_interval_flushes_are_counted(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=interval", "storage.flush_interval_ms=20") as gw:
        native = await AsyncNative.connect(gw)
        await native.request(nv.CreateTopicRequest("r", 1))
        await native.produce("r", 0, [b"x" * 100] * 10)
        await until(lambda: gw.committer.stats.passes["interval"] >= 2, "two interval flushes")
        samples = await scrape(gw)
        await native.aclose()
    assert value(samples, "logway_fsyncs_total", trigger="interval") >= 2
    assert value(samples, "logway_fsync_duration_seconds_count", trigger="interval") >= 2
    assert value(samples, "logway_fsyncs_total", trigger="group_commit") == 0


def torn_log(data) -> None:
    """A data directory as a crash leaves it: one record in topic r, then 13 bytes of a torn batch."""
    engine = LogEngine(data, STORAGE_FORMATS)
    engine.create_topic("r", 1)
    engine.partition("r", 0).append(KAFKA.make_batch([Record(b"kept")], 0))
    path = engine.partition("r", 0).segments[-1].log_path
    engine.close(clean=False)
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x05torn!")


async def test_recovery_results_at_start_are_reported(tmp_path):
    data = tmp_path / "data"
    torn_log(data)
    async with running_gateway(data) as gw:
        samples = await scrape(gw)
    assert value(samples, "logway_recovery_unclean") == 1
    assert value(samples, "logway_recovery_truncated_bytes", topic="r", partition="0") == 13
    assert value(samples, "logway_recovery_segments_dropped", topic="r", partition="0") == 0
    assert value(samples, "logway_recovery_transactions", outcome="ended") == 0
    assert value(samples, "logway_log_end_offset", topic="r", partition="0") == 1


# -- probes -------------------------------------------------------------------------------------------------------
async def test_health_is_live_from_the_start_and_ready_only_while_serving(tmp_path, monkeypatch):
    from logway.gateway import server

    opened = threading.Event()
    closing = threading.Event()
    real_engine = server.LogEngine

    def slow_engine(*args, **kwargs):  # storage "recovering" until the test lets it open
        opened.wait(10)
        return real_engine(*args, **kwargs)

    monkeypatch.setattr(server, "LogEngine", slow_engine)
    gw = Gateway(gateway_config(tmp_path / "data"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gw.run)
        with trio.fail_after(5):
            while "admin" not in gw.addresses:
                await trio.sleep(0.01)
        status, _, body = await get(gw, "/health")
        assert status == 200 and orjson.loads(body) == {"status": "live"}
        status, starting = await get_json(gw, "/ready")
        assert status == 503 and starting["ready"] is False and starting["state"] == "starting"
        assert (await get_json(gw, "/api/topics"))[0] == 503  # no storage to show yet
        opened.set()
        with trio.fail_after(10):
            while not gw.ready:
                await trio.sleep(0.01)
        status, ready = await get_json(gw, "/ready")
        assert status == 200 and ready["ready"] is True and ready["storage_open"] is True
        assert set(ready["listeners"]) == {"admin", "native", "kafka", "tank"}

        real_close = gw.engine.close
        gw.engine.close = lambda **kw: (closing.wait(10), real_close(**kw))[1]  # a slow final sync
        gw.request_shutdown()
        status, stopping = await get_json(gw, "/ready")
        assert status == 503 and stopping["state"] == "stopping"
        assert (await get(gw, "/health"))[0] == 200  # still alive while it stops
        closing.set()
    assert gw.state == "stopped"


async def test_admin_listener_can_be_disabled(tmp_path):
    async with running_gateway(tmp_path / "data", "listeners.admin.enabled=false") as gw:
        assert "admin" not in gw.addresses and gw.admin is None
        assert gw.ready


async def test_admin_listener_serves_tls_when_asked(tmp_path):
    cert, key = self_signed(tmp_path, "admin")
    async with running_gateway(tmp_path / "data", f"tls.cert_file={cert}", f"tls.key_file={key}",
                               "listeners.admin.tls=true") as gw:
        context = ssl.create_default_context(cafile=cert)
        tcp = await trio.open_tcp_stream(*gw.addresses["admin"])
        http = Http(trio.SSLStream(tcp, context, server_hostname="localhost"))
        status, _, body = await http.request("/health")
        assert status == 200 and orjson.loads(body) == {"status": "live"}
        await http.aclose()
        assert await raw(gw, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n") == b""  # plain HTTP: no answer


async def test_admin_port_in_use_names_the_listener_and_address(tmp_path):
    blocker = trio.socket.socket()
    await blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    gw = Gateway(gateway_config(tmp_path / "data", f"listeners.admin.port={port}"))
    with pytest.raises(BaseException) as caught:
        async with trio.open_nursery() as nursery:
            await nursery.start(gw.run)
    blocker.close()
    errors = caught.value.subgroup(lambda e: isinstance(e, OSError))
    assert errors is not None and [str(e) for e in _leaves(errors)] == [
        f"admin listener cannot listen on 127.0.0.1:{port}: address already in use (another process listens there): "
        "stop it or set listeners.admin.port"], caught.value


def _leaves(group):
    for e in group.exceptions:
        yield from (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])


# -- the JSON endpoints -------------------------------------------------------------------------------------------
async def test_topics_groups_and_messages_endpoints(tmp_path):
    async with running_gateway(tmp_path / "data") as gw:
        native = await AsyncNative.connect(gw)
        await native.request(nv.CreateTopicRequest("orders", 2))
        kafka = AsyncKafkaClient(KafkaConfig.parse("{}:{}".format(*gw.addresses["kafka"])))  # headers: Kafka only
        await kafka.produce("orders", 1, encode_batch([
            Record(b"first", b"k1", 1_700_000_000_000, (("h", b"v"),)),
            Record(b"\xff\x00binary", None, 1_700_000_000_001, (("n", None),))], default_timestamp=0))
        await kafka.aclose()
        await native.produce("orders", 1, [Record(b"<script>alert(1)</script>", b"k3")])
        await native.request(nv.OffsetCommitRequest("orders", 1, "shipping", 1, "meta"))

        status, topics = await get_json(gw, "/api/topics")
        assert status == 200
        (orders,) = [t for t in topics["topics"] if t["name"] == "orders"]
        assert orders["format"] == "kafka" and orders["records"] == 3 and orders["size_bytes"] > 0
        p1 = orders["partitions"][1]
        assert (p1["partition"], p1["log_start_offset"], p1["log_end_offset"], p1["last_stable_offset"],
                p1["segments"], p1["records_appended"]) == (1, 0, 3, 3, 1, 3)

        status, groups = await get_json(gw, "/api/groups")
        (shipping,) = groups["groups"]
        assert shipping["group"] == "shipping" and shipping["state"] == "Empty" and shipping["lag"] == 2
        assert shipping["partitions"] == [{"topic": "orders", "partition": 1, "committed": 1, "end": 3, "lag": 2,
                                           "metadata": "meta",
                                           "commit_time_ms": shipping["partitions"][0]["commit_time_ms"]}]

        status, page = await get_json(gw, "/api/topics/orders/partitions/1/messages?last=2")
        assert status == 200 and page["end_offset"] == 3 and page["format"] == "kafka"
        second, third = page["messages"]
        assert second["offset"] == 1 and second["key"] is None
        assert second["value"] == {"size": 8, "hex": "ff0062696e617279", "text": None, "truncated": False}
        assert second["headers"] == [{"key": "n", "value": None}]
        assert third["value"]["text"] == "<script>alert(1)</script>"  # data, escaped by the console
        status, page = await get_json(gw, "/api/topics/orders/partitions/1/messages")
        first = page["messages"][0]
        assert first["timestamp"] == 1_700_000_000_000 and first["key"]["text"] == "k1"
        assert first["headers"] == [{"key": "h", "value": {"size": 1, "hex": "76", "text": "v",
                                                           "truncated": False}}]
        assert (await get_json(gw, "/api/topics/orders/partitions/0/messages"))[1]["messages"] == []
        assert (await get_json(gw, "/api/topics/nope/partitions/0/messages"))[0] == 404
        assert (await get_json(gw, "/api/topics/orders/partitions/7/messages"))[0] == 404
        assert (await get_json(gw, "/api/topics/orders/partitions/x/messages"))[0] == 400
        assert (await get_json(gw, "/api/topics/orders/partitions/0/messages?last=0"))[0] == 400
        assert (await get_json(gw, "/api/topics/orders/partitions/0/messages?last=100000"))[0] == 400

        gw.admin.sampler.sample()
        await native.produce("orders", 0, [b"r"] * 5)
        gw.admin.sampler.sample()
        status, rates = await get_json(gw, "/api/rates")
        assert set(rates["protocols"]) == {"native", "kafka", "tank"}
        assert rates["protocols"]["native"]["records_in"][-1] > 0
        assert rates["protocols"]["kafka"]["records_in"][-1] == 0
        assert rates["totals"]["native"]["records_in"] == 6
        await native.aclose()


async def test_large_values_are_cut_for_the_console(tmp_path):
    async with running_gateway(tmp_path / "data") as gw:
        native = await AsyncNative.connect(gw)
        await native.request(nv.CreateTopicRequest("big", 1))
        await native.produce("big", 0, ["é".encode() * 5000])  # 10000 bytes, two per character
        _, page = await get_json(gw, "/api/topics/big/partitions/0/messages?last=1")
        value_ = page["messages"][0]["value"]
        assert value_["size"] == 10000 and value_["truncated"] is True
        assert value_["text"] == "é" * 1024 and len(value_["hex"]) == 2 * 2048
        await native.aclose()


async def test_console_files_are_served_with_a_strict_policy(tmp_path):
    async with running_gateway(tmp_path / "data") as gw:
        status, headers, body = await get(gw, "/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert b"/console.js" in body and b"<script>" not in body  # no inline script: the CSP forbids it
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        status, headers, js = await get(gw, "/console.js")
        assert status == 200 and headers["content-type"].startswith("text/javascript")
        assert b"innerHTML" not in js  # record data goes in as text nodes only
        status, headers, body = await get(gw, "/", "HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0


# -- hostile HTTP -------------------------------------------------------------------------------------------------
async def test_hostile_requests_get_clean_answers_and_the_listener_keeps_serving(tmp_path, monkeypatch):
    monkeypatch.setattr(admin_http, "KEEPALIVE_S", 0.3)
    async with running_gateway(tmp_path / "data", "limits.request_timeout_ms=300") as gw:
        # a request line that is no HTTP at all
        answer = await raw(gw, b"\x16\x03\x01 garbage \x00\xff\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400 ") and answer.count(b"HTTP/1.1") == 1
        # headers over the limit, sent whole
        answer = await raw(gw, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 431 ")
        # ... and just over it (20,000 bytes), which arrives whole in the listener's second receive
        answer = await raw(gw, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 431 ")
        # a body over the limit
        answer = await raw(gw, b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n"
                           + b"x" * 200_000)
        assert answer.startswith(b"HTTP/1.1 413 ")
        # a request that never ends (slow loris), and an idle keep-alive connection: both closed in time
        answer = await raw(gw, b"GET /health HTTP/1.1\r\nHost: x\r\n")
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert await raw(gw, b"") == b""
        # HTTP/1.0 without Host, a lone LF line ending, a missing version: parsed or refused, never a hang
        assert (await raw(gw, b"GET /health HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        assert (await raw(gw, b"GET /health\r\n\r\n")).startswith(b"HTTP/1.1 400 ")

        http = await Http.open(gw)
        status, headers, body = await http.request("/no/such/page")
        assert status == 404 and orjson.loads(body) == {"error": "not found: /no/such/page"}
        status, headers, body = await http.request("/metrics", "POST")
        assert status == 405 and headers["allow"] == "GET, HEAD"
        status, headers, body = await http.request("/api/topics/%2e%2e/partitions/0/messages")
        assert status == 404
        status, _, _ = await http.request("/health")  # the same keep-alive connection still serves
        assert status == 200
        await http.aclose()
        assert (await get(gw, "/health"))[0] == 200


async def test_a_connection_beyond_the_admin_limit_closes_the_one_idle_longest(tmp_path, monkeypatch):
    """At the limit, a new connection (a probe) is served: the connection idle the longest is closed for it — then
    one whose request is still arriving — never one busy answering; when every one is, the new one is refused."""
    monkeypatch.setattr(admin_http, "MAX_CONNECTIONS", 2)
    async with running_gateway(tmp_path / "data") as gw:
        oldest, newer = await Http.open(gw), await Http.open(gw)
        assert (await oldest.request("/health"))[0] == 200
        assert (await newer.request("/health"))[0] == 200
        assert (await get(gw, "/health"))[0] == 200  # a probe at the limit: served
        assert await oldest.stream.receive_some() == b""  # closed for it: the one idle the longest
        assert (await newer.request("/ready"))[0] == 200  # still served
        slow = await trio.open_tcp_stream(*gw.addresses["admin"])
        await slow.send_all(b"GET /health HTTP/1.1\r\nHo")  # a request still arriving: taken after idle ones
        await wait_all_tasks_blocked()
        assert (await get(gw, "/ready"))[0] == 200
        assert (await newer.stream.receive_some()) == b""  # the idle one went first
        for http in (newer,):
            await http.aclose()
        await slow.aclose()
        with trio.fail_after(5):
            while gw.admin.connections.open:
                await trio.sleep(0.01)
        samples = await scrape(gw)
    assert value(samples, "logway_connections_refused_total", listener="admin") == 0
    assert value(samples, "logway_connections_shed_total", listener="admin") == 2
    assert value(samples, "logway_connections_accepted_total", listener="admin") == 6  # (the scrape's too)


async def test_every_admin_connection_busy_answering_refuses_a_new_one():
    """`AdminConnections.make_room` closes nothing while every connection is answering (not reading a request)."""
    connections = admin_http.AdminConnections()
    busy = admin_http.HttpConnection(None, None, 1.0)  # answering: waiting_since is None
    connections.live.add(busy)
    assert connections.make_room() is False and not busy.scope.cancel_called
    busy.waiting_since = 1.0
    assert connections.make_room() is True and busy.scope.cancel_called


# -- the message browser's search -----------------------------------------------------------------------------------
async def test_messages_from_an_offset_a_time_by_key_and_text_and_on_from_where_a_search_stopped(tmp_path,
                                                                                                 monkeypatch):
    from logway.gateway.admin import browse

    async with running_gateway(tmp_path / "data") as gw:
        native = await AsyncNative.connect(gw)
        await native.request(nv.CreateTopicRequest("log", 1))
        for i in range(100):  # a batch each: offsets 0..99, times 1_000_000 + i s, keys k0..k9
            await native.produce("log", 0, [Record(b"line %d %s" % (i, b"ERROR" if i % 25 == 7 else b"ok"),
                                                   b"k%d" % (i % 10), 1_000_000_000 + i * 1000)])

        async def page(query: str):
            status, body = await get_json(gw, f"/api/topics/log/partitions/0/messages?{query}")
            assert status == 200, body
            return [m["offset"] for m in body["messages"]], body["scanned"]

        assert await page("limit=3") == ([97, 98, 99], {"from": 97, "to": 100, "bytes": page_bytes(gw, 97),
                                                        "complete": False})
        assert (await page("limit=3&before=97"))[0] == [94, 95, 96]  # older: below the first shown
        offsets, scanned = await page("offset=10&limit=3")
        assert (offsets, scanned["from"], scanned["to"], scanned["complete"]) == ([10, 11, 12], 10, 13, False)
        assert (await page("offset=98&limit=5"))[0] == [98, 99] and (await page("offset=98"))[1]["complete"]
        assert (await page(f"from_time={1_000_000_000 + 40_500}&limit=2"))[0] == [41, 42]
        assert (await page(f"from_time={1_000_000_000 + 40_000}&to_time={1_000_000_000 + 43_000}"))[0] == [
            40, 41, 42, 43]
        assert (await page(f"to_time={1_000_000_000 + 2_000}"))[0] == [0, 1, 2]  # the newest up to then
        offsets, scanned = await page("key=k7")
        assert offsets == [7, 17, 27, 37, 47, 57, 67, 77, 87, 97] and scanned["complete"]
        assert (await page("key=k7&limit=2"))[0] == [87, 97]  # the newest matches
        assert (await page("contains=ERROR"))[0] == [7, 32, 57, 82]
        assert (await page("contains=ERROR&key=k2"))[0] == [32, 82]
        assert (await page("contains=ERROR&offset=40&limit=1"))[0] == [57]
        assert (await page("contains=nothing-like-it"))[0] == []
        # a search reads at most SCAN_BYTES per request; the next one goes on from where it stopped
        monkeypatch.setattr(browse, "SCAN_BYTES", 2000)
        offsets, scanned = await page("contains=ERROR&offset=0")
        assert offsets == [7] and not scanned["complete"] and scanned["bytes"] < 2000 + 200
        seen, at = list(offsets), scanned["to"]
        while not scanned["complete"]:
            offsets, scanned = await page(f"contains=ERROR&offset={at}")
            seen, at = seen + offsets, scanned["to"]
        assert seen == [7, 32, 57, 82]
        offsets, scanned = await page("contains=ERROR")  # the newest first, going back
        seen, low = list(offsets), scanned["from"]
        while not scanned["complete"]:
            offsets, scanned = await page(f"contains=ERROR&before={low}")
            seen, low = offsets + seen, scanned["from"]
        assert seen == [7, 32, 57, 82]
        for bad in ("limit=0", "limit=501", "offset=x", "from_time=soon"):
            assert (await get_json(gw, f"/api/topics/log/partitions/0/messages?{bad}"))[0] == 400, bad
        await native.aclose()


def page_bytes(gw: Gateway, offset: int) -> int:
    """The stored bytes of `log` partition 0 from `offset` on (each record is a batch of its own)."""
    plog = gw.engine.partition("log", 0)
    read = plog.read(offset, 1 << 20)
    return read.length


# -- the console's actions: native requests ---------------------------------------------------------------------------
async def post(gw: Gateway, body, headers=(("Content-Type", "application/json"),)):
    http = await Http.open(gw)
    try:
        status, answer_headers, answer = await http.request("/api/request", "POST", headers,
                                                            body if isinstance(body, bytes) else orjson.dumps(body))
        return status, answer_headers, orjson.loads(answer) if answer else None
    finally:
        await http.aclose()


async def test_console_actions_are_native_requests_answered_by_the_native_handler(tmp_path, caplog):
    caplog.set_level("INFO", "logway.gateway.admin")
    async with running_gateway(tmp_path / "data") as gw:
        assert (await get_json(gw, "/api/console"))[1] == {"actions": True, "why": None, "auth": "none",
                                                           "user": "User:ANONYMOUS"}
        status, _, answer = await post(gw, {"CreateTopic": {"topic": "made", "partitions": 2}})
        assert (status, answer) == (200, {"CreateTopic": {"created": True}})
        assert [p.partition for p in gw.engine.topic("made").partitions] == [0, 1]
        status, _, answer = await post(gw, {"CreateTopic": {"topic": "made"}})  # the native protocol's own error
        assert (status, answer) == (400, {"Error": {"message": "topic already exists: made"}})
        status, _, answer = await post(gw, {"Produce": {"topic": "made", "partition": 1, "records": [
            {"payload": list(b"test message"), "key": list(b"k")}]}})
        assert (status, answer) == (200, {"Produce": {"offsets": [0]}})
        _, page = await get_json(gw, "/api/topics/made/partitions/1/messages")
        assert page["messages"][0]["value"]["text"] == "test message"
        native = await AsyncNative.connect(gw)
        await native.request(nv.OffsetCommitRequest("made", 1, "billing", 1))
        await native.aclose()
        status, _, plan = await post(gw, {"ResetGroupOffsets": {"group_id": "billing", "to": "earliest",
                                                                "validate_only": True}})
        assert (status, plan["ResetGroupOffsets"]["reset"]) == (200, False)
        assert plan["ResetGroupOffsets"]["offsets"] == [{"topic": "made", "partition": 1, "previous_offset": 1,
                                                         "offset": 0}]
        assert gw.engine.offsets.fetch("billing", "made", 1).offset == 1  # a dry run
        status, _, done = await post(gw, {"ResetGroupOffsets": {"group_id": "billing", "to": "earliest"}})
        assert status == 200 and done["ResetGroupOffsets"]["reset"] is True
        assert gw.engine.offsets.fetch("billing", "made", 1).offset == 0
        status, _, answer = await post(gw, {"AlterTopicConfig": {"topic": "made", "set": {"retention.ms": "60000"}}})
        assert status == 200 and gw.engine.topic("made").config.retention_ms == 60000
        status, _, answer = await post(gw, {"DeleteRecords": {"topic": "made", "partition": 1, "offset": 1}})
        assert (status, answer) == (200, {"DeleteRecords": {"log_start_offset": 1}})
        status, _, answer = await post(gw, {"DeleteTopic": {"topic": "made"}})
        assert (status, answer) == (200, {"DeleteTopic": {"deleted": True}})
        assert [t.name for t in gw.engine.topics()] == []
    logged = [r.getMessage() for r in caplog.records if "console" in r.getMessage()]
    assert any(line.startswith("admin: 127.0.0.1:")
               and line.endswith("console CreateTopic as User:ANONYMOUS topic=made")
               for line in logged), logged
    assert any(line.endswith("console ResetGroupOffsets as User:ANONYMOUS group=billing") for line in logged), logged


async def test_console_actions_are_guarded(tmp_path):
    async with running_gateway(tmp_path / "data") as gw:
        create = {"CreateTopic": {"topic": "x"}}
        for headers, status in [
            ((), 415),  # not JSON: a cross-site form could send it without a preflight
            ((("Content-Type", "text/plain"),), 415),
            ((("Content-Type", "application/json"), ("Origin", "http://evil.example")), 403),
            ((("Content-Type", "application/json"), ("Sec-Fetch-Site", "cross-site")), 403),
        ]:
            assert (await post(gw, create, headers))[0] == status, headers
        ok = (("Content-Type", "application/json; charset=utf-8"), ("Origin", "http://localhost"),
              ("Sec-Fetch-Site", "same-origin"))
        assert gw.engine.topics() == []
        for body, message in [
            ({"Fetch": {"topic": "x", "partition": 0, "offset": 0, "max_bytes": 1}}, "the console does not send "
                                                                                     "Fetch requests"),
            ({"Auth": {"token": "t"}}, "the console does not send Auth requests"),
            ({"OffsetCommit": {"topic": "x", "partition": 0, "group_id": "g", "offset": 1}},
             "the console does not send OffsetCommit requests"),
            ({"Nope": {}}, "unknown request type: Nope"),
            (b"{not json", "failed to parse request: invalid JSON"),
            ({"CreateTopic": {"partitions": 1}}, "failed to parse request: CreateTopic: missing field `topic`"),
        ]:
            status, _, answer = await post(gw, body, ok)
            assert status == 400 and answer["Error"]["message"].startswith(message), (body, answer)
        assert (await post(gw, create, ok))[0] == 200
        http = await Http.open(gw)
        status, headers, _ = await http.request("/api/request")
        assert (status, headers["allow"]) == (405, "POST")
        status, headers, _ = await http.request("/api/topics", "POST", (("Content-Type", "application/json"),),
                                                b"{}")
        assert (status, headers["allow"]) == (405, "GET, HEAD")
        await http.aclose()


async def test_console_actions_need_the_native_token_when_the_gateway_has_one(tmp_path):
    async with running_gateway(tmp_path / "data", "auth.native_token=s3cret") as gw:
        assert (await get_json(gw, "/api/console"))[1]["auth"] == "login"
        json_ = ("Content-Type", "application/json")
        ping = {"Ping": {}}
        for auth in ((), (("Authorization", "Bearer wrong"),), (("Authorization", "Basic s3cret"),)):
            status, headers, answer = await post(gw, ping, (json_, *auth))
            assert status == 401 and headers["www-authenticate"].startswith("Basic"), auth
            assert answer["Error"]["message"].startswith("authentication required")
        status, _, answer = await post(gw, ping, (json_, ("Authorization", "Bearer s3cret")))
        assert (status, answer) == (200, {"Pong": {}})


async def test_console_actions_need_the_native_listener(tmp_path):
    async with running_gateway(tmp_path / "data", "listeners.native.enabled=false") as gw:
        why = "the console's actions are native requests: enable listeners.native"
        assert (await get_json(gw, "/api/console"))[1] == {"actions": False, "why": why, "auth": "none",
                                                           "user": "User:ANONYMOUS"}
        status, _, answer = await post(gw, {"Ping": {}})
        assert (status, answer) == (503, {"Error": {"message": why}})
