"""Concurrent loads of one key share one read: graphs and profiles of runs activating."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from plait.decisions import DecisionAsker
from plait.errors import GraphError
from plait.graphs import engine
from plait.graphs.compiled import compile_graph
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Entry
from plait.mesh.memory import MemoryMesh
from plait.profiles import AgentProfile, put_profile
from plait.runs.env import RunEnvironment
from plait.runs.record import RunRecord
from plait.runs.shared_loads import SharedLoads
from plait.runs.store import RunStore
from plait.tools import ToolRegistry

pytestmark = pytest.mark.anyio

GRAPH = {
    "name": "g",
    "entry": "a",
    "nodes": [{"id": "a", "type": "agent", "prompt": "go", "agent": "helper"}],
}


class CountedMesh(MemoryMesh):
    """A memory mesh that counts its reads by key."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()

    async def get(self, key: str) -> Entry | None:
        self.reads[key] += 1
        await asyncio.sleep(0)  # a read takes a loop turn, as on a real backend
        return await super().get(key)


async def test_one_load_answers_every_caller_while_it_runs() -> None:
    loads = SharedLoads[str, int]()
    calls = 0
    release = asyncio.Event()

    async def slow() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return calls

    first = asyncio.ensure_future(loads.load("k", slow))
    others = [asyncio.ensure_future(loads.load("k", slow)) for _ in range(5)]
    await asyncio.sleep(0)
    first.cancel()  # the first caller leaves: the load goes on for the others
    release.set()
    assert await asyncio.gather(*others) == [1] * 5 and calls == 1
    assert await loads.load("k", slow) == 2  # once it ended, the next caller loads again

    async def failing() -> int:
        raise GraphError("gone")

    results = await asyncio.gather(
        *(loads.load("bad", failing) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, GraphError) for r in results)


async def test_runs_activating_at_once_read_their_graph_and_profiles_once() -> None:
    mesh = CountedMesh()
    await put_profile(mesh, AgentProfile(name="helper", tools=[]))
    stored = await import_graph(mesh, load_graph(GRAPH))
    store = RunStore(mesh)
    env = RunEnvironment(
        mesh, store, DecisionAsker(mesh), tools=ToolRegistry(), model=None, cwd=Path.cwd()
    )
    records = []
    for i in range(50):
        graph = compile_graph(stored.spec, sha256=stored.sha256)
        state = engine.start(graph, run_id=f"r{i}", input=None, now=time.time())
        records.append(RunRecord.model_validate(state.model_dump()))
    mesh.reads.clear()
    needed: list[Any] = await asyncio.gather(*(env.needed_tools(rec) for rec in records))
    assert needed == [set()] * 50
    graph_reads = {k: n for k, n in mesh.reads.items() if k.startswith("graphs/")}
    profile_reads = {k: n for k, n in mesh.reads.items() if not k.startswith("graphs/")}
    assert graph_reads and set(graph_reads.values()) == {1}, graph_reads
    assert profile_reads and set(profile_reads.values()) == {1}, profile_reads
