"""A test's mesh URL on each backend: memory, a fresh SQLite file, the real Redis
under a key prefix of its own, or the real PostgreSQL in a schema of its own; the
prefix and the schema are removed after."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

REDIS_URL = os.environ.get("PLAIT_TEST_REDIS", "redis://127.0.0.1:6379/0")
"""The Redis the tests use (``PLAIT_TEST_REDIS`` names another)."""

POSTGRES_URL = os.environ.get("PLAIT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL database the tests use (``PLAIT_TEST_POSTGRES`` names another)."""

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("postgres", marks=pytest.mark.postgres),
]
"""The parameters of a fixture that runs a test once per mesh backend."""

LIVE_BACKENDS = BACKENDS
"""The backends with live channels (``Mesh.live``): every one."""

REQUIRE_SERVICES = os.environ.get("PLAIT_REQUIRE_SERVICES") == "1"
"""Whether a missing Redis or PostgreSQL fails a test instead of skipping it (CI sets it)."""


_ANSWERED: set[str] = set()
"""The servers that answered once in this test process: not asked again before each test
(a new PostgreSQL connection costs the server a process). One that did not answer is
asked again each time."""


def redis_available() -> bool:
    """Whether the test Redis answers a ping (once it has, it is taken to answer)."""
    if REDIS_URL in _ANSWERED:
        return True
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        try:
            if client.ping():
                _ANSWERED.add(REDIS_URL)
            return REDIS_URL in _ANSWERED
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


def postgres_available() -> bool:
    """Whether the test PostgreSQL answers (and psycopg is installed); once it has, it
    is taken to answer."""
    if POSTGRES_URL in _ANSWERED:
        return True
    try:
        import psycopg
    except ImportError:
        return False
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        _ANSWERED.add(POSTGRES_URL)
        return True
    except psycopg.Error:
        return False


def drop_postgres_schema(schema: str) -> None:
    """Drop a test's schema and everything in it (tests only)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def postgres_url(schema: str) -> str:
    """The test database's URL with the mesh in ``schema``, each mesh object holding
    four connections at most: test processes run side by side on one server, whose
    ``max_connections`` (100 by default) they share with everyone else's."""
    return f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={schema}&pool=4"


def require_postgres() -> None:
    """Skip the test when PostgreSQL does not answer (fail it under
    ``PLAIT_REQUIRE_SERVICES=1``)."""
    if not postgres_available():
        message = "PostgreSQL does not answer at 127.0.0.1:5432"
        if REQUIRE_SERVICES:
            pytest.fail(f"{message} (PLAIT_REQUIRE_SERVICES=1)")
        pytest.skip(message)


def make_url_factory(backend: str, tmp_path: Path) -> tuple[Callable[[], str], Callable[[], None]]:
    """A function giving this test's mesh URL (same URL each call) and a cleanup.

    On Redis and PostgreSQL, skips the test when the server does not answer (fails it
    with ``PLAIT_REQUIRE_SERVICES=1``).
    """
    if backend == "memory":
        return (lambda: "memory://"), (lambda: None)
    if backend == "sqlite":
        path = tmp_path / "mesh.db"
        return (lambda: f"sqlite:///{path}"), (lambda: None)
    if backend == "postgres":
        require_postgres()
        schema = f"plait_test_{uuid.uuid4().hex[:12]}"
        return (lambda: postgres_url(schema)), (lambda: drop_postgres_schema(schema))
    if not redis_available():
        if REQUIRE_SERVICES:
            pytest.fail("Redis does not answer at 127.0.0.1:6379 (PLAIT_REQUIRE_SERVICES=1)")
        pytest.skip("Redis does not answer at 127.0.0.1:6379")
    prefix = f"plait-test-{uuid.uuid4().hex[:12]}:"
    return (lambda: f"{REDIS_URL}?prefix={prefix}"), (lambda: drop_redis_prefix(prefix))
