"""A test's mesh URL on each backend: memory, a fresh SQLite file, or the real Redis
under a key prefix of its own that is removed after."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

REDIS_URL = os.environ.get("PLAIT_TEST_REDIS", "redis://127.0.0.1:6379/0")
"""The Redis the tests use (``PLAIT_TEST_REDIS`` names another)."""

BACKENDS = ["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)]
"""The parameters of a fixture that runs a test once per mesh backend."""

REQUIRE_SERVICES = os.environ.get("PLAIT_REQUIRE_SERVICES") == "1"
"""Whether a missing Redis fails a test instead of skipping it (CI sets it)."""


def redis_available() -> bool:
    """Whether the test Redis answers a ping."""
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


def drop_redis_prefix(prefix: str) -> None:
    """Remove every key under ``prefix`` (tests only; SCAN, never KEYS)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        batch = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if batch:
            client.delete(*batch)
    finally:
        client.close()


def make_url_factory(backend: str, tmp_path: Path) -> tuple[Callable[[], str], Callable[[], None]]:
    """A function giving this test's mesh URL (same URL each call) and a cleanup.

    On Redis, skips the test when Redis does not answer (fails it with
    ``PLAIT_REQUIRE_SERVICES=1``).
    """
    if backend == "memory":
        return (lambda: "memory://"), (lambda: None)
    if backend == "sqlite":
        path = tmp_path / "mesh.db"
        return (lambda: f"sqlite:///{path}"), (lambda: None)
    if not redis_available():
        if REQUIRE_SERVICES:
            pytest.fail("Redis does not answer at 127.0.0.1:6379 (PLAIT_REQUIRE_SERVICES=1)")
        pytest.skip("Redis does not answer at 127.0.0.1:6379")
    prefix = f"plait-test-{uuid.uuid4().hex[:12]}:"
    return (lambda: f"{REDIS_URL}?prefix={prefix}"), (lambda: drop_redis_prefix(prefix))
