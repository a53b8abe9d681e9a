"""The Spark side of diagnose: pyspark on demand, a quiet local session, the tables' engine.

pyspark is imported only when Spark is used; without it MissingDependency names the
``spark`` extra. A local session (``local_session``) binds to 127.0.0.1, keeps its
console quiet and its Python workers on this interpreter; a cluster's session
(spark-submit, Glue, EMR) is used as it is, with its SQL time zone set to UTC (the
row rules read zone-less times as UTC). Spark's failures become InvalidLog at the
boundary (``spark_errors``), the first line of Spark's message kept.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from shardex.errors import CapabilityMissing, InvalidLog, MissingDependency
from shardex.heat.aggregate import SPARK

__all__ = ["LOCAL_CONF", "SparkEngine", "first_line", "local_session", "pyspark",
           "spark_errors"]

# a local session on a shared machine: loopback only, no web UI, no progress bars, few
# shuffle partitions (the aggregates are small after the first group-by)
LOCAL_CONF: Mapping[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions":
        f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties').as_uri()}",
}


def pyspark() -> ModuleType:
    """Return the pyspark module; raise MissingDependency naming the ``spark`` extra."""
    try:
        import pyspark as module
        import pyspark.sql  # the submodule the callers use
    except ImportError as exc:
        raise MissingDependency("pyspark", "spark") from exc
    return module


def local_session(master: str = "local[*]", conf: Mapping[str, str] | None = None) -> Any:
    """Start (or join) a local Spark session: LOCAL_CONF, then ``conf`` over it.

    Its Python workers run this interpreter (so they import this shardex). Raises
    MissingDependency without pyspark, CapabilityMissing when the JVM cannot start
    (Spark needs Java 17 or later: JAVA_HOME or java on PATH).
    """
    module = pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = module.sql.SparkSession.builder.master(master).appName("shardex diagnose")
    settings = {**LOCAL_CONF, **dict(conf or {})}
    java = "spark.driver.extraJavaOptions"
    if conf and java in conf:  # the caller's JVM options go beside the quiet logging's
        settings[java] = f"{LOCAL_CONF[java]} {conf[java]}"
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _jvm_stderr() as said:
        try:
            return builder.getOrCreate()
        except Exception as exc:  # pyspark raises its own error kinds when java is missing
            detail = said() or first_line(exc)
            raise CapabilityMissing(f"Spark could not start ({detail}); it needs Java 17 or "
                                    "later (JAVA_HOME or java on PATH)") from exc


@contextmanager
def _jvm_stderr() -> Iterator[Callable[[], str]]:
    """Give a JVM started within a file of its own as its standard error (it writes JVM
    warnings there, not on the user's terminal); yields what reads its last line."""
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to hand on (an embedding host): leave it be
        yield lambda: ""
        return
    try:
        with tempfile.TemporaryFile() as log:
            sys.stderr.flush()
            os.dup2(log.fileno(), 2)
            try:
                yield lambda: _last_line(log)
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _last_line(log: IO[bytes]) -> str:
    log.seek(0)
    lines = [line.strip() for line in log.read().decode("utf-8", "replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")


@contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Turn Spark's errors while reading ``what`` into InvalidLog (one line of Spark's)."""
    errors = pyspark().errors
    try:
        yield
    except errors.AnalysisException as exc:
        detail = first_line(exc)
        if "PATH_NOT_FOUND" in detail:
            raise InvalidLog(f"no such file or directory ({detail})", path=what) from exc
        raise InvalidLog(f"Spark cannot read it: {detail}", path=what) from exc
    except (errors.PySparkException, _py4j_error()) as exc:
        raise InvalidLog(f"Spark cannot read it: {first_line(exc)}", path=what) from exc


def _py4j_error() -> type[Exception]:
    from py4j.protocol import Py4JError

    error: type[Exception] = Py4JError
    return error


def first_line(exc: BaseException) -> str:
    """The line of a Spark error that says what went wrong (not the JVM's stack)."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred while calling", "at ", "Traceback")):
            if ": " in line and line.split(": ", 1)[0].rsplit(".", 1)[-1].endswith(
                    ("Exception", "Error")):
                line = line.split(": ", 1)[1]
            return line[:500]
    return type(exc).__name__


class SparkEngine:
    """The shared tables' engine (``shardex.heat.tables.Engine``) on a Spark session.

    Tables are checkpointed temp views (dropped by ``close``); ``what`` names the
    inputs in errors.
    """

    dialect = SPARK

    def __init__(self, spark: Any, what: str) -> None:
        self.spark = spark
        self.what = what
        self._cached: dict[str, Any] = {}

    def table(self, name: str, select: str) -> None:
        with spark_errors(self.what):
            frame = self.spark.sql(select)
        self.frame(name, frame)

    def view(self, name: str, select: str) -> None:
        self.table(name, select)  # each view is read several times: computed once

    def frame(self, name: str, frame: Any) -> None:
        """Hold a DataFrame, computed now, as the temp view ``name``.

        Its lineage is cut (a local checkpoint: cached blocks on the executors, which
        dynamic allocation keeps), so each later query is planned over a table, not
        over every step before it: with a dozen steps, planning the whole lineage again
        for each query cost more than running them.
        """
        with spark_errors(self.what):
            held = frame.localCheckpoint(eager=True)
        held.createOrReplaceTempView(name)
        self._cached[name] = held

    def keys(self, name: str, keys: Sequence[str]) -> None:
        self.frame(name, self.spark.createDataFrame([(k,) for k in keys], "key STRING"))

    def rows(self, select: str) -> list[tuple[Any, ...]]:
        with spark_errors(self.what):
            return [tuple(r) for r in self.spark.sql(select).collect()]

    def close(self) -> None:
        """Drop the tables (Spark frees their blocks once nothing refers to them)."""
        for name in self._cached:
            self.spark.catalog.dropTempView(name)
        self._cached.clear()
