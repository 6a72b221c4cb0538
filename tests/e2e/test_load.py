"""The load test of issue 6, short: `logway bench load` with 200 connections for 3 s through the same code.

It checks what must hold at any speed — no error, every connection did each kind of request, the probe was
answered, the gateway's peak RSS was read — and no timing figure: those are printed by the benchmark
(`scripts/dev logway bench load`, figures in BENCHMARKS.md), never asserted in tests.
"""

from __future__ import annotations

import pytest

from logway.bench.load import KINDS, PROTOCOLS, LoadSettings, run_load


@pytest.mark.slow
def test_short_load_has_no_errors_and_every_connection_works():
    report = run_load(LoadSettings(connections=200, seconds=3.0, partitions=4))
    print(report.format())  # shown with -s or on failure
    assert report.problems() == [], report.format()
    assert report.connections == 200
    assert all(report.connections_by_protocol[p] >= 66 for p in PROTOCOLS)
    assert report.error_count == 0 and not report.error_samples
    assert len(report.per_connection) == 200
    assert all(done[kind] >= 1 for done in report.per_connection for kind in KINDS)
    for proto in PROTOCOLS:
        for kind in KINDS:
            assert report.requests[(proto, kind)] >= 66, (proto, kind)
        assert report.records_produced[proto] > 0
        assert report.records_fetched[proto] > 0
    assert all(len(v) > 0 for v in report.probe_latencies.values())
    assert not report.probe_errors
    assert report.peak_rss > 0 and report.peak_rss >= report.rss_start > 0
    assert report.gateway_cpu > 0 and report.client_cpu > 0  # printed per request too
    assert "µs per request" in report.format()
    assert report.gateway_exit == 0 and not report.gateway_log_errors


@pytest.mark.slow
@pytest.mark.parametrize("handover", [True, False], ids=["handover", "relay"])
def test_short_load_over_two_workers_routes_kafka_and_hands_over_or_relays_native_and_tank(handover):
    """`--workers 2`: Kafka connections go to their partition's broker, native and TANK ones to the shared port.
    Each load connection stays on one partition, so a worker hands every connection whose partition the other owns
    over to it (about half of them), and nothing is relayed — or, with `worker_handover: false`, relays those
    connections' requests, long-polls included, many at once, and hands nothing over."""
    report = run_load(LoadSettings(connections=120, seconds=2.0, partitions=4, workers=2,
                                   gateway_settings=() if handover else ("worker_handover=false",)))
    print(report.format())
    assert report.problems() == [], report.format()
    assert dict(report.connections_by_protocol) == {"native": 40, "kafka": 40, "tank": 40}
    assert all(done[kind] >= 1 for done in report.per_connection for kind in KINDS)
    for proto in PROTOCOLS:
        assert report.records_produced[proto] > 0 and report.records_fetched[proto] > 0
    assert "workers: 2" in report.format() and report.gateway_exit == 0
    relayed = report.delta("relayed_requests")  # native and TANK requests for the other worker's partitions
    handed = report.delta("handed_over_out")  # (connections, once each)
    if handover:
        assert relayed == 0 and 0 < handed < 80 and report.delta("handed_over_refused") == 0, report.format()
        assert "connections handed over between workers" in report.format()
    else:  # (no hand-overs: the workers do not even report the counter)
        assert 0 < relayed < sum(report.requests.values()) and handed is None, report.format()
        assert "connections handed over" not in report.format()
    assert "requests relayed between workers" in report.format()
    # the gateway's counters come from the supervisor's admin listener, summed over both workers
    assert "transcoded_reads" in report.metrics_end and "python_gc_collections_total" in report.metrics_end


@pytest.mark.slow
def test_at_owner_sends_native_and_tank_connections_to_their_owner_so_nothing_is_relayed():
    """`--at-owner`: each native and TANK connection goes to its partition owner's own listener (`native.i`,
    `tank.i`), as a handed-over connection would be served: the same load, not one request relayed."""
    report = run_load(LoadSettings(connections=60, seconds=1.5, partitions=4, workers=2, at_owner=True,
                                   protocols=("native", "tank")))
    print(report.format())
    assert report.problems() == [], report.format()
    assert all(done[kind] >= 1 for done in report.per_connection for kind in KINDS)
    assert report.delta("relayed_requests") == 0, report.format()
    assert "workers: 2 (every connection at its owner)" in report.format()
    with pytest.raises(SystemExit, match="--at-owner needs --workers 2 or more"):
        run_load(LoadSettings(connections=3, seconds=1.0, at_owner=True))


@pytest.mark.slow
def test_ping_kind_alone_asks_each_protocols_cheapest_request():
    """`--kinds ping`: native Ping, Kafka ApiVersions and TANK DiscoverPartitions, each answer checked (a wrong
    one counts as an error); nothing produced or fetched; the CPU line splits off the kernel's part."""
    report = run_load(LoadSettings(connections=60, seconds=1.0, partitions=2, kinds=("ping",)))
    print(report.format())
    assert report.problems() == [], report.format()
    for proto in PROTOCOLS:
        assert report.requests[(proto, "ping")] >= 20, proto
        assert all(report.requests[(proto, kind)] == 0 for kind in KINDS)
    assert not report.records_produced and not report.records_fetched
    assert "looping over ping for 1 s" in report.format()
    assert 0 < report.gateway_system_cpu < report.gateway_cpu
    assert "µs in the kernel" in report.format()


@pytest.mark.slow
def test_kinds_pick_the_requests_and_unknown_kinds_are_refused():
    report = run_load(LoadSettings(connections=30, seconds=1.0, partitions=2, kinds=("produce", "ping"),
                                   protocols=("kafka", "tank")))
    assert report.problems() == [], report.format()
    assert all(done["produce"] >= 1 and done["ping"] >= 1 and not done["fetch"] for done in report.per_connection)
    assert "looping over produce (10 x 100 B) and ping" in report.format()
    with pytest.raises(SystemExit, match="--kinds takes some of produce, fetch, long-poll, ping"):
        run_load(LoadSettings(connections=3, seconds=1.0, kinds=("produce", "stroll")))


@pytest.mark.slow
def test_short_load_over_two_postgres_gateways_sends_each_kafka_connection_to_its_leader(pg_database):
    """`--backend postgres --gateways 2`: two gateways in cluster mode over one database, each leading half of the
    partitions; a Kafka connection sent to the other gateway would be answered NOT_LEADER (an error of the run);
    native and TANK connections spread over both, which relay what the other leads."""
    report = run_load(LoadSettings(connections=60, seconds=2.0, partitions=4, protocols=("kafka", "native", "tank"),
                                   backend="postgres", gateways=2, dsn=pg_database))
    print(report.format())
    assert report.problems() == [], report.format()
    assert all(report.connections_by_protocol[p] == 20 for p in ("kafka", "native", "tank"))
    assert all(done[kind] >= 1 for done in report.per_connection for kind in KINDS)
    assert all(report.records_produced[p] > 0 and report.records_fetched[p] > 0 for p in ("kafka", "native", "tank"))
    assert "2 gateways (storage.postgres.cluster" in report.format() and "summed over 2 gateways" in report.format()


def test_several_gateways_need_postgres():
    with pytest.raises(SystemExit, match="several gateways need --backend postgres"):
        run_load(LoadSettings(gateways=2, protocols=("kafka",)))
