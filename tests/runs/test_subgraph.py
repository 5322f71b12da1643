"""A subgraph node in a durable run: its stored child graph runs as a run of its own,
and the node parks until that child run ends."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.decisions import DecisionAnswerer, Human
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.audit import read_events
from plait.runs.record import child_run_id

from .helpers import (
    ASKING_CHILD,
    ASKING_PARENT,
    agent_chain,
    asking_model,
    asking_model_rules,
    hosting,
    settle,
    store,
)

pytestmark = pytest.mark.anyio

ANA = Human("ana")

CHILD = agent_chain("summarise", ["shorten", "polish"])
PARENT = {
    "name": "report",
    "agent": "assistant",
    "entry": "gather",
    "nodes": [
        {"id": "gather", "type": "agent", "prompt": "Gather {{input}}", "next": "child"},
        {"id": "child", "type": "subgraph", "graph": "summarise", "input": "{{gather}}",
         "next": "finish"},
        {"id": "finish", "type": "agent", "prompt": "Finish with {{child}}"},
    ],
}  # fmt: skip


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            {"node": "gather", "text": "raw notes"},
            {"node": "shorten", "match": "raw notes", "text": "short notes"},
            {"node": "polish", "match": "short notes", "text": "polished notes"},
            {"node": "finish", "match": "polished notes", "text": "the report"},
        ]
    )


async def test_a_subgraph_node_runs_its_stored_child(mesh: Mesh) -> None:
    await store(mesh, CHILD)
    await store(mesh, PARENT)
    runs = Runs(mesh)
    async with hosting(mesh, model()):
        rec = await settle(runs, (await runs.start("assistant", "report", "Q3")).run_id)
    assert rec.status == "done", rec.error
    assert await runs.output(rec) == "the report"
    steps = {s.node: s.output for s in await runs.trajectory(rec.run_id)}
    assert steps["child"] == "polished notes"
    # The child is a run of its own, named after its parent's node and visit: listed,
    # inspectable and verifiable like any other.
    child = await runs.get(child_run_id(rec.run_id, "child", 1))
    assert (child.status, child.parent) == ("done", f"{rec.run_id}/child")
    assert [(s.node, s.output) for s in await runs.trajectory(child.run_id)] == [
        ("shorten", "short notes"),
        ("polish", "polished notes"),
    ]
    assert {s.run_id for s in await runs.list()} == {rec.run_id, child.run_id}
    # What the child spent is the subgraph visit's spend: it counts in the parent too.
    assert child.usage.input_tokens > 0
    spent = {s.node: s.usage for s in await runs.trajectory(rec.run_id)}
    assert spent["child"].input_tokens == child.usage.input_tokens
    assert spent["child"].output_tokens == child.usage.output_tokens
    assert rec.usage.input_tokens == sum(u.input_tokens for u in spent.values())
    assert await runs.verify(child.run_id) == 4
    resumed = [e for e in await read_events(mesh, rec.run_id) if e.type == "run.resumed"]
    assert [(e.node, e.detail["child"], e.detail["status"]) for e in resumed] == [
        ("child", child.run_id, "done")
    ]
    await runs.verify(rec.run_id)


async def test_a_person_asked_inside_a_subgraph_is_answered_through_the_parent(
    mesh: Mesh,
) -> None:
    await store(mesh, ASKING_CHILD)
    await store(mesh, ASKING_PARENT)
    runs = Runs(mesh)
    async with hosting(mesh, asking_model()) as (runtime, _):
        parent = await settle(runs, (await runs.start("assistant", "release", "v2")).run_id)
        # The parent parks on its child; the child parks on its person. Neither holds
        # a task, and the question is the child's, reached through the parent.
        assert parent.status == "waiting_child"
        assert parent.waiting is not None and parent.waiting.kind == "subgraph"
        child_id = child_run_id(parent.run_id, "child", 1)
        assert parent.waiting.child == child_id
        asking = await runs.asks(parent)
        assert asking is not None
        asker, question = asking
        assert asker.run_id == child_id and asker.status == "waiting_human"
        assert (question.node, question.ask) == ("approve", "Ship v2 notes?")
        await runtime.wait_idle()
        assert runtime.active_tasks == 0

        answered = await runs.resume(parent.run_id, "yes", by=ANA)
        assert answered.run_id == child_id
        done = await settle(runs, parent.run_id, since=answered)
    assert done.status == "done", done.error
    assert await runs.output(done) == "announced"
    child = await runs.get(child_id)
    assert child.status == "done" and await runs.output(child) == "shipped v2"
    assert await runs.verify(parent.run_id) and await runs.verify(child_id)


async def test_cancelling_the_parent_cancels_its_child_and_withdraws_the_question(
    mesh: Mesh,
) -> None:
    await store(mesh, ASKING_CHILD)
    await store(mesh, ASKING_PARENT)
    runs = Runs(mesh)
    async with hosting(mesh, asking_model()):
        parent = await settle(runs, (await runs.start("assistant", "release", "v2")).run_id)
        asking = await runs.asks(parent)
        assert asking is not None
        await runs.cancel(parent.run_id, by=ANA)
    child = await runs.get(child_run_id(parent.run_id, "child", 1))
    assert (await runs.get(parent.run_id)).status == "cancelled"
    assert child.status == "cancelled"
    assert asking[1].decision_id is not None
    decision = await DecisionAnswerer(mesh).get(asking[1].decision_id)
    assert decision.status == "cancelled"


async def test_a_failed_child_fails_the_subgraph_node_and_says_which_run(mesh: Mesh) -> None:
    await store(mesh, CHILD)
    await store(mesh, PARENT)
    runs = Runs(mesh)
    no_polish = ScriptedModel(
        [
            {"node": "gather", "text": "raw notes"},
            {"node": "shorten", "text": "short notes"},
        ]
    )
    async with hosting(mesh, no_polish):
        rec = await settle(runs, (await runs.start("assistant", "report", "Q3")).run_id)
    child_id = child_run_id(rec.run_id, "child", 1)
    assert (await runs.get(child_id)).status == "failed"
    assert rec.status == "failed"
    assert rec.error is not None and child_id in rec.error and "summarise" in rec.error


async def test_a_missing_child_version_fails_the_run_clearly(mesh: Mesh) -> None:
    await store(mesh, CHILD)
    pinned = [{**n, "version": 9} if n["id"] == "child" else n for n in PARENT["nodes"]]
    await store(mesh, {**PARENT, "name": "report-pinned", "nodes": pinned})
    runs = Runs(mesh)
    async with hosting(mesh, model()):
        rec = await settle(runs, (await runs.start("assistant", "report-pinned", "Q3")).run_id)
    assert rec.status == "failed"
    assert rec.error is not None and "summarise" in rec.error and "9" in rec.error


def test_the_cli_shows_and_answers_the_childs_question(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    script = tmp_path / "model.json"
    script.write_text(json.dumps({"rules": asking_model_rules()}))

    async def stored() -> None:
        async with open_mesh(url) as mesh:
            await store(mesh, ASKING_CHILD)
            await store(mesh, ASKING_PARENT)

    anyio.run(stored)
    cli, env = CliRunner(), {"PLAIT_MESH": url, "PLAIT_USER": "ana"}
    model = f"scripted:{script}"
    started = cli.invoke(
        app, ["graph", "run", "assistant", "release", "--input", "v2", "--model", model, "--json"],
        env=env,
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    parked = json.loads(started.stdout)
    assert parked["status"] == "waiting_child"
    assert parked["waiting"]["node"] == "approve"
    assert parked["waiting"]["ask"] == "Ship v2 notes?"
    assert parked["waiting"]["decision_id"]
    resumed = cli.invoke(app, ["graph", "resume", parked["run_id"], "yes", "--json"], env=env)
    assert resumed.exit_code == 0, resumed.output
    finished = json.loads(resumed.stdout)
    assert (finished["status"], finished["output"]) == ("done", "announced")

    shown = cli.invoke(
        app, ["graph", "run", "assistant", "release", "--input", "v2", "--model", model],
        env={**env, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    parent = next(line.split()[1] for line in shown.stdout.splitlines() if line.startswith("run "))
    child = child_run_id(parent, "child", 1)
    assert f"waiting on approve in subgraph run {child}: Ship v2 notes?" in shown.stdout
    assert f"answer with: plait graph resume {parent} ANSWER" in shown.stdout
