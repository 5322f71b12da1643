"""Fixtures of the API tests: the shared ``mesh`` fixture, on SQLite and on Redis only
(an API serves a mesh other processes reach; memory is no such mesh)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.meshes import make_url_factory


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def mesh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """This test's mesh URL, on SQLite and on Redis."""
    url, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield url()
    finally:
        cleanup()
