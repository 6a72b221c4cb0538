"""The console as an operator's tool, in headless Chromium against a real gateway process (issue 39): every action
— create and delete a topic, alter its config, add partitions, produce a test message, delete records, reset a
group's offsets after its dry run — confirmed in the page and seen done on the gateway; the message search; one time
format with its zone; rate charts with a time axis; the login a gateway that requires one asks for (the access
token, or a user held to its ACLs, issue 34). Screenshots
of each step are kept as artifacts (the test's tmp dir, and $LOGWAY_ARTIFACTS when set)."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from logway.clients.native import NativeClient
from logway.codecs import native as nv
from logway.codecs.records import Record
from logway.pipeline.producer import partition_for_key

from .test_cli import GatewayProcess

pytestmark = pytest.mark.slow

#: How every time in the console reads: local time with its UTC offset, or UTC.
LOCAL_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [+-]\d\d:\d\d$")
UTC_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$")


class Page:
    """The console in a browser: clicks and reads that outlast its re-rendering (every 2 s), the confirmation
    dialog, and screenshots kept as artifacts."""

    def __init__(self, driver, url: str, shots) -> None:
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver, self.shots, self.By = driver, shots, By
        self.wait = WebDriverWait(driver, 20, ignored_exceptions=[StaleElementReferenceException])
        driver.get(url)
        self.until(lambda d: d.find_element(By.ID, "status").text == "ready")

    def until(self, check):
        return self.wait.until(check)

    def find(self, selector: str):
        return self.driver.find_element(self.By.CSS_SELECTOR, selector)

    def click(self, selector: str) -> None:
        self.until(lambda d: d.find_element(self.By.CSS_SELECTOR, selector).click() or True)

    def fill(self, selector: str, text: str) -> None:
        field = self.find(selector)
        field.clear()
        field.send_keys(text)

    def choose(self, selector: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        self.until(lambda d: Select(d.find_element(self.By.CSS_SELECTOR, selector)).select_by_value(value) or True)

    def texts(self, selector: str) -> list[list[str]]:
        """The cells of the rows `selector` names, read again while a re-render replaces them."""
        return self.until(lambda d: ([[c.text for c in r.find_elements(self.By.TAG_NAME, "td")]
                                      for r in d.find_elements(self.By.CSS_SELECTOR, selector)],))[0]

    def confirm(self, expected: str, shot: str, accept: bool = True) -> None:
        """The confirmation dialog says `expected`: screenshot it, then confirm (or cancel)."""
        self.until(lambda d: d.find_element(self.By.ID, "confirm").is_displayed())
        assert expected in self.find("#confirm-text").text, self.find("#confirm-text").text
        self.shot(shot)
        self.click("#confirm-ok" if accept else "#confirm-cancel")
        self.until(lambda d: not d.find_element(self.By.ID, "confirm").is_displayed())

    def notice(self, expected: str) -> str:
        self.until(lambda d: expected in d.find_element(self.By.ID, "notice").text)
        return self.find("#notice").text

    def shot(self, name: str, show: str | None = None) -> None:
        """A screenshot, with the element `show` names scrolled into view first."""
        if show is not None:
            self.driver.execute_script("document.querySelector(arguments[0]).scrollIntoView({block: 'center'})", show)
        self.shots(self.driver, name)


@pytest.fixture
def shots(tmp_path):
    """`shots(driver, name)` saves a screenshot as tmp_path/console-NAME.png (and in $LOGWAY_ARTIFACTS)."""
    def take(driver, name: str) -> None:
        path = tmp_path / f"console-{name}.png"
        driver.save_screenshot(str(path))
        if os.environ.get("LOGWAY_ARTIFACTS"):
            os.makedirs(os.environ["LOGWAY_ARTIFACTS"], exist_ok=True)
            shutil.copy(path, os.path.join(os.environ["LOGWAY_ARTIFACTS"], path.name))
    return take


def severe_errors(driver) -> list:
    """Script errors and policy violations the browser logged (an answer the test asked to be refused is not one,
    nor one refused for want of a login or of an ACL the test did not give)."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and "/api/request" not in e["message"]
            and "status of 401" not in e["message"] and "status of 403" not in e["message"]]


