"""PlaitSaver against LangGraph's AsyncSqliteSaver on a SQLite file, and against its
AsyncPostgresSaver on PostgreSQL.

Figures:

- ``graph_10_steps_sqlite``: runs per second of a 10-node chain (``durability="sync"``:
  each step's checkpoint is written before the next step), one thread at a time, on a
  fresh thread each run; PlaitSaver on a SQLite mesh against ``AsyncSqliteSaver``
  (``langgraph-checkpoint-sqlite``), slices interleaved.
- ``graph_10_steps_sqlite_200``: the same, 200 threads at once in one event loop.
- ``get_tuple_latest_3000``: the cost of ``aget_tuple`` of a thread's latest checkpoint
  when the thread holds 3,000 checkpoints (less is better; ratio = baseline / value).
- ``list_10_of_3000``: the cost of ``alist(limit=10)`` on that thread (the ten newest).
- ``graph_10_steps_postgres``, ``graph_10_steps_postgres_50`` (50 threads at once),
  ``get_tuple_latest_3000_postgres`` and ``list_10_of_3000_postgres``: the same on
  PostgreSQL (``PLAIT_BENCH_POSTGRES``, a fresh schema dropped afterwards), PlaitSaver
  on a PostgreSQL mesh against ``AsyncPostgresSaver`` (``langgraph-checkpoint-postgres``),
  each with a pool of four connections.

The SQLite mesh runs WAL with ``synchronous=NORMAL``; the AsyncSqliteSaver connection is
set to the same. ``--backend sqlite`` or ``--backend postgres`` measures one of the two.
"""

from __future__ import annotations

import asyncio
import operator
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _common import (
    POSTGRES_URL,
    Cost,
    Figure,
    best_of,
    parse_args,
    postgres_mesh_url,
    postgres_scratch,
    report,
)
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from plait.langgraph import PlaitSaver
from plait.mesh import open_mesh

BENCH = "langgraph_saver"
STEPS = 10
CHECKPOINTS = 3_000


class ChainState(TypedDict):
    """What the chain's nodes add to."""

    trail: Annotated[list[int], operator.add]


def _chain() -> StateGraph[ChainState]:
    graph = StateGraph(ChainState)
    for i in range(STEPS):

        def step(state: ChainState, i: int = i) -> dict[str, Any]:
            return {"trail": [i]}

        graph.add_node(f"s{i}", step)
        graph.add_edge(START if i == 0 else f"s{i - 1}", f"s{i}")
    graph.add_edge(f"s{STEPS - 1}", END)
    return graph


def _runs_per_second(saver: BaseCheckpointSaver[Any], at_once: int = 1) -> Any:
    graph = _chain().compile(checkpointer=saver)

    async def one() -> None:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        out = await graph.ainvoke({"trail": []}, config, durability="sync")
        assert len(out["trail"]) == STEPS

    async def measure(seconds: float) -> float:
        n = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            await asyncio.gather(*(one() for _ in range(at_once)))
            n += at_once
        return n / (time.perf_counter() - started)

    return measure


async def _fill(saver: BaseCheckpointSaver[Any], thread: str) -> None:
    parent: str | None = None
    for _ in range(CHECKPOINTS):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=-1))
        checkpoint["channel_values"] = {"trail": list(range(STEPS))}
        configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
        if parent:
            configurable["checkpoint_id"] = parent
        await saver.aput({"configurable": configurable}, checkpoint, {"step": 1}, {})
        parent = checkpoint["id"]


def _latest_per_second(saver: BaseCheckpointSaver[Any], thread: str) -> Any:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

    async def measure(seconds: float) -> float:
        n = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            assert await saver.aget_tuple(config) is not None
            n += 1
        return n / (time.perf_counter() - started)

    return measure


