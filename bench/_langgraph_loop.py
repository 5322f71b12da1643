"""The LangGraph floor of the runs benchmark: the same three-node loop on SqliteSaver.

``draft -> verify -> (fail: draft | pass: publish) -> END``, where the verifier fails a
fixed number of times, as the scripted model does in the plait run. Every node returns
at once, so the figure is LangGraph's own cost per node: its step loop and one
checkpoint per step written by ``SqliteSaver`` to a WAL file whose ``synchronous`` level
is set to the one the plait SQLite mesh uses. :class:`LangGraphConcurrent` is the same
loop with an ``InMemorySaver`` and async nodes, many runs at once in one event loop;
:class:`LangGraphPostgres` the loop with async nodes on ``AsyncPostgresSaver`` (when
langgraph-checkpoint-postgres is installed).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any, Literal, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

Durability = Literal["sync", "async", "exit"]
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


class LoopState(TypedDict, total=False):
    """The state the three nodes share."""

    input: str
    draft: str
    critique: str
    verdict: str
    drafts: int
    output: str


def loop_graph(draft: Any, verify: Any, publish: Any, state: Any = LoopState) -> StateGraph:
    """The three nodes wired ``draft -> verify -> (fail: draft | pass: publish) -> END``
    over ``state`` (its ``verdict`` routes); the engine bench builds its loop here too."""
    graph = StateGraph(state)
    graph.add_node("draft", draft)
    graph.add_node("verify", verify)
    graph.add_node("publish", publish)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "verify")
    graph.add_conditional_edges(
        "verify", lambda s: s["verdict"], {"pass": "publish", "fail": "draft"}
    )
    graph.add_edge("publish", END)
    return graph


class LangGraphLoop:
    """The loop compiled with a ``SqliteSaver`` on ``path``.

    Args:
        path: the checkpoint database file.
        synchronous: the ``PRAGMA synchronous`` level (0-3) of its connection.
        fails: how many times the verifier says ``fail`` before ``pass``.
    """

    def __init__(self, path: Path, synchronous: int, fails: int) -> None:
        self.fails = fails
        self.nodes = 0
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {int(synchronous)}")
        saver = SqliteSaver(self.conn)
        saver.setup()
        self.app = loop_graph(self._draft, self._verify, self._publish).compile(checkpointer=saver)

    def pragmas(self) -> tuple[str, str]:
        """The connection's journal mode and synchronous level, as SQLite reports them."""
        mode = str(self.conn.execute("PRAGMA journal_mode").fetchone()[0]).upper()
        level = int(self.conn.execute("PRAGMA synchronous").fetchone()[0])
        return mode, SYNCHRONOUS_NAMES.get(level, str(level))

    def _draft(self, state: LoopState) -> dict[str, Any]:
        self.nodes += 1
        drafts = state.get("drafts", 0) + 1
        return {"draft": f"draft {drafts} of {state['input']}", "drafts": drafts}

    def _verify(self, state: LoopState) -> dict[str, Any]:
        self.nodes += 1
        verdict = "pass" if state["drafts"] > self.fails else "fail"
        return {"critique": f"{state['draft']}: {verdict}", "verdict": verdict}

    def _publish(self, state: LoopState) -> dict[str, Any]:
        self.nodes += 1
        return {"output": state["draft"]}

    def run(self, durability: Durability = "sync") -> int:
        """One run on a fresh thread; the number of nodes it executed."""
        before = self.nodes
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 1000}
        state = self.app.invoke({"input": "x"}, config, durability=durability)
        if state.get("output") is None:
            raise RuntimeError("the LangGraph loop ended without publishing")
        return self.nodes - before

    def rate(self, seconds: float, durability: Durability = "sync") -> float:
        """Nodes per second over whole runs, for at least ``seconds`` (one run at least)."""
        nodes = 0
        started = time.perf_counter()
        while True:
            nodes += self.run(durability)
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return nodes / elapsed

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class LangGraphConcurrent:
    """The loop compiled with an ``InMemorySaver``, its nodes async, for runs at once.

    Args:
        fails: how many times the verifier says ``fail`` before ``pass``.
    """

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.nodes = 0
        self.app = loop_graph(self._draft, self._verify, self._publish).compile(
            checkpointer=InMemorySaver()
        )

    async def _draft(self, state: LoopState) -> dict[str, Any]:
        self.nodes += 1
        drafts = state.get("drafts", 0) + 1
        return {"draft": f"draft {drafts} of {state['input']}", "drafts": drafts}

    async def _verify(self, state: LoopState) -> dict[str, Any]:
        self.nodes += 1
        verdict = "pass" if state["drafts"] > self.fails else "fail"
        return {"critique": f"{state['draft']}: {verdict}", "verdict": verdict}

    async def _publish(self, state: LoopState) -> dict[str, Any]:
        self.nodes += 1
        return {"output": state["draft"]}

    async def rate(self, runs: int) -> float:
        """Nodes per second of ``runs`` runs at once in this event loop."""
        before = self.nodes

        async def one() -> None:
            config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
            state = await self.app.ainvoke({"input": "x"}, config)
            if state.get("output") is None:
                raise RuntimeError("the LangGraph loop ended without publishing")

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(runs)))
        return (self.nodes - before) / (time.perf_counter() - started)


class LangGraphPostgres(LangGraphConcurrent):
    """The loop on ``AsyncPostgresSaver`` in schema ``schema`` of the database at
    ``url``, every checkpoint written before the next step (``durability="sync"``).

    Use :meth:`open` before and :meth:`close` after.
    """

    def __init__(self, url: str, schema: str, fails: int) -> None:
        super().__init__(fails)
        self.url = url
        self.schema = schema
        self.conn: Any = None

    async def open(self) -> None:
        """Connect (as LangGraph's docs say: autocommit, dict rows) and set up tables."""
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg import AsyncConnection
        from psycopg.rows import dict_row

        self.conn = await AsyncConnection.connect(
            self.url,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={self.schema}",
        )
        await self.conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
        saver = AsyncPostgresSaver(self.conn)
        await saver.setup()
        self.app = loop_graph(self._draft, self._verify, self._publish).compile(checkpointer=saver)

    async def rate_sync(self, seconds: float) -> float:
        """Nodes per second of one run at a time over whole runs, for ``seconds``."""
        before, started = self.nodes, time.perf_counter()
        while True:
            config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
            await self.app.ainvoke({"input": "x"}, config, durability="sync")
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return (self.nodes - before) / elapsed

    async def close(self) -> None:
        """Drop the schema and close the connection."""
        if self.conn is not None:
            await self.conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
            await self.conn.close()


__all__ = [
    "SYNCHRONOUS_NAMES",
    "Durability",
    "LangGraphConcurrent",
    "LangGraphLoop",
    "LangGraphPostgres",
    "LoopState",
    "loop_graph",
]
