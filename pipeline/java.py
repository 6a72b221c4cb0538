"""Finding the Java runtime Spark needs, and saying so clearly when there is none.

Without Java, `SparkSession.builder.getOrCreate()` fails with the opaque JAVA_GATEWAY_EXITED. `java_problem()`
looks where Spark's launcher looks (`$JAVA_HOME/bin/java`, else `java` on PATH), runs `java -version`, and returns
a message starting "Spark needs a Java 17+ runtime" when it is missing or too old (None when it is fine);
`require_java()` raises it as `JavaNotFound`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from .errors import JavaNotFound

__all__ = ["MIN_JAVA", "java_executable", "java_version", "java_problem", "require_java"]

#: Spark 4 runs on Java 17 or 21.
MIN_JAVA = 17
_INSTALL_HINT = ("install one (e.g. `apt-get install openjdk-17-jre-headless`, `brew install openjdk@17`, or "
                 "https://adoptium.net) and put it on PATH or set JAVA_HOME")
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_executable(env: dict[str, str] | None = None) -> str | None:
    """The java Spark would start: $JAVA_HOME/bin/java when JAVA_HOME is set, else `java` on PATH."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        path = os.path.join(home, "bin", "java")
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which("java", path=env.get("PATH", os.defpath))


def java_version(java: str) -> int | None:
    """The major version `java -version` reports (8 for "1.8.0_x"), or None if it cannot be run or parsed."""
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION.search(proc.stderr + proc.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java_problem(env: dict[str, str] | None = None) -> str | None:
    """Why Spark cannot start here (a message for humans), or None when a Java 17+ runtime is available."""
    env = os.environ if env is None else env
    java = java_executable(env)
    if java is None:
        where = (f"JAVA_HOME={env['JAVA_HOME']} has no bin/java" if env.get("JAVA_HOME")
                 else "JAVA_HOME is not set and there is no `java` on PATH")
        return f"Spark needs a Java {MIN_JAVA}+ runtime, and none was found ({where}): {_INSTALL_HINT}."
    version = java_version(java)
    if version is None:
        return (f"Spark needs a Java {MIN_JAVA}+ runtime, and `{java} -version` did not run or say which: "
                f"{_INSTALL_HINT}.")
    if version < MIN_JAVA:
        return f"Spark needs a Java {MIN_JAVA}+ runtime, and {java} is Java {version}: {_INSTALL_HINT}."
    return None


def require_java(env: dict[str, str] | None = None) -> None:
    """Raise `JavaNotFound` unless a Java 17+ runtime is available."""
    problem = java_problem(env)
    if problem:
        raise JavaNotFound(problem)