async def _sqlite(seconds: float) -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            open_mesh(f"sqlite:///{Path(tmp) / 'mesh.db'}") as mesh,
            AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "lg.db")) as theirs,
        ):
            await theirs.setup()
            await theirs.conn.execute("PRAGMA journal_mode=WAL")
            await theirs.conn.execute("PRAGMA synchronous=NORMAL")
            ours = PlaitSaver(mesh)
            runs = await best_of(
                [_runs_per_second(ours), _runs_per_second(theirs)], seconds * 4, rounds=10
            )
            many = await best_of(
                [_runs_per_second(ours, 200), _runs_per_second(theirs, 200)],
                seconds * 4,
                rounds=2,
            )
            await _fill(ours, "long")
            await _fill(theirs, "long")
            latest = await best_of(
                [_latest_per_second(ours, "long"), _latest_per_second(theirs, "long")],
                seconds,
            )
            listing = await best_of(
                [_list_per_second(ours, "long"), _list_per_second(theirs, "long")], seconds
            )
    return [
        Figure(BENCH, "graph_10_steps_sqlite", runs[0], "runs/s", runs[1], 1.0,
               "AsyncSqliteSaver, same graph"),
        Figure(BENCH, "graph_10_steps_sqlite_200", many[0], "runs/s", many[1], 1.0,
               "AsyncSqliteSaver, 200 threads at once"),
        Cost(BENCH, "get_tuple_latest_3000", 1e6 / latest[0], "us", 1e6 / latest[1], 1.0,
             "AsyncSqliteSaver aget_tuple"),
        Cost(BENCH, "list_10_of_3000", 1e6 / listing[0], "us", 1e6 / listing[1], 1.0,
             "AsyncSqliteSaver alist(limit=10)"),
    ]  # fmt: skip


async def _postgres(seconds: float) -> list[Figure]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    async with postgres_scratch() as schema:
        if schema is None:
            return []
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            POSTGRES_URL,
            min_size=4,
            max_size=4,
            open=False,
            kwargs={
                "autocommit": True,
                "prepare_threshold": 0,
                "row_factory": dict_row,
                "options": f"-c search_path={schema}",
            },
        )
        await pool.open()
        try:
            async with pool.connection() as conn:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            theirs = AsyncPostgresSaver(pool)
            await theirs.setup()
            async with open_mesh(f"{postgres_mesh_url(schema)}&pool=4") as mesh:
                ours = PlaitSaver(mesh)
                runs = await best_of(
                    [_runs_per_second(ours), _runs_per_second(theirs)], seconds * 4, rounds=10
                )
                many = await best_of(
                    [_runs_per_second(ours, 50), _runs_per_second(theirs, 50)],
                    seconds * 4,
                    rounds=2,
                )
                await _fill(ours, "long")
                await _fill(theirs, "long")
                latest = await best_of(
                    [_latest_per_second(ours, "long"), _latest_per_second(theirs, "long")],
                    seconds,
                )
                listing = await best_of(
                    [_list_per_second(ours, "long"), _list_per_second(theirs, "long")], seconds
                )
        finally:
            await pool.close()
    return [
        Figure(BENCH, "graph_10_steps_postgres", runs[0], "runs/s", runs[1], 1.0,
               "AsyncPostgresSaver, same graph"),
        Figure(BENCH, "graph_10_steps_postgres_50", many[0], "runs/s", many[1], 1.0,
               "AsyncPostgresSaver, 50 threads at once"),
        Cost(BENCH, "get_tuple_latest_3000_postgres", 1e6 / latest[0], "us",
             1e6 / latest[1], 1.0, "AsyncPostgresSaver aget_tuple"),
        Cost(BENCH, "list_10_of_3000_postgres", 1e6 / listing[0], "us", 1e6 / listing[1], 1.0,
             "AsyncPostgresSaver alist(limit=10)"),
    ]  # fmt: skip


def _list_per_second(saver: BaseCheckpointSaver[Any], thread: str) -> Any:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

    async def measure(seconds: float) -> float:
        n = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            assert len([t async for t in saver.alist(config, limit=10)]) == 10
            n += 1
        return n / (time.perf_counter() - started)

    return measure


async def main(argv: list[str] | None = None) -> list[Figure]:
    """Measure and print the figures."""
    args = parse_args(__doc__ or "", argv)
    figures: list[Figure] = []
    if args.backend in (None, "sqlite"):
        figures += await _sqlite(args.seconds)
    if args.backend in (None, "postgres"):
        figures += await _postgres(args.seconds)
    report(figures, as_json=args.json, title="PlaitSaver vs LangGraph's own savers")
    return figures


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(main()) else 1)