def test_every_action_confirmed_and_done_on_the_gateway(tmp_path, chromium, shots):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw, NativeClient(*gw.native) as c:
        c.create_topic("existing", 2)
        c.produce("existing", 0, [b"already there"])
        page = Page(chromium, "http://%s:%d/" % gw.addresses["admin"], shots)
        By = page.By
        # the message browser starts with a partition chosen, so "show" works at once (it asked for partition "")
        page.until(lambda d: d.find_element(By.ID, "browse-topic").get_attribute("value") == "existing")
        assert page.find("#browse-partition").get_attribute("value") == "0"
        page.click("#browse button[type=submit]")
        page.until(lambda d: page.texts("#messages tbody tr") and page.texts("#messages tbody tr")[0][3] ==
                   "already there")
        assert LOCAL_TIME.match(page.texts("#messages tbody tr")[0][1]), page.texts("#messages tbody tr")

        # create a topic; a cancelled confirmation changes nothing
        page.click("#new-topic")
        page.fill("#create-name", "orders")
        page.fill("#create-partitions", "3")
        page.click("#create-topic button[type=submit]")
        page.confirm("Create topic orders with 3 partition(s)?", "create-cancelled", accept=False)
        assert [t.name for t in c.list_topics()] == ["existing"]
        page.click("#create-topic button[type=submit]")
        page.confirm("Create topic orders with 3 partition(s)?", "create")
        page.notice("created topic orders with 3 partition(s)")
        assert {t.name: t.partitions for t in c.list_topics()} == {"existing": 2, "orders": 3}
        page.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, '#topics tbody tr[data-topic="orders"]')) == 3)

        # a test message with a key: the partition Kafka's partitioner picks, as `logway produce` does
        page.click('#topics tbody tr[data-topic="orders"][data-partition="0"] button[data-action="produce"]')
        page.fill("#produce-key", "alice")
        page.fill("#produce-value", "hello from the console")
        page.click("#produce button[type=submit]")
        partition = partition_for_key(b"alice", 3)
        page.confirm(f"Write a record to orders partition {partition} with key alice", "produce")
        page.notice(f"produced to orders partition {partition} at offset 0")
        assert [(r.key, r.value) for r in c.fetch("orders", partition, 0).records] == [
            (b"alice", b"hello from the console")]

        # config: an override set (checked first: a bad value is refused before anything is asked), then removed
        page.click('#topics tbody tr[data-topic="orders"][data-partition="0"] button[data-action="config"]')
        page.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#config-table tr[data-name="retention.ms"]'))
        page.choose("#alter-name", "retention.ms")
        page.fill("#alter-value", "soon")
        page.click("#alter button[type=submit]")
        page.notice("invalid request")
        page.fill("#alter-value", "60000")
        page.click("#alter button[type=submit]")
        page.confirm("Set retention.ms=60000 on topic orders?", "config")
        page.notice("topic orders: retention.ms=60000")
        page.until(lambda d: ["retention.ms", "60000", "topic", "604800000", "remove override…"] in
                   page.texts("#config-table tbody tr"))
        page.shot("config", "#topic-panel")
        page.click('#config-table tr[data-name="retention.ms"] button')
        page.confirm("Remove retention.ms from topic orders?", "config-remove")
        page.notice("retention.ms is the gateway's default again")
        assert {e.name: e.source for e in c.describe_topic_config("orders")}["retention.ms"] == "default"

        # partitions: 3 -> 4
        page.click('#topics tbody tr[data-topic="orders"][data-partition="0"] button[data-action="partitions"]')
        page.fill("#partitions-count", "4")
        page.click("#partitions button[type=submit]")
        page.confirm("Grow topic orders to 4 partitions?", "partitions")
        page.notice("topic orders has 4 partition(s)")
        assert len(c.describe_topic("orders").partitions) == 4

        # delete records: below offset 1 of the partition the message went to
        c.produce("orders", partition, [b"second"])
        page.click(f'#topics tbody tr[data-topic="orders"][data-partition="{partition}"] '
                   'button[data-action="delete-records"]')
        page.fill("#delete-records-offset", "1")
        page.click("#delete-records button[type=submit]")
        page.confirm(f"Delete every record below offset 1 of orders partition {partition}?", "delete-records")
        page.notice(f"orders partition {partition}: log start offset 1")
        assert c.describe_topic("orders").partitions[partition].log_start_offset == 1

        # reset a group's offsets: the plan first (a dry run), then the reset, confirmed
        c.commit("orders", partition, "billing", 2)
        page.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#groups tbody tr[data-group="billing"] button'))
        committed_at = page.texts('#groups tbody tr[data-group="billing"]')[0][8]
        assert LOCAL_TIME.match(committed_at), committed_at
        page.click('#groups tbody tr[data-group="billing"] button')
        page.choose("#reset-topic", "orders")
        page.fill("#reset-partitions", str(partition))  # (none: every partition of the topic, as the CLI's --topic)
        page.choose("#reset-to", "earliest")
        page.click("#reset button[type=submit]")
        page.until(lambda d: d.find_element(By.ID, "reset-plan").is_displayed())
        assert page.texts("#reset-plan tbody tr") == [["orders", str(partition), "2", "1"]]
        assert c.committed("orders", partition, "billing") == 2  # the plan changed nothing
        page.shot("reset-plan", "#reset")
        page.click("#reset-execute")
        page.confirm("Move the committed offsets of group billing on 1 partition(s), as planned?", "reset")
        page.notice("group billing: 1 offset(s) reset")
        assert c.committed("orders", partition, "billing") == 1

        # delete the topic
        page.click('#topics tbody tr[data-topic="orders"][data-partition="0"] button[data-action="delete"]')
        page.confirm("Delete topic orders, its 1 record(s)", "delete-topic")
        page.notice("deleted topic orders")
        assert [t.name for t in c.list_topics()] == ["existing"]
        page.until(lambda d: not d.find_elements(By.CSS_SELECTOR, '#topics tbody tr[data-topic="orders"]'))
        page.shot("after")
        assert not severe_errors(chromium)


