"""logway.cli — the `logway` command: serve, topics, bench."""
