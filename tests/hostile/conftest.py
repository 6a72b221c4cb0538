"""Hostile input over the wire, request type by request type (issue 6): one in-process gateway, real sockets.

The wire cases are split by protocol: `test_native.py`, `test_kafka.py` and `test_tank.py` hold each protocol's
own cases, `test_records.py` the stored records and counts read or refused through every protocol, and
`test_coverage.py` the cross-protocol checks. What they share (the gateway thread, blocking sockets, liveness
checks, request tables, hostile names) is in `wire.py`; this file holds the fixtures and the run order.
(`test_fuzz.py`, the codec fuzzer, is in the same directory but uses no gateway; nor do `test_resources.py` and
`test_bounds.py`, the attacks on descriptors, disk and stored values, which start gateway processes of their own.)

For every request type of every protocol — each native request kind (`codecs.native.events.Request`), each
Kafka api key at its lowest and highest supported version (`registry.SUPPORTED`), each TANK request type the
broker accepts (`codecs.tank.requests.REQUEST_TYPES`, Consume with and without the flags byte) — a valid request
is built with the codec's client side, checked to be answered (the control case), then sent truncated:

- `eof`: the original length prefix and only part of the frame, then a half-close (EOF inside the frame);
- `short`: the length prefix rewritten to the truncated size, so the frame is complete but its body is short.

Then: absurd counts and lengths inside otherwise valid frames (every Kafka array count set to 0x7fffffff, every
string and bytes length beyond the frame; TANK u8 counts of 255, huge and overlong varints, str8 lengths past the
payload; frame lengths over each protocol's limit; native JSON nested 100k deep, numbers out of range; partition
counts no engine should create); hostile topic / group names (invalid UTF-8, `/`, `..`, `.`, NUL, empty, longer
than 249) through every create / produce / fetch / commit path of each protocol; and "poisoned" batches (framing,
header and CRC right, records garbage: the produce path stores batches without decoding them) read back through
every protocol, which must answer its error for that partition, not crash.

How the gateway is shared: `gw` runs one `conftest.running_gateway` for the whole package (`scope="package"`) in a
trio run of its own thread (`wire.GatewayThread`), so the tests use plain blocking sockets. It makes the topics
every case relies on (`wire.setup_topics`) and opens one connection per protocol (`wire.OLD`) before the first
case. A test uses it by requesting `gw`: each wire module does so for all its tests with
`pytestmark = pytest.mark.usefixtures("gw")`. Tests that do not (the fuzzer, the request-table check) run first,
so the gateway thread never runs beside them, and `test_coverage.py`'s data-dir check (marked
`after_every_wire_case`) runs after every gateway case (`pytest_collection_modifyitems`).

What each case must get is the protocol's answer to it: native answers every bad frame with an `Error` (and
closes after EOF inside a frame); Kafka and TANK close the connection, TANK answering a truncation that is still
a complete request (its optional tails). Never a hang: every socket operation is bounded by `wire.TIMEOUT`.
Never a crash: the gateway's log must stay free of ERROR records — the autouse `no_gateway_errors` fails any test
using the gateway during which the gateway logged one (a crashed connection handler does), and every liveness
check looks too. After every case a fresh connection on the same gateway gets a correct answer (native Ping,
Kafka ApiVersions, TANK Status and a produce), and so does the connection of each protocol opened before the
first case; after the name cases no directory exists outside `<data>/topics/<legal name>` (checked by each name
case, after every case by `test_coverage.py`, and once more when `gw` is torn down, whatever was selected).

A bug found here is marked `xfail(strict=True)` with its reason until fixed (none is open now); the check for
gateway ERROR records is skipped only for such cases.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import wire

#: The marker of the checks that must see the gateway after every other case of the package.
AFTER_EVERY_WIRE_CASE = "after_every_wire_case"


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{AFTER_EVERY_WIRE_CASE}: run after every other test of tests/hostile "
                                       "(a check of the shared gateway's state after all the cases)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items) -> None:
    """Order this package's tests (in the places they hold among all the collected items; stable otherwise):
    those without the gateway first, then those using it, then the `after_every_wire_case` checks."""
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if here in item.path.parents]
    ordered = sorted((items[i] for i in slots), key=_run_order)
    for i, item in zip(slots, ordered):
        items[i] = item


def _run_order(item) -> int:
    if item.get_closest_marker(AFTER_EVERY_WIRE_CASE) is not None:
        return 2
    return 1 if "gw" in getattr(item, "fixturenames", ()) else 0


@pytest.fixture(scope="package")
def gw(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    wire.GW = wire.GatewayThread(root / "data", "storage.flush=none", "limits.request_timeout_ms=3000",
                                 "kafka.auto_create_topics=true")
    try:
        wire.setup_topics()
        wire.OLD.update(native=wire.NativeSock(), kafka=wire.KafkaSock(), tank=wire.tank_client())
        yield wire.GW
        wire.assert_nothing_escaped()  # after the last case of whatever was selected
    finally:
        for conn in wire.OLD.values():
            conn.close()
        wire.OLD.clear()
        wire.GW.stop()
        wire.GW = None


@pytest.fixture(autouse=True)
def no_gateway_errors(request):
    """A case using the gateway passes only if the gateway logged no ERROR while it ran (a crashed connection
    handler does). Checked by every liveness check, and after the test unless it is an expected failure."""
    if "gw" not in request.fixturenames:  # no gateway, nothing to watch (the fuzzer, the table check)
        yield
        return
    request.getfixturevalue("gw")
    wire.watch_gateway_errors()
    yield
    if request.node.get_closest_marker("xfail") is None:
        wire.assert_no_gateway_errors()
