"""logway.bench — tooling that runs against a gateway from the outside: benchmarks and the harnesses that break
things on purpose (`powerfs`, a file system that forgets what was never synced). The gateway never imports it."""
