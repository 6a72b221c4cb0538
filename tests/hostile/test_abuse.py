"""Hostile and broken clients against a real gateway process (issue 33): each attack of `logway.bench.abuse`, at a
small scale, beside the benchmark's probe — a native client pinging every 20 ms on its own connection.

Each test holds the gateway to what it promises under that attack: the probe is answered throughout (its worst
answer well under a second: a stall of the event loop shows as seconds), resident memory stays within the memory
budget it was given, the attacker gets its protocol's answer (a clean close, an error, back-pressure), and
afterwards every protocol serves a fresh connection (`abuse.assert_serving`). The bounds are loose on purpose:
they tell a gateway that holds from one that stalls or grows without bound on a busy 2-core machine; the figures
themselves are `logway bench abuse`'s (BENCHMARKS.md).
"""

from __future__ import annotations

import re

import pytest

from logway.bench import abuse

pytestmark = pytest.mark.slow

MiB = 1024 * 1024
#: The probe's worst answer under an attack: a stalled event loop shows as seconds.
WORST_PROBE_MS = 1000.0
#: The budget the tests give their gateways, and the resident memory the gateway may hold beyond it (its code,
#: the page cache's mapped pages, allocator slack).
BUDGET = 256 * MiB
SLACK_MIB = 120


def attack(name: str, scale: float, *settings: str, budget: int = BUDGET) -> abuse.Outcome:
    chosen = next(a for a in abuse.ATTACKS if a.name == name)
    outcome = abuse.run_attack(chosen, scale, settings=(f"limits.memory_bytes={budget}", *settings))
    print(outcome.line())
    assert outcome.serving_after == "yes", outcome.line()
    assert not outcome.probe_failures, outcome.line()
    assert outcome.probe_worst_ms < WORST_PROBE_MS, outcome.line()
    assert outcome.rss_peak_mib - outcome.rss_start_mib < budget / MiB + SLACK_MIB, outcome.line()
    return outcome


def test_a_large_kafka_request_before_sasl_is_refused_from_its_size():
    outcome = attack("kafka-preauth", 0.1)  # a 10 MiB Metadata request before SASL
    sent, total = map(float, re.search(r"sent ([\d.]+) of ([\d.]+) MiB", outcome.result).groups())
    assert "closed after" in outcome.result and sent < total, outcome.result


def test_a_large_native_frame_before_auth_is_refused_from_its_size():
    outcome = attack("native-preauth", 1.0)  # 10 MiB
    sent, whole = map(float, re.search(r"sent ([\d.]+) of ([\d.]+) MiB, closed", outcome.result).groups())
    assert sent < whole, outcome.result  # closed from the frame's size, not once it was read (nor by a deadline)


def test_connections_that_do_not_authenticate_in_time_are_closed():
    outcome = attack("unauthenticated-keepalive", 0.3, "limits.auth_timeout_ms=1000")
    for protocol in ("kafka", "native"):
        seconds = float(re.search(protocol + r": closed after ([\d.]+) s", outcome.result).group(1))
        assert 0.9 <= seconds < 2.9, outcome.result


def test_partial_kafka_requests_wait_for_memory_instead_of_taking_it():
    """Eight authenticated connections each sending all but the last byte of a 100 MiB Produce request, under a
    512 MiB budget: five are read, three wait for memory — the gateway stops reading them, and keeps them open."""
    outcome = attack("kafka-partial-frames", 1.0, budget=512 * MiB)
    sent = float(re.search(r"(\d+) MiB sent", outcome.result).group(1))
    assert sent < 8 * 100 - 64 and "8 of 8 still open" in outcome.result, outcome.result


def test_a_request_costing_more_than_a_quarter_of_the_budget_is_refused():
    """A 100 MiB Produce request under a 256 MiB budget (one request may take 64 MiB): closed from its size."""
    outcome = attack("kafka-partial-frames", 0.125)
    assert "0 of 1 still open" in outcome.result, outcome.result


def test_partial_tank_requests_wait_for_memory_under_a_larger_budget():
    """Two TANK connections each sending all but the last byte of a 256 MiB frame, under a 2 GiB budget (a frame's
    decode cost, 512 MiB, is a quarter of it): the first is taken, the second waits — the gateway stops reading it
    — and resident memory stays below what both would take."""
    outcome = attack("tank-partial-frames", 0.5, "limits.request_timeout_ms=60000", budget=2048 * MiB)
    sent = float(re.search(r"(\d+) MiB sent", outcome.result).group(1))
    assert sent < 2 * 256 - 32, outcome.result  # the second frame was not read whole


@pytest.mark.parametrize("name", ["kafka-fetch-v0-unread", "tank-transcoded-unread", "native-fetch-unread"])
def test_clients_that_never_read_their_answers_hold_no_more_than_the_budget(name):
    attack(name, 0.25)


def test_a_native_produce_whose_answer_cannot_be_sent_is_refused_before_anything_is_appended():
    outcome = attack("native-huge-produce", 1.0, budget=1024 * MiB)  # 3 M records in a 10 MiB frame
    assert "answered ErrorResponse" in outcome.result and "the partition holds 0 records" in outcome.result, \
        outcome.result


def test_idle_connections_of_some_addresses_cannot_lock_the_others_out():
    """Every connection the limits allow, idle, from four loopback addresses: clients from a fifth and a sixth
    address are served (an idle connection of an address holding the most goes for each)."""
    outcome = attack("idle-lockout", 0.125, "limits.max_connections=128", "limits.max_connections_per_ip=32")
    assert "127.0.0.6: PongResponse, 127.0.0.7: PongResponse" in outcome.result, outcome.result


def test_admin_probes_are_answered_whatever_other_admin_connections_hold():
    outcome = attack("admin-idle", 1.0)
    assert "/health: 200, /ready: 200" in outcome.result, outcome.result


def test_an_admin_request_head_over_the_limit_gets_431():
    outcome = attack("admin-big-header", 1.0)
    assert outcome.result == "answered 431", outcome.result


def test_a_metrics_scrape_does_not_hold_the_event_loop():
    attack("metrics-scrape", 0.2)


def test_listing_many_long_group_ids_pages_through_them():
    outcome = attack("list-huge-groups", 0.1)  # 500 groups of 32 KB ids: 16 MB of ids, over the 10 MiB frame
    assert "native: 500 groups" in outcome.result and "kafka: 500 groups" in outcome.result, outcome.result


def test_kafka_list_groups_lists_groups_that_only_committed_offsets():
    outcome = attack("kafka-list-groups", 1.0)
    assert outcome.result == "listed", outcome.result
