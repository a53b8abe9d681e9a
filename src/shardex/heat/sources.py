"""Where heat comes from: which format a file is, told by its content, and how to read it.

Formats (``FORMATS``):

- ``csv``, ``jsonl``, ``parquet``: access logs, one row per request (``heat.rows``);
- ``cloudtrail``: CloudTrail log files of DynamoDB data events, as delivered to S3
  (``{"Records": [...]}``, gzipped or not; ``heat.cloudtrail``);
- ``insights``: a CloudWatch Contributor Insights rule report, the answer of
  GetInsightRuleReport (``heat.insights``).

``detect_format`` reads the first ``HEAD`` bytes (64 KiB, through gzip): Parquet by its
magic bytes, a JSON document by its fields, JSON Lines by a first line that is an
object, CSV otherwise; a binary file or one that is not UTF-8 is refused. A directory stands for
the files under it (``expand``), as CloudTrail delivers them into dated folders.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shardex.errors import InvalidInput, InvalidLog

__all__ = ["BINARY", "EMPTY", "ENGINES", "FORMATS", "HEAD", "INSIGHTS_RULES", "JSON_ARRAY",
           "Options", "detect_format", "expand", "is_gzip", "log_format", "parse_document",
           "read_document", "require_file"]

FORMATS = ("csv", "jsonl", "parquet", "cloudtrail", "insights")
# what aggregates files read exactly: DuckDB in this process, or Spark (heat.spark)
ENGINES = ("duckdb", "spark")
INSIGHTS_RULES = ("accessed", "throttled")
HEAD = 65_536  # the bytes a format is told from; a NUL among them makes a file binary
_CLOUDTRAIL = re.compile(r'"Records"\s*:')
_INSIGHTS = re.compile(r'"(Contributors|KeyLabels|AggregationStatistic)"\s*:')
_WHAT = "CSV, JSON Lines, Parquet, CloudTrail or Contributor Insights"
# why a source whose format is told by its content is no log (a stream's too)
EMPTY = f"is empty: not a log ({_WHAT})"
BINARY = f"is binary, not a log shardex reads ({_WHAT})"


@dataclass(frozen=True, slots=True)
class Options:
    """How to read sources: the format (None: by content) and the source-specific choices.

    - ``skip_bad``: count and skip malformed rows instead of failing;
    - ``eventual``: reads given in bytes are eventually consistent (half the units);
    - ``table``, ``key_attribute``: CloudTrail: the table to diagnose and its partition
      key attribute (None: the one the files show);
    - ``item_bytes``: CloudTrail: the item size its units are estimated from;
    - ``insights_rule``: Contributor Insights: ``accessed`` or ``throttled`` (None:
      from the file name, as the rule names them: ``-PKT-``/``-SKT-`` are throttled);
    - ``period``: Contributor Insights: seconds a datapoint covers (None: the
      smallest step between its timestamps).
    """

    fmt: str | None = None
    skip_bad: bool = False
    eventual: bool = False
    table: str | None = None
    key_attribute: str | None = None
    item_bytes: int = 1024
    insights_rule: str | None = None
    period: int | None = None

    def __post_init__(self) -> None:
        if self.fmt is not None and self.fmt not in FORMATS:
            raise InvalidInput(f"unknown log format {self.fmt!r}; use one of "
                               f"{', '.join(FORMATS)}")
        if self.insights_rule is not None and self.insights_rule not in INSIGHTS_RULES:
            raise InvalidInput(f"unknown Contributor Insights rule kind {self.insights_rule!r}; "
                               f"use one of {', '.join(INSIGHTS_RULES)}")
        for name in ("item_bytes", "period"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise InvalidInput(f"{name.replace('_', ' ')} must be an integer >= 1, "
                                   f"got {value!r}")


def expand(paths: Iterable[str | Path]) -> list[str]:
    """Return the files of ``paths``: a file as it is, a directory as the files under it
    (sorted, hidden ones left out). Raises InvalidLog for a path that does not exist."""
    files: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file()
                           and not any(part.startswith(".") for part in f.relative_to(p).parts))
            if not found:
                raise InvalidLog("is a directory with no files in it", path=str(path))
            files.extend(str(f) for f in found)
        elif p.is_file():
            files.append(str(path))
        else:
            raise InvalidLog(_not_a_file(p), path=str(path))
    return files


def _not_a_file(path: Path) -> str:
    """Why ``path``, neither a file nor a directory, is not read. A pipe (a process
    substitution, ``<(zcat log.gz)``) or a device is never opened: logs are read whole,
    their head twice (the format's detection), and a pipe can be read once."""
    if not path.exists():
        return "no such file"
    return ("is a pipe or a device, not a file: pipe it to stdin instead, e.g. zcat "
            "access.log.gz | shardex diagnose -")


def require_file(path: str) -> None:
    """Raise InvalidLog unless ``path`` is a file: a directory, a pipe, a device or
    nothing is named for what it is."""
    if not Path(path).is_file():
        raise InvalidLog("is a directory, not a file" if Path(path).is_dir()
                         else _not_a_file(Path(path)), path=path)


def is_gzip(path: str) -> bool:
    """Whether the file starts with gzip's magic bytes."""
    with open(path, "rb") as raw:
        return raw.read(2) == b"\x1f\x8b"


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as raw:
            head = raw.read(HEAD)
            if head[:2] == b"\x1f\x8b":
                raw.seek(0)
                with gzip.GzipFile(fileobj=raw) as unpacked:
                    head = unpacked.read(HEAD)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InvalidLog(f"is not a valid gzip file: {exc}", path=path) from exc
    except OSError as exc:
        raise InvalidLog(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    return head


JSON_ARRAY = ("is a JSON array; shardex reads JSON Lines (one object a line), CloudTrail "
              "files ({\"Records\": [...]}) and Contributor Insights reports")


def detect_format(path: str) -> str:
    """Return the format of the file ``path`` from its content (see the module).

    Raises InvalidLog for a missing, empty, binary or non-UTF-8 file, or a JSON array.
    """
    require_file(path)
    head = _head(path)
    if head.startswith(b"PAR1"):
        return "parquet"
    if not head.strip():
        raise InvalidLog(EMPTY, path=path)
    if b"\x00" in head:
        raise InvalidLog(BINARY, path=path)
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        raise InvalidLog(f"is not UTF-8 text ({exc.reason} at byte {exc.start}), not a log "
                         f"shardex reads ({_WHAT})", path=path) from exc
    text = text.lstrip("\ufeff \t\r\n")
    if text.startswith("["):
        raise InvalidLog(JSON_ARRAY, path=path)
    if not text.startswith("{"):
        return "csv"
    try:
        first = json.loads(text.split("\n", 1)[0])
    except (ValueError, RecursionError):
        first = None
    if isinstance(first, dict):
        if "Records" in first:
            return "cloudtrail"
        if {"Contributors", "KeyLabels"} & set(first):
            return "insights"
        return "jsonl"
    # a document over several lines (or one line longer than the head)
    if _CLOUDTRAIL.search(text):
        return "cloudtrail"
    if _INSIGHTS.search(text):
        return "insights"
    return "jsonl"


def log_format(path: str | Path, fmt: str | None = None) -> str:
    """Return the format of ``path``: ``fmt`` when given (checked), else by its content.

    Raises InvalidInput for an unknown ``fmt``, InvalidLog as ``detect_format`` does.
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise InvalidInput(f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    return detect_format(str(path))


def read_document(path: str) -> Any:
    """Parse the file ``path`` (gzipped or not) as one JSON document.

    Raises InvalidLog for a file that cannot be read, unpacked, decoded or parsed.
    """
    try:
        with open(path, "rb") as raw:
            data = raw.read()
    except OSError as exc:
        raise InvalidLog(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    return parse_document(data, path)


def parse_document(data: bytes, path: str) -> Any:
    """Parse the bytes of the file ``path`` (gzipped or not) as one JSON document.

    Raises InvalidLog for bytes that cannot be unpacked, decoded or parsed.
    """
    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return json.loads(data)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InvalidLog(f"is not a valid gzip file: {exc}", path=path) from exc
    except UnicodeDecodeError as exc:
        raise InvalidLog(f"is not UTF-8 text: {exc.reason}", path=path) from exc
    except ValueError as exc:
        raise InvalidLog(f"is not a valid JSON document: {exc}", path=path) from exc
    except RecursionError:
        raise InvalidLog("is nested too deeply to be a log", path=path) from None
