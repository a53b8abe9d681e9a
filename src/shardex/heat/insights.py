"""A CloudWatch Contributor Insights rule report read as access-log rows.

The report is the answer of GetInsightRuleReport (``aws cloudwatch
get-insight-rule-report --rule-name R ...``), saved as JSON (gzipped or not)::

    {"KeyLabels": ["PK"], "AggregationStatistic": "Sum", "AggregateValue": 5400.0,
     "Contributors": [{"Keys": ["PENDING"], "ApproximateAggregateValue": 5400.0,
                       "Datapoints": [{"Timestamp": "2026-11-30T05:00:00Z",
                                       "ApproximateValue": 3600.0}, ...]}, ...]}

DynamoDB's rules (turned on per table or per GSI) count, per partition key, the
capacity units consumed (``-PKC-``/``-SKC-`` rules: most accessed) or the throttled
requests (``-PKT-``/``-SKT-``: most throttled). A contributor's first key is its
partition key (the ``-SKC-``/``-SKT-`` rules add the sort key). Each datapoint
becomes one row at its timestamp (ISO 8601 or epoch, by the access-log rules):

- accessed, ``Sum``: the units consumed in the period; ``Count``: requests, one unit
  each;
- throttled: that many throttled requests.

What a report cannot tell: its rules count reads and writes together, so a row is
neither. They are staged as writes and compared with the write ceiling (the lower
one, so a key is never found cooler than it may be), and the profile says its reads
are not told apart (``HeatProfile.reads_told_apart``): the recommendation never takes
a key for never read, nor picks ``random_suffix`` on that ground.

A datapoint covers one period (the report's ``Period``, which the answer does not
repeat): the smallest step between the report's timestamps, or given. Rates are the
period's mean, so a second's peak within it may be higher; the report says so. A
report's timestamps step by whole periods of whole minutes: one that steps otherwise
(a datapoint 1 s after another would make every datapoint a 1 s bucket) is refused
unless the period is given, and two datapoints of one contributor at one time (which
would be summed) are refused always (``period_of``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

from shardex.errors import InvalidLog
from shardex.heat.rows import MAX_AMOUNT, Batch
from shardex.heat.sources import read_document

__all__ = ["DEFAULT_PERIOD", "Report", "insights_note", "period_of", "read_report",
           "report_of"]

DEFAULT_PERIOD = 60


class Report:
    """One report staged as rows: the rule kind, the key label, where each row came from."""

    def __init__(self, path: str, rule: str, statistic: str, label: str) -> None:
        self.path = path
        self.rule = rule
        self.statistic = statistic
        self.label = label
        self.batch = Batch()
        self.places: list[str] = []
        # per staged row: its contributor's index and its datapoint's; per contributor: its key
        self.points: list[tuple[int, int]] = []
        self.keys: list[str] = []

    def where(self, rn: int) -> str:
        """The JSON path of staged row ``rn``."""
        return self.places[rn - 1]


def _rule_of(path: str, given: str | None) -> str:
    if given is not None:
        return given
    name = Path(path).name.upper()
    return "throttled" if "-PKT-" in name or "-SKT-" in name or "THROTTL" in name \
        else "accessed"


def period_of(report: Report, seconds: Iterable[tuple[int, int]],
              given: int | None) -> int | None:
    """The seconds a datapoint of ``report`` covers: ``given``, else the smallest step
    between its timestamps (None when they show no step).

    ``seconds`` are the report's valid staged rows: (row number, its second). Raises
    InvalidLog naming the datapoint and its contributor when two datapoints of one
    contributor share a second (summed, they would double its load), and, when no
    period is given, when the timestamps do not step by one period: a step of less
    than a minute or not a whole number of minutes (CloudWatch's periods), or a step
    that is not a whole number of the smallest.
    """
    first: dict[int, int] = {}  # second -> the first row found at it
    seen: dict[tuple[int, int], int] = {}  # (contributor, second) -> its row
    for rn, sec in sorted(seconds, key=lambda p: (p[1], p[0])):
        first.setdefault(sec, rn)
        owner = report.points[rn - 1][0]
        before = seen.setdefault((owner, sec), rn)
        if before != rn:
            raise _refused(report, rn, f"is at the time of Datapoints"
                           f"[{report.points[before - 1][1]}]: a contributor has one "
                           "datapoint a period, so the two would be summed")
    if given is not None:
        return given
    times = sorted(first)
    steps = [(b - a, first[b]) for a, b in pairwise(times)]
    if not steps:
        return None
    period, rn = min(steps)
    if period % 60:
        raise _refused(report, rn, f"is {period} s after the datapoint before it: a "
                       "report's period is a whole number of minutes, so its timestamps "
                       "show no period (--period SECONDS gives it)")
    for step, rn in steps:
        if step % period:
            raise _refused(report, rn, f"is {step} s after the datapoint before it, not a "
                           f"whole number of the {period} s step between others: its "
                           "timestamps show no period (--period SECONDS gives it)")
    return period


def _refused(report: Report, rn: int, why: str) -> InvalidLog:
    owner = report.points[rn - 1][0]
    return InvalidLog(f"contributor {report.keys[owner]!r}: this datapoint {why}",
                      path=report.path, column=f"{report.where(rn)}.Timestamp")


def insights_note(report: Report, period: int | None, *, given: bool) -> tuple[int, str]:
    """The seconds a report's datapoint covers, and the note that says what it counts.

    ``period`` is the one given (``given``) or found (the smallest step between its
    timestamps; None when they show no step: DEFAULT_PERIOD is assumed).
    """
    said = "given" if given else "the step between its timestamps"
    if period is None:
        period, said = DEFAULT_PERIOD, "assumed: its timestamps show no step; --period sets it"
    what = ("throttled requests" if report.rule == "throttled" else
            "capacity units consumed, compared with the write ceiling"
            if report.statistic == "Sum" else "requests, one unit each")
    what += (" (reads and writes together: the report cannot tell them apart, so it "
             "cannot show whether a key is read)")
    return period, (f"Contributor Insights {Path(report.path).name}: {report.rule} rule "
                    f"({report.statistic}) on {report.label!r}, {what}; one datapoint "
                    f"per {period} s ({said})")


def read_report(path: str, rule: str | None = None) -> Report:
    """Read one report into rows; ``rule`` is ``accessed``/``throttled`` (None: by name).

    Raises InvalidLog naming the field at fault when the document does not have the
    shape of a GetInsightRuleReport answer.
    """
    return report_of(read_document(path), path, rule)


def report_of(doc: Any, path: str, rule: str | None = None) -> Report:
    """The rows of a report already parsed (``doc``) from ``path``; as ``read_report``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("Contributors"), list):
        raise InvalidLog('is not a Contributor Insights report: it has no "Contributors" list',
                         path=path)
    labels = doc.get("KeyLabels")
    label = str(labels[0]) if isinstance(labels, list) and labels else "key"
    statistic = str(doc.get("AggregationStatistic") or "Sum")
    if statistic.lower() not in ("sum", "count"):
        raise InvalidLog(f"AggregationStatistic {statistic!r} is neither Sum nor Count",
                         path=path, column="AggregationStatistic")
    report = Report(path, _rule_of(path, rule), statistic.capitalize(), label)
    throttled = report.rule == "throttled"
    for i, contributor in enumerate(doc["Contributors"]):
        where = f"Contributors[{i}]"
        if not isinstance(contributor, dict):
            raise InvalidLog(f"{where} is not an object", path=path, column=where)
        keys, points = contributor.get("Keys"), contributor.get("Datapoints")
        if not isinstance(keys, list) or not keys:
            raise InvalidLog(f"{where}.Keys must be a non-empty list", path=path,
                             column=f"{where}.Keys")
        if not isinstance(points, list):
            raise InvalidLog(f"{where}.Datapoints must be a list", path=path,
                             column=f"{where}.Datapoints")
        report.keys.append(str(keys[0]))
        for j, point in enumerate(points):
            place = f"{where}.Datapoints[{j}]"
            if not isinstance(point, dict):
                raise InvalidLog(f"{place} is not an object", path=path, column=place)
            value = point.get("ApproximateValue")
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or not 0 <= value < MAX_AMOUNT:
                raise InvalidLog(f"{place}.ApproximateValue {value!r} must be a number >= 0 "
                                 f"and below {MAX_AMOUNT:g}",
                                 path=path, column=f"{place}.ApproximateValue")
            count = max(0, round(value))
            cells: Mapping[str, Any] = {
                "timestamp": point.get("Timestamp"), "key": keys[0], "op": "write",
                "units": 0 if throttled else value, "throttled": 1 if throttled else 0}
            report.places.append(place)
            report.points.append((i, j))
            # accessed units are not requests (0: unknown); Count and throttles are
            report.batch.add(len(report.places), cells,
                             n=count if throttled or statistic.lower() == "count" else 0)
    return report

