"""Deleting finished runs: everything they stored goes, runs not over stay untouched."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.cli.runs import parse_age
from plait.decisions import DecisionAnswerer, Human
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.record import child_run_id, record_key

from .helpers import (
    ASKING_CHILD,
    ASKING_PARENT,
    EXAMPLES,
    agent_chain,
    asking_model,
    hosting,
    settle,
    store,
)

pytestmark = pytest.mark.anyio

GRAPH = EXAMPLES / "research_and_verify.json"
SCRIPT = EXAMPLES / "research_and_verify.model.yaml"
ANA = Human("ana")


async def stored_keys(mesh: Mesh, run_id: str) -> list[str]:
    keys = [e.key async for e in mesh.scan(record_key(run_id))]
    keys += [e.key async for e in mesh.scan("runindex/") if e.key.endswith(run_id)]
    keys += [e.key async for e in mesh.scan("actors/") if e.key.endswith(run_id)]
    return keys


async def decisions_of(mesh: Mesh, run_id: str) -> list[str]:
    return [d.id for d in await DecisionAnswerer(mesh).list() if d.run_id == run_id]


async def test_prune_deletes_what_finished_runs_stored_and_nothing_else(mesh: Mesh) -> None:
    await store(mesh, GRAPH)
    await store(mesh, agent_chain("pair", ["one", "two"]))
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
        cancelled = await settle(
            runs, (await runs.start("assistant", "research-and-verify", "a")).run_id
        )
        await runs.cancel(cancelled.run_id, by=ANA)
        waiting = await settle(
            runs, (await runs.start("assistant", "research-and-verify", "b")).run_id
        )
    async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
        done = await settle(runs, (await runs.start("assistant", "pair", "c")).run_id)
    assert (done.status, waiting.status) == ("done", "waiting_human")
    assert await decisions_of(mesh, cancelled.run_id)  # it had asked a person
    assert len(await stored_keys(mesh, done.run_id)) > 5

    assert await runs.prune(ended_before=done.updated_at - 3600) == []
    would = await runs.prune(ended_before=time.time() + 1, dry_run=True)
    assert {s.run_id for s in would} == {done.run_id, cancelled.run_id}
    assert len(await stored_keys(mesh, done.run_id)) > 5  # a dry run deletes nothing

    pruned = await runs.prune(ended_before=time.time() + 1)
    assert {s.run_id for s in pruned} == {done.run_id, cancelled.run_id}
    for gone in (done.run_id, cancelled.run_id):
        assert await stored_keys(mesh, gone) == []
        assert await decisions_of(mesh, gone) == []
    assert [s.run_id for s in await runs.list()] == [waiting.run_id]

    # The run still waiting is whole: answered, it finishes and its chain verifies.
    async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
        await runs.resume(waiting.run_id, "yes", by=ANA)
        finished = await settle(runs, waiting.run_id, since=waiting)
    assert finished.status == "done"
    assert await runs.verify(waiting.run_id) > 0


def test_prune_cli(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"

    async def one_run() -> str:
        async with open_mesh(url) as mesh:
            await store(mesh, agent_chain("pair", ["one", "two"]))
            runs = Runs(mesh)
            async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
                return (
                    await settle(runs, (await runs.start("assistant", "pair", "x")).run_id)
                ).run_id

    run_id = anyio.run(one_run)
    cli, env = CliRunner(), {"PLAIT_MESH": url}
    kept = cli.invoke(app, ["graph", "prune", "--older-than", "1h", "--json"], env=env)
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.stdout) == []
    dry = cli.invoke(app, ["graph", "prune", "--older-than", "0s", "--dry-run"], env=env)
    assert dry.exit_code == 0 and "would delete 1 finished run(s)" in dry.output
    assert run_id in dry.output
    done = cli.invoke(app, ["graph", "prune", "--older-than", "0s", "--json"], env=env)
    assert [r["run_id"] for r in json.loads(done.stdout)] == [run_id]
    listed = cli.invoke(app, ["graph", "runs", "--json"], env=env)
    assert json.loads(listed.stdout) == []
    bad = cli.invoke(app, ["graph", "prune", "--older-than", "soon"], env=env)
    assert bad.exit_code == 2 and "not an age" in bad.output


def test_ages() -> None:
    assert [parse_age(a) for a in ("90s", "45m", "12h", "30d", "2w", "1.5h")] == [
        90,
        2700,
        43_200,
        2_592_000,
        1_209_600,
        5400,
    ]


async def test_prune_keeps_a_finished_child_whose_parent_is_not_over(mesh: Mesh) -> None:
    await store(mesh, ASKING_CHILD)
    await store(mesh, ASKING_PARENT)
    runs = Runs(mesh)
    async with hosting(mesh, asking_model()):
        parent = await settle(runs, (await runs.start("assistant", "release", "v2")).run_id)
    child_id = child_run_id(parent.run_id, "child", 1)
    await runs.cancel(child_id, by=ANA)  # over, but no host has told its parent yet
    assert (await runs.get(parent.run_id)).status == "waiting_child"
    assert await runs.prune(ended_before=time.time() + 1) == []
    assert (await runs.get(child_id)).status == "cancelled"
