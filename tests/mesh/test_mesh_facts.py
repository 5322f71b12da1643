"""The mesh says what it is: who shares it and where it lives, so no code outside
``plait/mesh/`` needs to read a URL's scheme to find out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from plait.errors import ConfigError
from plait.mesh import Mesh, absolute_mesh_url, mesh_class

pytestmark = pytest.mark.anyio

PLAIT = Path(__file__).resolve().parents[2] / "plait"

EXPECTED = {
    # backend: (shares_across_processes, shares_across_machines)
    "memory": (False, False),
    "sqlite": (True, False),
    "redis": (True, True),
    "postgres": (True, True),
}


async def test_each_backend_says_who_shares_it_and_where_it_lives(
    mesh: Mesh, backend: str, tmp_path: Path
) -> None:
    processes, machines = EXPECTED[backend]
    assert mesh.shares_across_processes is processes
    assert mesh.shares_across_machines is machines
    # The class answers the same before any mesh is opened (a URL is all a CLI has).
    kind = mesh_class(mesh.url)
    assert isinstance(mesh, kind)
    assert (kind.shares_across_processes, kind.shares_across_machines) == (processes, machines)
    if backend == "sqlite":
        assert mesh.location == f"the SQLite file {tmp_path / 'mesh.db'}"
    elif backend == "memory":
        assert mesh.location == "this process's memory"
    elif backend == "postgres":
        assert mesh.location.startswith("the PostgreSQL database postgresql://")
        assert "in schema 'plait_test_" in mesh.location
    else:
        assert mesh.location.startswith("the Redis server redis://")
        assert "prefix 'plait-test-" in mesh.location


def test_a_redis_location_masks_its_password() -> None:
    from plait.mesh.redis import RedisMesh

    found = RedisMesh("redis://:s3cret@127.0.0.1:6379/0")
    assert "s3cret" not in found.location and "***" in found.location


def test_a_postgres_location_and_errors_mask_its_password() -> None:
    from plait.mesh.postgres import PostgresMesh

    found = PostgresMesh("postgresql://plait:s3cret@127.0.0.1:5432/db?schema=x")
    assert "s3cret" not in found.location and "***" in found.location
    assert "s3cret" not in str(found._error(OSError("auth failed for s3cret")))


def test_a_postgres_url_with_a_bad_option_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="schema"):
        mesh_class("postgres://h/db")("postgres://u:pw@h/db?schema=Bad-Name")
    with pytest.raises(ConfigError, match="option pool must be a positive number"):
        mesh_class("postgres://h/db")("postgres://h/db?pool=zero")


def test_an_unsupported_url_has_no_mesh_class() -> None:
    with pytest.raises(ConfigError, match="unsupported mesh URL"):
        mesh_class("ftp://example.org/mesh")


def test_a_relative_sqlite_url_is_made_absolute_and_others_are_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_mesh_url("sqlite:///rel/mesh.db?synchronous=full") == (
        f"sqlite:///{tmp_path / 'rel' / 'mesh.db'}?synchronous=full"
    )
    assert absolute_mesh_url("sqlite:////abs/mesh.db") == "sqlite:////abs/mesh.db"
    assert absolute_mesh_url("redis://h:6379/0") == "redis://h:6379/0"


# What reading a URL's scheme looks like in code (not in help text or messages).
SCHEME_READS = re.compile(
    r"""(\.(split|partition|rpartition|index|find)\(\s*["']://)"""
    r"""|(["']://["']\s+(not\s+)?in\b)"""
    r"""|(startswith\(\s*\(?\s*["'](memory|sqlite|redis|rediss|postgres|postgresql)\b)"""
)


def test_no_code_outside_the_mesh_reads_a_url_scheme() -> None:
    found = [
        f"{path.relative_to(PLAIT.parent)}:{n}: {line.strip()}"
        for path in sorted(PLAIT.rglob("*.py"))
        if PLAIT / "mesh" not in path.parents
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SCHEME_READS.search(line)
    ]
    assert not found, "ask the mesh (shares_across_processes, location...):\n" + "\n".join(found)


def test_the_scheme_check_sees_a_scheme_read() -> None:
    # The pattern must catch what refuse_unshared used to do, or the test above proves nothing.
    assert SCHEME_READS.search('scheme = url.split("://", 1)[0].lower() if "://" in url else ""')
    assert SCHEME_READS.search('if not url.lower().startswith("sqlite://"):')
