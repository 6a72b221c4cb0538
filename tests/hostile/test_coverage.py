"""Cross-protocol checks of the wire cases (see `conftest.py`).

- The request tables in `wire.py`, which drive every parametrized case of `test_native.py`, `test_kafka.py` and
  `test_tank.py`, hold every request type of every protocol (no gateway needed).
- After every other case of the package, nothing escaped the shared gateway's data directory and every protocol
  still serves: this check is marked `after_every_wire_case`, which `conftest.py` orders last.
"""

from __future__ import annotations

import typing

import pytest

from logway.codecs import native as nv
from logway.codecs.kafka.api.registry import SUPPORTED
from logway.codecs.tank.requests import REQUEST_TYPES as TANK_REQUEST_TYPES

from .wire import (KAFKA_BUILT_KEYS, NATIVE_REQUESTS, TANK_REQUESTS, assert_all_alive, assert_nothing_escaped,
                   tank_frame)


def test_every_request_type_of_every_protocol_is_covered():
    """A request type added to a codec must be added here too (this list drives every parametrized case)."""
    assert {type(r) for r in NATIVE_REQUESTS.values()} == set(typing.get_args(nv.Request))
    assert set(SUPPORTED) <= KAFKA_BUILT_KEYS, "a new Kafka api key needs a body in kafka_body()"
    assert {tank_frame(r)[0] for r in TANK_REQUESTS.values()} == set(TANK_REQUEST_TYPES)


@pytest.mark.after_every_wire_case
def test_nothing_escaped_the_data_dir_after_every_case(gw):
    assert_nothing_escaped()
    assert_all_alive()
