"""CAS writes per second on each mesh backend, beside floors measured in the same run.

A floor is the same write made with nothing of plait around it: for Redis the mesh's own
Lua CAS script called straight through redis.asyncio; for PostgreSQL the same ``UPDATE
... WHERE key = %s AND version = %s`` sent alone in autocommit through a psycopg pool of
the mesh's size (the mesh sends BEGIN, it and COMMIT); for SQLite a bare ``UPDATE ...
WHERE key = ? AND version = ?`` committed per write, once through ``asyncio.to_thread``
and once directly on one thread. ``ratio`` is value / baseline.

Run: ``python bench/mesh_cas.py [--json] [--seconds 1.0]``. Redis is read from
``PLAIT_BENCH_REDIS`` (default ``redis://127.0.0.1:6379/0``) under a fresh key prefix
that is removed afterwards, PostgreSQL from ``PLAIT_BENCH_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``) in a fresh schema dropped afterwards;
the figures of a server that does not answer are skipped. ``--backend NAME`` measures
one backend only.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import redis.asyncio as aioredis
from _common import (
    Figure,
    Measure,
    best_of,
    parse_args,
    postgres_mesh_url,
    postgres_scratch,
    rate,
    rate_sync,
    redis_mesh_url,
    redis_scratch,
    report,
)

from plait.mesh import Mesh, open_mesh
from plait.mesh._codec import encode

BENCH = "mesh_cas"
UNIT = "CAS/s"
TASKS = 64
VALUE = {"status": "running", "ready": ["draft"], "visits": {"draft": 3}, "n": 12345}
MEMORY_FLOOR = 200_000.0
_UPDATE = "UPDATE kv SET value = ?, version = version + 1 WHERE key = ? AND version = ?"


async def mesh_cas(mesh: Mesh, tasks: int) -> Measure:
    """CAS puts through the mesh by ``tasks`` tasks, each on a key of its own."""
    versions = [(await mesh.put(f"bench/{t}", VALUE)).version for t in range(tasks)]

    async def cas(task: int) -> None:
        versions[task] = (await mesh.put(f"bench/{task}", VALUE, versions[task])).version

    return lambda seconds: rate(cas, seconds, tasks=tasks)


# -- Redis ----------------------------------------------------------------------------


async def redis_figures(seconds: float) -> list[Figure]:
    async with redis_scratch() as scratch:
        if scratch is None:
            return []
        return await _redis_figures(seconds, *scratch)


async def _redis_figures(seconds: float, client: aioredis.Redis, prefix: str) -> list[Figure]:
    from plait.mesh._redis_scripts import COMMIT

    script = client.register_script(COMMIT)
    data = encode("bench", VALUE)
    fixed = [f"{prefix}keys", f"{prefix}sched", f"{prefix}schedp"]

    def floor(tasks: int) -> Measure:
        # the mesh's own CAS script, straight through redis.asyncio
        versions = [0] * tasks

        async def cas(task: int) -> None:
            name = f"floor/{task}"
            args = msgpack.packb([1, "P", name, data, versions[task]], use_bin_type=False)
            await script([*fixed, f"{prefix}kv:{name}"], [args])
            versions[task] += 1

        return lambda seconds: rate(cas, seconds, tasks=tasks)

    figures: list[Figure] = []
    async with open_mesh(redis_mesh_url(prefix)) as mesh:
        for metric, tasks in (("redis_cas_sequential", 1), ("redis_cas_concurrent", TASKS)):
            value, base = await best_of([await mesh_cas(mesh, tasks), floor(tasks)], seconds)
            note = f"bare script call, {tasks} task{'s' if tasks > 1 else ''}"
            figures.append(Figure(BENCH, metric, value, UNIT, base, 0.8, note))
    return figures


# -- PostgreSQL -----------------------------------------------------------------------


async def postgres_figures(seconds: float) -> list[Figure]:
    async with postgres_scratch() as schema:
        if schema is None:
            return []
        return await _postgres_figures(seconds, schema)


async def _postgres_figures(seconds: float, schema: str) -> list[Figure]:
    from psycopg_pool import AsyncConnectionPool

    from plait.mesh._pg_ops import _UPDATE
    from plait.mesh.postgres import DEFAULT_POOL_SIZE

    data = encode("bench", VALUE)
    figures: list[Figure] = []
    async with open_mesh(postgres_mesh_url(schema)) as mesh:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            postgres_mesh_url(schema).split("?", 1)[0],
            max_size=DEFAULT_POOL_SIZE,
            kwargs={"autocommit": True, "options": f"-c search_path={schema}"},
            open=False,
        )
        await pool.open()
        try:

            def floor(tasks: int) -> Measure:
                versions = [0] * tasks

                async def cas(task: int) -> None:
                    async with pool.connection() as conn:
                        await conn.execute(_UPDATE, (data, False, f"floor/{task}", versions[task]))
                    versions[task] += 1

                async def measure(seconds: float) -> float:
                    for task in range(tasks):
                        versions[task] = (await mesh.put(f"floor/{task}", VALUE)).version
                    return await rate(cas, seconds, tasks=tasks)

                return measure

            for metric, tasks in (
                ("postgres_cas_sequential", 1),
                ("postgres_cas_concurrent", TASKS),
            ):
                value, base = await best_of([await mesh_cas(mesh, tasks), floor(tasks)], seconds)
                note = f"bare autocommit UPDATE, {tasks} task{'s' if tasks > 1 else ''}"
                figures.append(Figure(BENCH, metric, value, UNIT, base, 0.5, note))
        finally:
            await pool.close()
    return figures


# -- SQLite ---------------------------------------------------------------------------


def _read_synchronous(conn: sqlite3.Connection) -> int:
    level: int = conn.execute("PRAGMA synchronous").fetchone()[0]
    return level


async def backend_synchronous(mesh: Mesh) -> int:
    """The ``synchronous`` level the SQLite backend runs with, read from the backend."""
    from plait.mesh import sqlite as backend

    declared = getattr(backend, "SYNCHRONOUS", None)
    if declared is not None:
        return {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}.get(str(declared).upper(), 1)
    level: int = await mesh._write(_read_synchronous)  # type: ignore[attr-defined]
    return level


class SqliteFloor:
    """A bare sqlite3 CAS on one key of a WAL file, committed per write."""

    def __init__(self, path: Path, synchronous: int) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.conn.execute(
            "CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, version INTEGER NOT NULL)"
        )
        self.data = encode("floor", VALUE)
        self.conn.execute("INSERT INTO kv VALUES ('floor', ?, 1)", (self.data,))
        self.conn.commit()
        self.version = 1

    def cas(self) -> None:
        if self.conn.execute(_UPDATE, (self.data, "floor", self.version)).rowcount != 1:
            raise RuntimeError("the floor's CAS missed")
        self.conn.commit()
        self.version += 1

    def close(self) -> None:
        self.conn.close()


async def sqlite_figures(seconds: float, tmp: Path) -> list[Figure]:
    async with open_mesh(f"sqlite:///{tmp / 'mesh.db'}") as mesh:
        floor = SqliteFloor(tmp / "floor.db", await backend_synchronous(mesh))
        try:

            async def threaded(task: int) -> None:
                await asyncio.to_thread(floor.cas)

            async def direct(seconds: float) -> float:
                return rate_sync(floor.cas, seconds)

            sequential, to_thread = await best_of(
                [await mesh_cas(mesh, 1), lambda seconds: rate(threaded, seconds)], seconds
            )
            concurrent, on_thread = await best_of([await mesh_cas(mesh, TASKS), direct], seconds)
        finally:
            floor.close()
    return [
        Figure(BENCH, "sqlite_cas_sequential", sequential, UNIT, to_thread, 0.8,
               "bare UPDATE+commit in to_thread"),
        Figure(BENCH, "sqlite_cas_concurrent", concurrent, UNIT, on_thread, 1.0,
               "bare UPDATE+commit, one thread"),
    ]  # fmt: skip


# -- memory ---------------------------------------------------------------------------


async def memory_figures(seconds: float) -> list[Figure]:
    async with open_mesh("memory://") as mesh:
        (value,) = await best_of([await mesh_cas(mesh, 1)], seconds)
    return [Figure(BENCH, "memory_cas_sequential", value, UNIT, MEMORY_FLOOR, 1.0, "fixed")]


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else BENCH, argv)
    figures: list[Figure] = []
    wanted = {args.backend} if args.backend else {"redis", "postgres", "sqlite", "memory"}
    if "redis" in wanted:
        figures += await redis_figures(args.seconds)
    if "postgres" in wanted:
        figures += await postgres_figures(args.seconds)
    if "sqlite" in wanted:
        with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
            figures += await sqlite_figures(args.seconds, Path(tmp))
    if "memory" in wanted:
        figures += await memory_figures(args.seconds)
    report(figures, as_json=args.json, title="mesh CAS writes per second")


if __name__ == "__main__":
    asyncio.run(main())
