"""Shared test fixtures: an in-process gateway on ephemeral 127.0.0.1 ports and the async native client the tests
drive it with (`logway.clients.AsyncNativeClient`, answers unchecked), the power-loss file system, a small tmpfs
that fills up (`small_disk`, `fill_disk`), small ext4 file systems (`small_fs`), and headless Chromium for the
admin console (`chromium`).

The suite is in tiers: `codecs/` (bytes in, events out), `storage/` (one file per storage unit), `gateway/` (the
pump and protocols, in memory and over real sockets), `e2e/` (real clients, Spark, processes killed and power
cut), `hostile/` (malformed and hostile input of every protocol, fuzzing)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from contextlib import asynccontextmanager

import pytest
import trio

from logway.clients.native import AsyncNativeClient
from logway.codecs import native as nv
from logway.codecs.records import Record
from logway.gateway.config import load_config
from logway.gateway.server import Gateway

# Gateways the tests start as processes (logway.bench.launcher, `logway serve`) bind the admin listener on a free
# port too, not on 9644: several run at once, beside a developer's own gateway.
os.environ.setdefault("LOGWAY_LISTENERS__ADMIN__PORT", "0")


def gateway_config(data_dir, *overrides: str):
    return load_config(None, env={}, overrides=[f"data_dir={data_dir}", "listeners.native.port=0",
                                                "listeners.kafka.port=0", "listeners.tank.port=0",
                                                "listeners.admin.port=0", "log_level=WARNING", *overrides])


@asynccontextmanager
async def running_gateway(data_dir, *overrides: str):
    """Run a Gateway in this trio run; on exit ask for a graceful shutdown and wait for it."""
    gw = Gateway(gateway_config(data_dir, *overrides))
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        try:
            yield gw
        finally:
            gw.request_shutdown()


class AsyncNative(AsyncNativeClient):
    """`logway.clients.AsyncNativeClient` as these tests use it: connected to an in-process `Gateway`, every answer
    returned as it comes (an `ErrorResponse` or `CLOSED` is a value to assert on), `produce` giving the whole
    `ProduceResponse`. One request at a time, like the real clients."""

    def __init__(self, stream) -> None:
        super().__init__(stream, raise_errors=False)

    @classmethod
    async def connect(cls, gw: Gateway) -> "AsyncNative":
        host, port = gw.addresses["native"]
        return cls(await trio.open_tcp_stream(host, port))

    async def produce(self, topic, partition, values):
        return await self.request(nv.ProduceRequest(topic, partition, [
            v if isinstance(v, Record) else Record(bytes(v)) for v in values]))


#: How often `until` looks at the state it waits for.
POLL_S = 0.005


async def until(condition, what: str, timeout: float = 10.0) -> None:
    """Wait until `condition()` holds: a state of the gateway a test cannot await directly (a real socket or another
    thread lies between), looked at every `POLL_S` — never a fixed sleep — failing with `what` after `timeout` s."""
    with trio.move_on_after(timeout):
        while not condition():
            await trio.sleep(POLL_S)
        return
    raise AssertionError(f"not within {timeout:g} s: {what}")


async def long_polls_parked(gw: Gateway, count: int = 1) -> None:
    """Wait until `count` long-polls are parked at the gateway (its notifier's)."""
    await until(lambda: gw.notifier.waiting >= count, f"{count} long-poll(s) parked")


@pytest.fixture
async def gateway(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=always") as gw:
        yield gw


@pytest.fixture
async def client(gateway):
    c = await AsyncNative.connect(gateway)
    yield c
    await c.aclose()


@pytest.fixture
def fuse():
    """Skip, saying what is missing, where the power-loss file system (FUSE) cannot run; with REQUIRE_FUSE=1
    (CI) that is a failure instead."""
    import os

    from logway.bench.powerfs import fuse_problem

    problem = fuse_problem()
    if problem:
        if os.environ.get("REQUIRE_FUSE") == "1":
            pytest.fail(f"REQUIRE_FUSE=1 but {problem}")
        pytest.skip(problem)


@pytest.fixture
def powerfs(fuse, tmp_path):
    """A power-loss file system (logway.bench.powerfs) mounted at tmp_path/mnt."""
    from logway.bench.powerfs import PowerFSMount

    mount = PowerFSMount(tmp_path / "backing", tmp_path / "mnt").start()
    try:
        yield mount
    finally:
        mount.stop()


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip() or 'not root'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.fixture
def small_fs(tmp_path):
    """`small_fs(size_mib, inodes=None)` mounts a small file system for the test and returns where: an ext4 image
    on a loop device (`mkfs.ext4`, `mount -o loop`: root, e2fsprogs), else a tmpfs of that size (and that many
    inodes); unmounted afterwards. Skipped, saying what is missing, where neither can be mounted; with
    REQUIRE_SMALL_DISK=1 (CI) that is a failure instead."""
    mounted = []

    def mount(size_mib: int, inodes: int | None = None):
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        image = tmp_path / f"fs{len(mounted)}.img"
        problems = []
        mkfs = shutil.which("mkfs.ext4") or shutil.which("mkfs.ext4", path="/usr/sbin:/sbin")
        if mkfs is None:
            problems.append("mkfs.ext4 is missing (the Debian package e2fsprogs)")
        else:
            with open(image, "wb") as f:
                f.truncate(size_mib << 20)
            mkfs = [mkfs, "-q", "-F", *(["-N", str(inodes)] if inodes else []), str(image)]
            done = subprocess.run(mkfs, capture_output=True)
            if done.returncode == 0:
                done = subprocess.run(["mount", "-o", "loop", str(image), str(where)], capture_output=True)
            if done.returncode == 0:
                mounted.append(where)
                return where
            problems.append(f"cannot mount an ext4 image ({done.stderr.decode().strip() or 'not root'})")
            image.unlink()
        options = f"size={size_mib}m" + (f",nr_inodes={inodes}" if inodes else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
        if done.returncode == 0:
            mounted.append(where)
            return where
        problems.append(f"cannot mount a tmpfs ({done.stderr.decode().strip() or 'not root'})")
        if os.environ.get("REQUIRE_SMALL_DISK") == "1":
            pytest.fail(f"REQUIRE_SMALL_DISK=1 but {'; '.join(problems)}")
        pytest.skip("no small file system here: " + "; ".join(problems))

    try:
        yield mount
    finally:
        for where in mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill_disk(mount) -> "os.PathLike":
    """Fill the file system at `mount` to the last byte with a ballast file (delete it to give space back)."""
    ballast = mount / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return ballast


#: Debian's headless browser and its WebDriver (`apt-get install chromium chromium-driver`).
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium_problem() -> str | None:
    """What is missing to drive headless Chromium, or None."""
    missing = [f"{path} (Debian package {package})" for path, package in
               ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")) if not os.access(path, os.X_OK)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (pip install -e '.[test]')")
    return f"headless Chromium is not available: missing {', '.join(missing)}" if missing else None


@pytest.fixture
def chromium():
    """A selenium WebDriver of headless Chromium (a 1280×1000 window). Skips, saying what is missing, where
    Chromium cannot run; with REQUIRE_CHROMIUM=1 (CI) that is a failure instead."""
    problem = chromium_problem()
    if problem:
        if os.environ.get("REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"REQUIRE_CHROMIUM=1 but {problem}")
        pytest.skip(problem)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors and CSP violations
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server for the whole session (logway.bench.postgres), started once; skipped, saying what is missing,
    where PostgreSQL is not installed — with REQUIRE_POSTGRES=1 (CI) that is a failure instead."""
    from logway.bench.postgres import PostgresServer

    _require_postgres()
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def pg_primary_and_standby():
    """(primary, standby): a PostgreSQL server of the test's own (it may be killed) and its synchronous standby
    (logway.bench.postgres `add_standby`), both destroyed afterwards; skipped or failed as `pg_server`."""
    from logway.bench.postgres import PostgresServer

    _require_postgres(standby=True)
    primary = PostgresServer()
    standby = None
    try:
        primary.start()
        standby = primary.add_standby()
        yield primary, standby
    finally:
        if standby is not None:
            standby.destroy()
        primary.destroy()


def _require_postgres(*, standby: bool = False) -> None:
    """Skip, saying what is missing, where no test server (`standby`: and no standby of one) can run — with
    REQUIRE_POSTGRES=1 (CI) fail instead."""
    from logway.bench.postgres import postgres_problem

    problem = postgres_problem(standby=standby)
    if problem:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"REQUIRE_POSTGRES=1 but {problem}")
        pytest.skip(problem)


@pytest.fixture
def pg_database(pg_server):
    """A fresh database of `pg_server` for one test: its libpq connection string (dropped afterwards). A test that
    stopped or killed the server leaves it running again."""
    name = pg_server.create_database()
    try:
        yield pg_server.dsn(name)
    finally:
        if pg_server.pid() is None:
            pg_server.start()
        pg_server.drop_database(name)
