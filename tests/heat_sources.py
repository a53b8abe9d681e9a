"""Generated CloudTrail files and Contributor Insights reports, in the shapes AWS documents.

CloudTrail: the DynamoDB developer guide's "Understanding DynamoDB log file entries"
(PutItem, UpdateItem with an errorCode, TransactWriteItems with ``requestItems`` whose
entries spell ``tableName``/``TableName`` and ``key``/``Key`` both ways) and the
API's own batch shapes for BatchWriteItem (``{table: [{putRequest: {key}}]}``) and
BatchGetItem (``{table: {keys: [...]}}``). Contributor Insights: the answer of
GetInsightRuleReport (KeyLabels, AggregationStatistic, Contributors with Keys and
Datapoints of Timestamp and ApproximateValue).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BASE = 1_796_014_800  # 2026-11-30T05:00:00Z
_IDENTITY = {
    "type": "AssumedRole", "principalId": "AKIAIOSFODNN7EXAMPLE:app",
    "arn": "arn:aws:sts::111122223333:assumed-role/orders/app", "accountId": "111122223333",
    "accessKeyId": "AKIAIOSFODNN7EXAMPLE",
    "sessionContext": {"attributes": {"mfaAuthenticated": "false",
                                      "creationDate": "2026-11-30T04:00:00Z"}}}


def iso(second: float) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event(name: str, params: Mapping[str, Any], second: float, *, error: str | None = None,
          message: str | None = None, source: str = "dynamodb.amazonaws.com",
          number: int = 0) -> dict[str, Any]:
    """One CloudTrail record of a data event, with the fields CloudTrail writes."""
    record: dict[str, Any] = {
        "eventVersion": "1.08", "userIdentity": _IDENTITY, "eventTime": iso(second),
        "eventSource": source, "eventName": name, "awsRegion": "eu-west-1",
        "sourceIPAddress": "192.0.2.0", "userAgent": "aiobotocore/2.13 shardex",
        "requestParameters": dict(params), "responseElements": None,
        "requestID": f"REQ{number:020d}", "eventID": f"00000000-0000-4000-8000-{number:012d}",
        "readOnly": name.startswith(("Get", "Query", "Scan", "BatchGet", "TransactGet")),
        "resources": [{"accountId": "111122223333", "type": "AWS::DynamoDB::Table",
                       "ARN": "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-index"}],
        "eventType": "AwsApiCall", "apiVersion": "2012-08-10", "managementEvent": False,
        "recipientAccountId": "111122223333", "eventCategory": "Data"}
    if error is not None:
        record["errorCode"] = error
        record["errorMessage"] = message or error
    return record


def put_item(table: str, key: Mapping[str, Any], second: float, **more: Any) -> dict[str, Any]:
    return event("PutItem", {"tableName": table, "key": dict(key), "item": sorted(key),
                             "returnConsumedCapacity": "TOTAL"}, second, **more)


def get_item(table: str, key: Mapping[str, Any], second: float, *, consistent: bool = False,
             **more: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"tableName": table, "key": dict(key)}
    if consistent:
        params["consistentRead"] = True
    return event("GetItem", params, second, **more)


def transact_put(table: str, keys: Sequence[Mapping[str, Any]], second: float,
                 **more: Any) -> dict[str, Any]:
    """A TransactWriteItems as shardex's index-table mode writes: entry and placement.

    Alternate entries spell their fields as AWS's own example does, in either case.
    """
    items = []
    for i, key in enumerate(keys):
        if i % 2:
            items.append({"operation": "Put", "TableName": table, "Key": dict(key),
                          "ConditionExpression": "attribute_not_exists(pk)"})
        else:
            items.append({"operation": "Put", "tableName": table, "key": dict(key),
                          "items": sorted(key)})
    return event("TransactWriteItems", {"requestItems": items, "returnConsumedCapacity": "TOTAL"},
                 second, **more)


def batch_write(table: str, keys: Sequence[Mapping[str, Any]], second: float) -> dict[str, Any]:
    requests = [{"putRequest": {"key": dict(k), "item": sorted(k)}} if i % 2 == 0 else
                {"deleteRequest": {"key": dict(k)}} for i, k in enumerate(keys)]
    return event("BatchWriteItem", {"requestItems": {table: requests}}, second)


def batch_get(table: str, keys: Sequence[Mapping[str, Any]], second: float) -> dict[str, Any]:
    return event("BatchGetItem", {"requestItems": {table: {"keys": [dict(k) for k in keys]}}},
                 second)


def query(table: str, second: float, *, index: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"tableName": table, "keyConditionExpression": "pk = :v"}
    if index is not None:
        params["indexName"] = index
    return event("Query", params, second)


def write_trail(path: Path, records: Iterable[Mapping[str, Any]], *,
                pretty: bool = False) -> Path:
    """Write a CloudTrail log file (gzipped when the name ends in .gz), as S3 receives it."""
    text = json.dumps({"Records": list(records)}, indent=4 if pretty else None)
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def insights_report(series: Mapping[str, Sequence[tuple[float, float]]], *,
                    statistic: str = "Sum", labels: Sequence[str] = ("pk",),
                    epoch: bool = False) -> dict[str, Any]:
    """A GetInsightRuleReport answer: per key, its (second, value) datapoints."""
    contributors = []
    for key, points in sorted(series.items(), key=lambda kv: -sum(v for _, v in kv[1])):
        contributors.append({
            "Keys": [key, *(f"sort-{i}" for i in range(len(labels) - 1))],
            "ApproximateAggregateValue": float(sum(v for _, v in points)),
            "Datapoints": [{"Timestamp": t if epoch else iso(t), "ApproximateValue": v}
                           for t, v in points]})
    return {"KeyLabels": list(labels), "AggregationStatistic": statistic,
            "AggregateValue": float(sum(c["ApproximateAggregateValue"] for c in contributors)),
            "ApproximateUniqueCount": len(contributors), "Contributors": contributors,
            "MetricDatapoints": []}


def write_report(path: Path, report: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(report, indent=2))
    return path
