"""Transitional re-export of `logway.codecs.compression`, which Kafka and TANK now share (see that module)."""

# transitional alias: removed once pipeline/ imports logway.codecs.compression
from logway.codecs.compression import *  # noqa: F401,F403