def test_search_times_and_charts(tmp_path, chromium, shots):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw, NativeClient(*gw.native) as c:
        c.create_topic("app-log", 1)
        base = 1_714_564_800_000  # 2024-05-01T12:00:00Z
        c.produce("app-log", 0, [Record(b"request %d %s" % (i, b"ERROR timeout" if i % 10 == 3 else b"ok"),
                                        b"host-%d" % (i % 3), base + i * 60_000) for i in range(60)])
        page = Page(chromium, "http://%s:%d/" % gw.addresses["admin"], shots)
        By = page.By
        page.until(lambda d: d.find_element(By.ID, "browse-topic").get_attribute("value") == "app-log")

        def offsets() -> list[str]:
            return [row[0] for row in page.texts("#messages tbody tr")]

        def search() -> None:
            before = page.find("#browse-status").text
            page.click("#browse button[type=submit]")
            page.until(lambda d: d.find_element(By.ID, "browse-status").text not in ("", "loading…", before))

        page.fill("#browse-contains", "ERROR")
        search()
        assert offsets() == ["3", "13", "23", "33", "43", "53"]
        assert "6 record(s) found" in page.find("#browse-status").text
        page.fill("#browse-key", "host-1")
        search()
        assert offsets() == ["13", "43"]
        page.shot("search", "#messages")
        # a time range, in UTC: 12:10 to 12:12 of 2024-05-01
        page.choose("#zone", "utc")
        page.fill("#browse-key", "")
        page.fill("#browse-contains", "")
        page.choose("#browse-from", "time")
        chromium.execute_script("document.getElementById('browse-since').value = '2024-05-01T12:10:00';"
                                "document.getElementById('browse-until').value = '2024-05-01T12:12:00';")
        search()
        assert offsets() == ["10", "11", "12"]
        times = [row[1] for row in page.texts("#messages tbody tr")]
        assert times == ["2024-05-01 12:10:00.000 UTC", "2024-05-01 12:11:00.000 UTC", "2024-05-01 12:12:00.000 UTC"]
        assert UTC_TIME.match(page.find("#updated").text.removeprefix("updated "))
        # offsets, a page at a time
        page.choose("#browse-from", "offset")
        page.fill("#browse-offset", "50")
        page.fill("#browse-last", "4")
        search()
        assert offsets() == ["50", "51", "52", "53"]
        page.click("#browse-more")
        page.until(lambda d: offsets() == ["54", "55", "56", "57"])
        page.choose("#zone", "local")
        page.until(lambda d: LOCAL_TIME.match(page.texts("#messages tbody tr")[0][1]))
        # the rate charts draw a time axis under the lines (labels in the strip below the plot)
        page.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#rates .chart canvas")) == 3)
        inked = chromium.execute_script(
            "const c = document.querySelector('#rates .chart canvas'); const h = c.height;"
            "const data = c.getContext('2d').getImageData(0, h - 30, c.width, 30).data;"
            "let n = 0; for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n++; return n;")
        assert inked > 50, inked
        page.shot("charts", "#rates")
        page.shot("pages", "#messages")
        assert not severe_errors(chromium)


