"""Recipe: an application logs its own DynamoDB requests as rows ``shardex diagnose`` reads.

DynamoDB keeps no per-request log. An application can: botocore's event hooks see
each request's parameters and each attempt's answer, with the capacity it consumed
(``ReturnConsumedCapacity=INDEXES`` is added to every data request), per table and
per global secondary index. ``log_requests`` turns them into one JSON object a line,
through the standard ``logging`` module, in shardex's access-log format::

    {"timestamp": 1796014800123, "key": "PENDING", "op": "write", "units": 1.0,
     "throttled": 0, "target": "orders/by_status"}

(``timestamp`` in epoch milliseconds; ``target`` is ignored by diagnose). It logs the
requests of one target, a table or ``table/index``: for a GSI, the key is the GSI's
partition key, read from the item written (PutItem, or UpdateItem ``SET k = :v``) or
from a Query's key condition, and the units are those the GSI consumed; this is how
a GSI's heat is seen, as CloudTrail never sees a GSI's keys. Every attempt is a row,
retries included, and a throttled attempt is a row with ``throttled`` 1 (its units
are unknown: 0). GetItem, PutItem, UpdateItem, DeleteItem and Query are covered;
extend ``_keys`` for batches and transactions.

    import boto3, logging
    client = boto3.client("dynamodb")
    logger = logging.getLogger("dynamodb.access")
    handler = logging.FileHandler("access.jsonl")
    handler.setFormatter(AccessLogFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    log_requests(client, logger, target="orders/by_status")
    ...                      # the application runs; then: shardex diagnose access.jsonl
                             # (or, live: tail -f access.jsonl | shardex diagnose -)

Run the demonstration against DynamoDB Local (from the repository root); it writes
orders, most of them PENDING, into a table with a ``by_status`` GSI, logs the GSI's
requests to FILE and prints the file's name:

    scripts/dynamodb-local run .venv/bin/python examples/access_log.py access.jsonl
    .venv/bin/shardex diagnose access.jsonl
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
import uuid
from typing import Any

READS = {"GetItem", "Query"}
WRITES = {"PutItem", "UpdateItem", "DeleteItem"}
THROTTLES = {"ProvisionedThroughputExceededException", "ThrottlingException",
             "RequestLimitExceeded"}
_CONDITION = re.compile(r"(#?[\w.]+)\s*=\s*(:\w+)")


class AccessLogFormatter(logging.Formatter):
    """Formats a record that ``log_requests`` made as one JSON line of the access log."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(getattr(record, "access", {"message": record.getMessage()}))


