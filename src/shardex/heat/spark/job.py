"""The spark-submit job: diagnose logs on a Spark cluster and write the shardex.diagnose/1 document.

Run it as a Spark application (EMR step, Glue job, any spark-submit), shardex
installed on the driver and executors (``pip install shardex``: the executors parse
CloudTrail files with shardex's own code)::

    spark-submit --master yarn "$(python -m shardex.heat.spark.job --path)" \\
        s3a://my-trail/AWSLogs/123456789012/CloudTrail/eu-west-1/2026/11/30/ \\
        --format cloudtrail --table orders --output s3a://my-bucket/shardex/diagnosis.json

Inputs are positional or ``--input URI`` (repeatable: Glue passes ``--key value``
pairs only); a URI needs ``--format``. The other options are ``shardex diagnose``'s
(``--skip-bad``, ``--eventual``, ``--ceiling``, ``--headroom``, ``--top``,
``--per-shard``, ``--table``, ``--key-attribute``, ``--item-bytes``,
``--insights-rule``, ``--period``). ``--output`` is a Hadoop URI (``s3a://``,
``hdfs://``, ``file:///``) written through the session's file systems, or ``-`` for
standard output (the default). Arguments it does not know (Glue adds ``--JOB_ID``
and others) are named on standard error and ignored. Exit 0 on success, 2 for bad
input (the error on one line), 1 for another failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from shardex.errors import InvalidInput, ShardexError
from shardex.heat.sources import FORMATS, INSIGHTS_RULES, Options

__all__ = ["main", "parser", "write_text"]


def parser() -> argparse.ArgumentParser:
    """The job's command line (see the module)."""
    p = argparse.ArgumentParser(prog="shardex-spark-job", description=__doc__.splitlines()[0])
    p.add_argument("inputs", nargs="*", help="log files or directories (local or URIs)")
    p.add_argument("--input", action="append", default=[], dest="more",
                   help="another input (repeatable)")
    p.add_argument("--output", default="-", help="where the JSON document goes (- stdout)")
    p.add_argument("--format", dest="fmt", choices=FORMATS)
    p.add_argument("--skip-bad", action="store_true")
    p.add_argument("--eventual", action="store_true")
    p.add_argument("--ceiling", default="dynamodb")
    p.add_argument("--headroom", type=float, default=1.5)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--per-shard", action="store_true")
    p.add_argument("--table", default=None)
    p.add_argument("--key-attribute", default=None)
    p.add_argument("--item-bytes", type=int, default=1024)
    p.add_argument("--insights-rule", choices=INSIGHTS_RULES, default=None)
    p.add_argument("--period", type=int, default=None)
    p.add_argument("--path", action="store_true",
                   help="print this module's file (for spark-submit) and exit")
    return p


def _known(p: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[str]]:
    """Split ``argv`` into what ``p`` knows and the options it does not, each with its
    value (``--JOB_ID j-1``: Glue's own arguments, which must not become inputs)."""
    known = {o for action in p._actions for o in action.option_strings}
    given: list[str] = []
    unknown: list[str] = []
    rest = iter(range(len(argv)))
    for i in rest:
        arg = argv[i]
        if arg.startswith("--") and arg.split("=", 1)[0] not in known:
            unknown.append(arg)
            if "=" not in arg and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                unknown.append(argv[i + 1])
                next(rest, None)
            continue
        given.append(arg)
    return given, unknown


def write_text(spark: Any, uri: str, text: str) -> None:
    """Write ``text`` to ``uri`` through the session's Hadoop file systems (one object)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    out = fs.create(path, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    """Run the job (see the module); ``spark``: a session to use instead of the
    cluster's (``SparkSession.builder.getOrCreate()``, stopped at the end)."""
    p = parser()
    given, unknown = _known(p, list(sys.argv[1:] if argv is None else argv))
    args = p.parse_args(given)
    if args.path:
        print(__file__)
        return 0
    for arg in unknown:
        print(f"shardex-spark-job: ignoring argument {arg!r}", file=sys.stderr)
    from shardex.heat.report import diagnose
    from shardex.heat.spark.session import pyspark

    owned = spark is None
    try:
        inputs = [*args.inputs, *args.more]
        if not inputs:
            raise InvalidInput("give at least one input (positional or --input)")
        options = Options(fmt=args.fmt, skip_bad=args.skip_bad, eventual=args.eventual,
                          table=args.table, key_attribute=args.key_attribute,
                          item_bytes=args.item_bytes, insights_rule=args.insights_rule,
                          period=args.period)
        if spark is None:
            spark = pyspark().sql.SparkSession.builder.appName("shardex diagnose").getOrCreate()
        result = diagnose(inputs, options=options, ceiling=args.ceiling,
                          headroom=args.headroom, top=args.top, per_shard=args.per_shard,
                          engine="spark", spark=spark)
        why = result.nothing_read()
        if why is not None:
            raise InvalidInput(f"{', '.join(inputs)}: no rows to diagnose: {why}")
        text = json.dumps(result.to_dict(), indent=2) + "\n"
        if args.output == "-":
            sys.stdout.write(text)
        else:
            write_text(spark, args.output, text)
    except InvalidInput as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except ShardexError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except Exception as exc:  # Spark's own (writing the output): one line, not a trace
        from shardex.heat.spark.session import first_line

        print(f"error: {first_line(exc)}", file=sys.stderr)
        return 1
    finally:
        if owned and spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