def test_a_gateway_with_an_access_token_asks_the_console_to_log_in(tmp_path, chromium, shots):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING", "auth.native_token=s3cret") as gw:
        with NativeClient(*gw.native, token="s3cret") as c:
            c.create_topic("hidden", 1)
        page = Page(chromium, "http://%s:%d/" % gw.addresses["admin"], shots)
        By = page.By
        page.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        assert "log in first" in page.find("#updated").text  # nothing is shown before the login
        assert page.texts("#topics tbody tr") == []
        page.click("#new-topic")
        page.fill("#create-name", "guarded")
        page.click("#create-topic button[type=submit]")
        page.confirm("Create topic guarded", "login-needed")
        page.notice("log in first: authentication required")
        page.click("#login")
        page.until(lambda d: d.find_element(By.ID, "login-dialog").is_displayed())
        page.fill("#login-token", "s3cret")
        page.shot("login")
        page.click("#login-dialog button[value=ok]")
        page.until(lambda d: "logged in as Token:native" in d.find_element(By.ID, "login").text)
        page.click("#create-topic button[type=submit]")
        page.confirm("Create topic guarded", "login-done")
        page.notice("created topic guarded")
        with NativeClient(*gw.native, token="s3cret") as c:
            assert sorted(t.name for t in c.list_topics()) == ["guarded", "hidden"]
        assert not severe_errors(chromium)


def test_a_user_logs_in_and_sees_and_does_what_its_acls_allow(tmp_path, chromium, shots):
    """Users and ACLs: the console logs in as alice (HTTP Basic), lists her topics only, browses her topic's
    records, and an action the ACLs do not allow her is refused with the gateway's reason."""
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING", "auth.native_login=true",
                        "auth.users.alice=äpfel-und-birnen", "auth.users.root=root-pw",
                        "auth.super_users=User:root") as gw:
        with NativeClient(*gw.native, user="root", password="root-pw") as c:
            for name in ("alice-orders", "payroll"):
                c.create_topic(name, 1)
                c.produce(name, 0, [f"a record of {name}".encode()])
            c.create_acls([nv.AclEntry("Topic", "alice-", "PREFIXED", "User:alice", "*", op, "Allow")
                           for op in ("Read", "Describe")])
        page = Page(chromium, "http://%s:%d/" % gw.addresses["admin"], shots)
        By = page.By
        page.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        page.click("#login")
        page.until(lambda d: d.find_element(By.ID, "login-dialog").is_displayed())
        page.fill("#login-user", "alice")
        page.fill("#login-password", "äpfel-und-birnen")
        page.shot("user-login")
        page.click("#login-dialog button[value=ok]")
        page.until(lambda d: "logged in as User:alice" in d.find_element(By.ID, "login").text)
        page.until(lambda d: [row[0] for row in page.texts("#topics tbody tr") if row] == ["alice-orders"])
        page.until(lambda d: d.find_element(By.ID, "browse-topic").get_attribute("value") == "alice-orders")
        page.click("#browse button[type=submit]")
        page.until(lambda d: page.texts("#messages tbody tr") and page.texts("#messages tbody tr")[0][3] ==
                   "a record of alice-orders")
        page.shot("user-topics")
        page.click("#new-topic")
        page.fill("#create-name", "alice-new")
        page.click("#create-topic button[type=submit]")
        page.confirm("Create topic alice-new", "user-refused")
        page.notice("not authorized: User:alice may not CREATE TOPIC 'alice-new'")
        with NativeClient(*gw.native, user="root", password="root-pw") as c:
            assert sorted(t.name for t in c.list_topics()) == ["alice-orders", "payroll"]
        assert not severe_errors(chromium)
