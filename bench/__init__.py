"""logway.bench — tooling that runs against a gateway from the outside: the benchmarks of `logway bench <name>`
and the harnesses that break things on purpose. Nothing in the gateway, storage, codecs or pipeline imports it.

Modules:

- `registry`: `Benchmark(name, help, arguments, run)` and the collection behind `logway bench <name>` (each
  benchmark module below declares its `BENCHMARKS`);
- `storage` (storage-append), `native` (native-produce, native-fetch, native), `tank` (tank-produce, tank-consume,
  tank-tail), `floor` (floor: a minimal Python relay's round trip, the floor under tank-tail; load-floor: a minimal
  server's requests/s and CPU per request with 1,000 connections, the floor under load), `kafka` (kafka-produce,
  kafka-throughput, kafka-tail), `failover` (kafka-failover: a gateway's kill -9 in a cluster over one PostgreSQL),
  `spark` (spark-read), `load` (load), `requests` (requests:
  the cost of one request, and the lean wire `load` shares), `workers` (workers), `chaos` (chaos: the
  crash-restart checker), `powerloss` (powerloss: the same with power cuts);
- `launcher`: `GatewayProcess`, a `logway serve` child on ephemeral ports (benchmarks and tests);
- `gateways`: several gateway processes over one database, the database a postgres run uses, who leads what;
- `powerfs`: a FUSE file system that forgets what was never synced; `proc`: what /proc says about a process.
"""
