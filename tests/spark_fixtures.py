"""Fixtures for the Spark pipeline tests (`test_pipeline.py` imports them): one gateway process and one
SparkSession (local[2], UI off) for the whole run, plus helpers to name topics and read them back.

Spark needs pyspark/pyarrow (the `logway[spark]` extra) and a Java 17+ runtime. When either is missing the Spark
tests are skipped with the reason (for Java: "Spark needs a Java 17+ runtime…"), unless REQUIRE_SPARK=1, which
turns the skip into a failure (CI sets it, so CI always runs them).
"""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.pipeline.java import java_problem


def spark_unavailable() -> str | None:
    """Why the Spark tests cannot run here, or None."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"the Spark tests need the logway[spark] extra (pyspark >= 4.2, pyarrow): {exc}"
    return java_problem()


def require_spark() -> None:
    """Skip (or, with REQUIRE_SPARK=1, fail) when Spark cannot run here."""
    reason = spark_unavailable()
    if reason:
        if os.environ.get("REQUIRE_SPARK") == "1":
            pytest.fail(f"REQUIRE_SPARK=1 but {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def logway_gateway(tmp_path_factory):
    """A gateway subprocess shared by every pipeline test (each test uses its own topics)."""
    data = str(tmp_path_factory.mktemp("pipeline") / "data")
    gw = GatewayProcess(data, "storage.flush=none", "log_level=WARNING", "kafka.auto_create_topics=true",
                        stderr=subprocess.DEVNULL)  # (some writes go to topics they do not create, as Spark's do)
    yield gw
    gw.stop()


@pytest.fixture(scope="session")
def kafka_address(logway_gateway) -> str:
    host, port = logway_gateway.addresses["kafka"]
    return f"{host}:{port}"


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession: local[2], UI off, format "logway" registered."""
    require_spark()
    from logway.pipeline import spark_session

    session = spark_session("local[2]", "logway-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def read_rows(spark, address: str, **options) -> list:
    """Every row of a batch read, ordered by (topic, partition, offset)."""
    reader = spark.read.format("logway").option("gateway", address)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load().orderBy("topic", "partition", "offset").collect()
