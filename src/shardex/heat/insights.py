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
period's mean, so a second's peak within it may be higher; the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shardex.errors import InvalidLog
from shardex.heat.rows import MAX_AMOUNT, Batch
from shardex.heat.sources import read_document

__all__ = ["DEFAULT_PERIOD", "Report", "insights_note", "read_report", "report_of"]

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

    def where(self, rn: int) -> str:
        """The JSON path of staged row ``rn``."""
        return self.places[rn - 1]


def _rule_of(path: str, given: str | None) -> str:
    if given is not None:
        return given
    name = Path(path).name.upper()
    return "throttled" if "-PKT-" in name or "-SKT-" in name or "THROTTL" in name \
        else "accessed"


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
            # accessed units are not requests (0: unknown); Count and throttles are
            report.batch.add(len(report.places), cells,
                             n=count if throttled or statistic.lower() == "count" else 0)
    return report

