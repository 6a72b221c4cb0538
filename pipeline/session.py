"""A ready-to-use SparkSession for logway pipelines.

`spark_session()` checks for Java first (a clear `JavaNotFound` instead of JAVA_GATEWAY_EXITED), points local
Python workers at the interpreter that runs the driver (so they see the same installed packages: pyarrow,
logway), builds the session with the UI off unless asked, and registers format "logway" (`source.register`).
"""

from __future__ import annotations

import os
import sys

from .errors import JavaNotFound
from .java import java_problem, require_java

__all__ = ["spark_session"]


def spark_session(master: str = "local[2]", app_name: str = "logway", *, ui: bool = False,
                  conf: dict[str, str] | None = None):
    """Get or create a SparkSession on `master` with format "logway" registered."""
    require_java()
    from pyspark.sql import SparkSession

    from .source import register

    if master.startswith("local"):
        # Executors of a local master are children of this process: make them run this very interpreter,
        # not whatever `python3` is first on PATH (which may lack pyarrow and logway).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name).config("spark.ui.enabled", str(ui).lower())
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # pyspark raises PySparkRuntimeError(JAVA_GATEWAY_EXITED) when the JVM dies
        if "JAVA_GATEWAY_EXITED" in str(exc) or "Java gateway process exited" in str(exc):
            problem = java_problem() or f"Spark needs a Java 17+ runtime; the JVM did not start: {exc}"
            raise JavaNotFound(problem) from exc
        raise
    register(spark)
    return spark
