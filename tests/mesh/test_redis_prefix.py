"""A Redis prefix ends in a separator: ``prefix=nc3`` names keys ``nc3:...``, never
``nc3keys``; a prefix that ends in one already is kept, and a mesh stored before under
a prefix without one is still read where it is."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from plait.mesh import open_mesh
from plait.mesh.redis import RedisMesh, with_separator
from tests.mesh.test_redis import REDIS_URL, drop_prefix, keys_like, raw  # noqa: F401

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("given", "used"),
    [("nc3", "nc3:"), ("nc3:", "nc3:"), ("app/", "app/"), ("a.b-", "a.b-"), ("", "")],
)
def test_a_prefix_gets_a_separator_unless_it_ends_in_one(given: str, used: str) -> None:
    assert with_separator(given) == used
    assert RedisMesh(f"{REDIS_URL}?prefix={given}", prefix=given).prefix == used


@pytest.fixture
async def base(raw: aioredis.Redis) -> AsyncIterator[str]:  # noqa: F811
    """A fresh prefix without a separator; every key starting with it is dropped after."""
    made = f"plait-test-{uuid.uuid4().hex[:12]}"
    yield made
    await drop_prefix(raw, made)


async def test_keys_go_under_the_prefix_and_its_separator(
    raw: aioredis.Redis,  # noqa: F811
    base: str,
) -> None:
    async with open_mesh(f"{REDIS_URL}?prefix={base}") as mesh:
        assert mesh.prefix == f"{base}:"  # type: ignore[attr-defined]
        await mesh.put("k", 1)
    assert await keys_like(raw, f"{base}*") == {f"{base}:kv:k", f"{base}:keys"}


async def test_a_mesh_stored_without_the_separator_is_still_read(
    raw: aioredis.Redis,  # noqa: F811
    base: str,
) -> None:
    old = RedisMesh(REDIS_URL, prefix=base)
    old._lay_out(base)  # the layout before prefixes got their separator
    async with old:
        await old.put("k", "stored before")
    assert f"{base}keys" in await keys_like(raw, f"{base}*")
    async with open_mesh(f"{REDIS_URL}?prefix={base}") as mesh:
        assert mesh.prefix == base  # type: ignore[attr-defined]
        entry = await mesh.get("k")
        assert entry is not None and entry.value == "stored before"
        await mesh.put("k2", 2)
    assert not await keys_like(raw, f"{base}:*")  # nothing written to the new layout
