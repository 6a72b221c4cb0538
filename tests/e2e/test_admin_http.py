"""The admin listener of a real gateway process, as an operator meets it: Prometheus metrics moving while native
and Kafka clients (kafka-python, a live consumer group) work, the JSON endpoints, and the console page loaded in
headless Chromium (Debian's chromium + chromium-driver through selenium), with a screenshot kept as an artifact
(in the test's tmp dir, and in $LOGWAY_ARTIFACTS when set)."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request

import pytest
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient
from logway.codecs.records import Record

from ..kafka_groups import group_consumer, poll_values

pytestmark = pytest.mark.slow

# a live member for the whole test: it must not be dropped while the browser looks (see tests/kafka_groups.py)
GROUP_OPTS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "max_poll_interval_ms": 120000}


def http_get(gw: GatewayProcess, path: str) -> tuple[int, dict[str, str], bytes]:
    url = "http://{}:{}{}".format(*gw.addresses["admin"], path)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def api(gw: GatewayProcess, path: str):
    status, _, body = http_get(gw, path)
    assert status == 200, (path, status, body)
    return json.loads(body)


def scrape(gw: GatewayProcess) -> dict[tuple[str, tuple], float]:
    status, headers, body = http_get(gw, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def gateway(tmp_path):
    gw = GatewayProcess(str(tmp_path / "data"), "storage.flush=always", "log_level=WARNING")
    yield gw
    gw.stop()


@pytest.fixture
def busy(gateway):
    """Topic `orders` (3 partitions) written by native and Kafka producers; group `billing` a live kafka-python
    consumer that read everything and committed, after which 7 more records went to partition 0 (lag 7)."""
    bootstrap = "{}:{}".format(*gateway.addresses["kafka"])
    with NativeClient(*gateway.native) as native:
        native.create_topic("orders", 3)
        native.produce("orders", 0, [Record(f"order {i}".encode(), f"k{i}".encode()) for i in range(10)])
        native.produce("orders", 1, [b"\x00\xffbinary", b"<b>not bold</b>"])
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send("orders", partition=2, key=b"kafka", value=f"from kafka {i}".encode(),
                      headers=[("source", b"kafka-python")])
    producer.flush()
    producer.close()
    consumer = group_consumer(bootstrap, "orders", "billing", enable_auto_commit=False, auto_offset_reset="earliest",
                              **GROUP_OPTS)
    assert len(poll_values(consumer, 17)) == 17
    consumer.commit()
    with NativeClient(*gateway.native) as native:
        native.produce("orders", 0, [b"late"] * 7)
    try:
        yield gateway
    finally:
        consumer.close()


def test_metrics_and_endpoints_of_a_busy_gateway(busy):
    samples = scrape(busy)
    for request in ("Produce", "Fetch", "OffsetCommit", "JoinGroup", "SyncGroup", "Metadata"):
        assert value(samples, "logway_requests_total", protocol="kafka", request=request) >= 1, request
    assert value(samples, "logway_requests_total", protocol="native", request="Produce") == 3
    assert value(samples, "logway_records_received_total", protocol="native") == 19
    assert value(samples, "logway_records_received_total", protocol="kafka") == 5
    assert value(samples, "logway_records_sent_total", protocol="kafka") >= 17
    assert value(samples, "logway_request_duration_seconds_count", protocol="kafka", request="Fetch") >= 1
    assert value(samples, "logway_records_appended_total", topic="orders", partition="0") == 17
    assert value(samples, "logway_consumer_group_committed_offset", group="billing", topic="orders",
                 partition="0") == 10
    assert value(samples, "logway_consumer_group_lag", group="billing", topic="orders", partition="0") == 7
    assert value(samples, "logway_consumer_group_lag", group="billing", topic="orders", partition="2") == 0
    assert value(samples, "logway_consumer_group_members", group="billing", state="Stable", type="classic") == 1
    assert value(samples, "logway_connections_open", listener="kafka") >= 1
    assert value(samples, "logway_group_commit_batch_size_count") >= 1

    assert http_get(busy, "/health")[0] == 200
    assert json.loads(http_get(busy, "/ready")[2])["ready"] is True
    (billing,) = api(busy, "/api/groups")["groups"]
    assert billing["state"] == "Stable" and billing["type"] == "classic" and billing["lag"] == 7
    (member,) = billing["members"]
    assert sorted(map(tuple, member["assignment"])) == [("orders", 0), ("orders", 1), ("orders", 2)]
    page = api(busy, "/api/topics/orders/partitions/2/messages?last=2")
    assert [m["value"]["text"] for m in page["messages"]] == ["from kafka 3", "from kafka 4"]
    assert page["messages"][0]["headers"] == [{"key": "source", "value": {
        "size": 12, "hex": b"kafka-python".hex(), "text": "kafka-python", "truncated": False}}]


def test_console_in_headless_chromium(busy, chromium, tmp_path):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(chromium, 20)

    def click(selector: str) -> None:
        """Click the element `selector` names; the console re-renders its tables every 2 s, so an element found a
        moment ago may be gone: find it again until the click lands."""
        def attempt(d) -> bool:
            d.find_element(By.CSS_SELECTOR, selector).click()
            return True
        WebDriverWait(chromium, 20, ignored_exceptions=[StaleElementReferenceException]).until(attempt)

    def read(what):
        """`what(driver)` — texts read off elements — read again while a re-render replaces the elements."""
        return WebDriverWait(chromium, 20, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: (what(d),))[0]
    chromium.get("http://{}:{}/".format(*busy.addresses["admin"]))
    try:
        # topics: one row per partition, the topic named on its first
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#topics tbody tr[data-topic="orders"]'))
        def orders(d):
            rows = d.find_elements(By.CSS_SELECTOR, '#topics tbody tr[data-topic="orders"]')
            return len(rows), [c.text for c in rows[0].find_elements(By.TAG_NAME, "td")]
        rows, cells = read(orders)
        assert rows == 3
        assert cells[:5] == ["orders", "kafka", "0", "0", "17"], cells
        # groups: billing's lag on partition 0, and its live member
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#groups tbody tr[data-group="billing"] td.lag'))
        lags = read(lambda d: [c.text for c in d.find_elements(By.CSS_SELECTOR,
                                                                '#groups tbody tr[data-group="billing"] td.lag')])
        assert lags == ["7", "0", "0"], lags
        assert "Stable (1 member)" in chromium.find_element(By.ID, "groups").text
        assert "classic" in chromium.find_element(By.ID, "groups").text
        wait.until(lambda d: "orders-0, orders-1, orders-2" in d.find_element(By.ID, "members").text)
        # live rates: a chart per protocol
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#rates .chart canvas")) == 3)
        assert chromium.find_element(By.CSS_SELECTOR, '#rates .chart[data-protocol="kafka"]')
        # the message browser: markup in a record stays text
        click('#topics tbody tr[data-topic="orders"][data-partition="1"] button')
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")) == 2)
        values = read(lambda d: [r.find_elements(By.TAG_NAME, "td")[3].text
                                 for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")])
        assert values[1] == "<b>not bold</b>" and not chromium.find_elements(By.CSS_SELECTOR, "#messages b")
        assert values[0] == "00 ff 62 69 6e 61 72 79"  # not UTF-8: shown as hex
        click('#topics tbody tr[data-topic="orders"][data-partition="2"] button')
        wait.until(lambda d: "source=kafka-python" in d.find_element(By.ID, "messages").text)
        assert chromium.find_element(By.ID, "status").text == "ready"
        time.sleep(2.5)  # a few rate samples in the charts for the picture
    finally:
        shot = tmp_path / "console.png"
        chromium.save_screenshot(str(shot))
        if os.environ.get("LOGWAY_ARTIFACTS"):
            os.makedirs(os.environ["LOGWAY_ARTIFACTS"], exist_ok=True)
            shutil.copy(shot, os.path.join(os.environ["LOGWAY_ARTIFACTS"], "admin-console.png"))
    errors = [e for e in chromium.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors  # no script error, no Content-Security-Policy violation