class _KeySchemas:
    """The partition key attribute of a table and of each of its GSIs (DescribeTable, once)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._known: dict[str, dict[str | None, str]] = {}

    def of(self, table: str) -> dict[str | None, str]:
        if table not in self._known:
            found = self._client.describe_table(TableName=table)["Table"]
            keys: dict[str | None, str] = {None: _hash(found["KeySchema"])}
            for index in found.get("GlobalSecondaryIndexes", []):
                keys[index["IndexName"]] = _hash(index["KeySchema"])
            self._known[table] = keys
        return self._known[table]


def _hash(schema: list[dict[str, str]]) -> str:
    return next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")


def _text(value: dict[str, Any] | None) -> str | None:
    """A key attribute value ({"S": ...}, {"N": ...}) as text."""
    return None if not value else str(next(iter(value.values())))


def _keys(operation: str, params: dict[str, Any], attribute: str,
          index: str | None) -> str | None:
    """The partition key value the request puts on ``attribute``, or None."""
    names = {v: k for k, v in params.get("ExpressionAttributeNames", {}).items()}
    values = params.get("ExpressionAttributeValues", {})
    if operation == "Query":
        if params.get("IndexName") != index:
            return None
        for name, placeholder in _CONDITION.findall(params.get("KeyConditionExpression", "")):
            if names.get(attribute) == name or name == attribute:
                return _text(values.get(placeholder))
        return None
    if index is None:
        return _text(params.get("Key", params.get("Item", {})).get(attribute))
    if operation == "PutItem":
        return _text(params.get("Item", {}).get(attribute))
    if operation == "UpdateItem":
        for name, placeholder in _CONDITION.findall(params.get("UpdateExpression", "")):
            if names.get(attribute) == name or name == attribute:
                return _text(values.get(placeholder))
    return None


def log_requests(client: Any, logger: logging.Logger, *, target: str) -> None:
    """Log every attempt of ``client``'s data requests on ``target`` (``table`` or
    ``table/index``) to ``logger``, one access-log row each (see the module)."""
    table, _, index_name = target.partition("/")
    index = index_name or None
    schemas = _KeySchemas(client)

    def before(params: dict[str, Any], context: dict[str, Any], model: Any,
               **_: Any) -> None:
        if model.name in READS | WRITES and params.get("TableName") == table:
            params.setdefault("ReturnConsumedCapacity", "INDEXES")
            context["shardex_access"] = (model.name, dict(params))

    def after(parsed_response: dict[str, Any] | None, context: dict[str, Any],
              **_: Any) -> None:
        request = context.get("shardex_access")
        if request is None or parsed_response is None:
            return
        operation, params = request
        key = _keys(operation, params, schemas.of(table)[index], index)
        if key is None:
            return
        code = parsed_response.get("Error", {}).get("Code")
        capacity = parsed_response.get("ConsumedCapacity", {})
        part = capacity.get("Table", {}) if index is None else \
            capacity.get("GlobalSecondaryIndexes", {}).get(index, {})
        units = part.get("CapacityUnits", capacity.get("CapacityUnits") if index is None
                         else None)
        if units is None and code is None:
            return  # the request did not touch the target (an update that left the GSI key)
        logger.info("%s", operation, extra={"access": {
            "timestamp": int(time.time() * 1000), "key": key,
            "op": "read" if operation in READS else "write", "units": float(units or 0.0),
            "throttled": int(code in THROTTLES), "target": target}})

    client.meta.events.register("provide-client-params.dynamodb", before)
    client.meta.events.register("response-received.dynamodb", after)


def _demonstrate(path: str) -> None:
    import boto3

    client = boto3.client("dynamodb", endpoint_url=os.environ["SHARDEX_DYNAMODB_ENDPOINT"],
                          region_name=os.environ.get("AWS_REGION", "us-east-1"))
    table = f"orders-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "order_id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                              for a in ("order_id", "status")],
        GlobalSecondaryIndexes=[{"IndexName": "by_status", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}]}])
    logger = logging.getLogger("dynamodb.access")
    handler = logging.FileHandler(path)
    handler.setFormatter(AccessLogFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    log_requests(client, logger, target=f"{table}/by_status")
    try:
        for i in range(120):
            status = "PENDING" if i % 4 else "SHIPPED"
            client.put_item(TableName=table, Item={"order_id": {"S": f"o-{i}"},
                                                   "status": {"S": status}})
        for i in range(0, 120, 8):
            client.update_item(TableName=table, Key={"order_id": {"S": f"o-{i + 1}"}},
                               UpdateExpression="SET #s = :s",
                               ExpressionAttributeNames={"#s": "status"},
                               ExpressionAttributeValues={":s": {"S": "DELIVERED"}})
        for _ in range(5):
            client.query(TableName=table, IndexName="by_status",
                         KeyConditionExpression="#s = :p",
                         ExpressionAttributeNames={"#s": "status"},
                         ExpressionAttributeValues={":p": {"S": "PENDING"}})
    finally:
        handler.close()
        client.delete_table(TableName=table)
    print(path)


if __name__ == "__main__":
    _demonstrate(sys.argv[1] if len(sys.argv) > 1 else "access.jsonl")
