"""The admin listener (`listeners.admin`, 127.0.0.1:9644 by default): Prometheus metrics, health and readiness
probes, and a console page with the JSON endpoints behind it — served by the gateway's own trio process over h11.

- `stats`: the plain counters the request path bumps (the pump, connections, group commit, the steps);
- `metrics`: the gateway's `CollectorRegistry`, building every `logway_*` family at scrape time;
- `http`: the HTTP/1.1 server (h11), bounded in connections, sizes and time;
- `api`: the endpoints (`/metrics`, `/health`, `/ready`, `/api/*`, the console's static files);
- `browse`: the console's message browser and search;
- `actions`: the console's actions, native requests answered by the native handler (`POST /api/request`);
- `server`: `AdminServer`, what the gateway starts;
- `supervisor`: `SupervisorAdmin`, the admin listener of a `workers: N` supervisor (every worker's metrics, labelled,
  their readiness, and the console over all of them);
- `calls`: counting the event loop's function calls, a benchmark aid (`count_calls: true`).

Nothing is imported here: `stats` is imported by modules that must not pull in prometheus_client or h11.
"""
