"""DBOS Transact running bench/workflows.py's ten-step workflow, on SQLite."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any


def launch(path: Path) -> Callable[[int, bool], Awaitable[float]]:
    """Launch DBOS on a SQLite file at ``path`` (WAL, ``synchronous=NORMAL``) and return
    a runner: workflows per second of ``count`` workflows, at once or one at a time."""
    from dbos import DBOS

    _tune(path)
    config: Any = {"name": "plait-bench", "system_database_url": f"sqlite:///{path}"}
    DBOS(config=config)

    @DBOS.step()
    async def cheap(i: int) -> int:
        return i

    @DBOS.workflow()
    async def ten() -> int:
        total = 0
        for i in range(10):
            total += await cheap(i)
        return total

    DBOS.launch()

    async def run(count: int, at_once: bool) -> float:
        started = time.perf_counter()
        if at_once:
            await asyncio.gather(*(ten() for _ in range(count)))
        else:
            for _ in range(count):
                await ten()
        return count / (time.perf_counter() - started)

    return run


def _tune(path: Path) -> None:
    """WAL (kept in the file, made before DBOS opens it) and ``synchronous=NORMAL`` on
    every SQLite connection DBOS's engines open: its fastest setting."""
    import sqlite3

    import sqlalchemy
    from sqlalchemy import event

    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()

    @event.listens_for(sqlalchemy.engine.Engine, "connect")
    def normal(dbapi_conn: Any, record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")
