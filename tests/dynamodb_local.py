"""Test support for DynamoDB Local: the endpoint scripts/test started, fresh tables, stores.

scripts/test starts DynamoDB Local and exports ``SHARDEX_DYNAMODB_ENDPOINT``. Without
it the DynamoDB tests are skipped on a developer's machine and fail in CI (CI=true),
so CI never skips them silently. DynamoDB Local accepts any credentials made of
letters and digits: dummy ones are set here unless the environment has some.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

from shardex.stores.dynamodb import DynamoDBStore

ENDPOINT_VARIABLE = "SHARDEX_DYNAMODB_ENDPOINT"
REGION = "us-east-1"
GSI = {"gsi": "by_shard", "key_attribute": "shard_key", "sort_attribute": "shard_sort",
       "id_attribute": "id"}


def endpoint() -> str | None:
    return os.environ.get(ENDPOINT_VARIABLE) or None


def require_endpoint() -> str:
    """Return the DynamoDB Local endpoint; skip the test without one (fail it in CI)."""
    url = endpoint()
    if url is None:
        message = (f"{ENDPOINT_VARIABLE} is not set: run the tests with scripts/test, which "
                   "starts DynamoDB Local")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    return url


def unique_name(prefix: str = "shardex-test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


_clients: dict[str, Any] = {}


def sync_client() -> Any:
    """A boto3 client on DynamoDB Local, for creating tables and checking behind shardex."""
    import boto3

    url = require_endpoint()
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = boto3.client("dynamodb", endpoint_url=url, region_name=REGION)
    return client


def table_names() -> list[str]:
    """Every table on DynamoDB Local: ListTables answers 100 a page, and the suite makes
    more than that."""
    pages = sync_client().get_paginator("list_tables").paginate()
    return [name for page in pages for name in page["TableNames"]]


def create_index_table() -> str:
    name = unique_name()
    sync_client().create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}])
    return name


def create_gsi_tables(*, meta: bool = True) -> str:
    """Create a base table with the GSI of ``GSI`` (and its metadata table); return its name."""
    name = unique_name()
    sync_client().create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": GSI["id_attribute"], "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": GSI[a], "AttributeType": "S"}
                              for a in ("id_attribute", "key_attribute", "sort_attribute")],
        GlobalSecondaryIndexes=[{
            "IndexName": GSI["gsi"], "Projection": {"ProjectionType": "ALL"},
            "KeySchema": [{"AttributeName": GSI["key_attribute"], "KeyType": "HASH"},
                          {"AttributeName": GSI["sort_attribute"], "KeyType": "RANGE"}]}])
    if meta:
        sync_client().create_table(
            TableName=f"{name}-shardex", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                       {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}])
    return name


def table_store(**options: Any) -> DynamoDBStore:
    """A store on a new index table of its own."""
    url = require_endpoint()
    return DynamoDBStore(create_index_table(), region=REGION, endpoint_url=url, **options)


def gsi_store(**options: Any) -> DynamoDBStore:
    """A GSI-mode store on a new base table, GSI and metadata table of its own."""
    url = require_endpoint()
    return DynamoDBStore(create_gsi_tables(), region=REGION, endpoint_url=url,
                         **{**GSI, **options})
