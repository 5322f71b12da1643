"""Fifty runs at once in one process: one runtime and its owner services serve them all."""

from __future__ import annotations

import itertools

import anyio
import pytest

from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import RunRecord, Runs
from tests._support.timing import scaled

from .helpers import agent_chain, commits, hosting, store

pytestmark = pytest.mark.anyio

RUNS = 50
NODES = ["one", "two", "three"]


def model() -> ScriptedModel:
    """Each node's answer names the run's item, so outputs cannot cross between runs."""
    rules = []
    for i in range(RUNS):
        rules += [
            {"node": "one", "match": f"<{i}>", "text": f"one<{i}>"},
            {"node": "two", "match": f"one<{i}>", "text": f"two<{i}>"},
            {"node": "three", "match": f"two<{i}>", "text": f"three<{i}>"},
        ]
    return ScriptedModel(rules)


@pytest.mark.parametrize(
    "mesh_url",
    [
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
async def test_fifty_runs_at_once_all_finish_right(mesh: Mesh) -> None:
    await store(mesh, agent_chain("chain", NODES))
    runs = Runs(mesh)
    done: dict[int, RunRecord] = {}

    async def one(i: int) -> None:
        started = await runs.start("assistant", "chain", f"item <{i}>")
        done[i] = await runs.wait(started.run_id)

    async with hosting(mesh, model()) as (runtime, _):
        with anyio.fail_after(scaled(30)):
            async with anyio.create_task_group() as tg:
                for i in range(RUNS):
                    tg.start_soon(one, i)
        await runtime.wait_idle()
        assert runtime.active_tasks == 0

    assert sorted(done) == list(range(RUNS))
    assert len({rec.run_id for rec in done.values()}) == RUNS
    for i, rec in done.items():
        assert rec.status == "done", (i, rec.error)
        assert await runs.output(rec) == f"three<{i}>"
        assert rec.usage.steps == 3 and rec.usage.retries == 0
        steps = await runs.trajectory(rec.run_id)
        assert commits(steps) == [(n, 1) for n in NODES]
        assert steps[0].prompt == f"Begin with item <{i}>"
        assert await runs.verify(rec.run_id) == 5  # started, three commits, done
    listed = await runs.list()
    assert len(listed) == RUNS and {s.status for s in listed} == {"done"}


@pytest.mark.parametrize(
    "mesh_url",
    [
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
async def test_runs_served_together_take_turns_node_by_node(mesh: Mesh) -> None:
    # A run goes on with its next node in-process, with no message between: each
    # transition still gives the loop a turn (its commit's, or a yield of its own on a
    # mesh whose commits do not), so two runs' commits interleave instead of one run
    # finishing before the other begins.
    nodes = [f"n{i}" for i in range(12)]
    await store(mesh, agent_chain("long", nodes))
    runs = Runs(mesh)
    first = await runs.start("assistant", "long", "a")
    second = await runs.start("assistant", "long", "b")
    async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
        with anyio.fail_after(scaled(30)):
            done = [await runs.wait(first.run_id), await runs.wait(second.run_id)]
    assert [rec.status for rec in done] == ["done", "done"]
    order: list[tuple[float, int]] = []
    for run, rec in enumerate(done):
        order += [(step.ended_at or 0.0, run) for step in await runs.trajectory(rec.run_id)]
    order.sort()
    switches = sum(a[1] != b[1] for a, b in itertools.pairwise(order))
    assert switches >= len(nodes), [run for _, run in order]
