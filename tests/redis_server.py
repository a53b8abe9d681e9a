"""Test support for redis-server: the URL scripts/test exported, and unique key prefixes.

scripts/test starts redis-server on 127.0.0.1 and exports ``SHARDEX_REDIS_URL``. Without
it the Redis tests are skipped on a developer's machine and fail in CI (CI=true), so CI
never skips them silently.
"""

from __future__ import annotations

import os
import uuid

import pytest

URL_VARIABLE = "SHARDEX_REDIS_URL"


def require_url() -> str:
    """Return the redis-server URL; skip the test without one (fail it in CI)."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        message = f"{URL_VARIABLE} is not set: run the tests with scripts/test, which starts redis"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url


def unique_prefix() -> str:
    return f"shardex-test-{uuid.uuid4().hex[:12]}"
