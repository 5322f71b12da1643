"""The ``program`` node kind: validated at import, run in-session and durably."""

from __future__ import annotations

from typing import Any

import pytest

from plait.decisions import Human
from plait.graphs import load_graph, run_graph, validate_graph
from plait.graphs.nodes.program import program_problems
from plait.mesh import Mesh
from plait.programs import promote, save_program
from plait.runs import Runs
from tests.runs.helpers import commits, hosting, settle, store

from . import sample_programs

pytestmark = pytest.mark.anyio


def graph(ref: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "greeting",
        "agent": "assistant",
        "entry": "greet",
        "nodes": [
            {
                "id": "greet",
                "type": "program",
                "ref": ref,
                "input": {"name": "{{input}}"},
                "next": "twice",
                **extra,
            },
            {
                "id": "twice",
                "type": "program",
                "ref": f"{sample_programs.__name__}:run_nested",
                "input": {"ref": "sample-greet", "input": {"name": "{{greet.text}}", "times": 2}},
            },
        ],
    }


async def test_a_program_node_runs_in_session() -> None:
    run = await run_graph(graph("sample-greet"), "ana")
    assert run.status == "done", run.error
    assert run.output == {"text": "hello hello ana hello hello ana"}


async def test_a_bad_import_path_is_a_validation_problem() -> None:
    report = validate_graph(graph(f"{sample_programs.__name__}:missing"))
    assert any("nodes[0].ref" in p.path and "has no missing" in str(p) for p in report.problems)


async def test_a_saved_program_must_exist_and_be_promoted_at_import(mesh: Mesh) -> None:
    spec = load_graph(graph("shout"))
    [missing] = await program_problems(mesh, iter(spec.nodes))
    assert "no saved program 'shout'" in missing
    await save_program(mesh, "shout", "return {'text': payload.name.upper()}")
    [unpromoted] = await program_problems(mesh, iter(spec.nodes))
    assert "plait programs promote shout --version 1" in unpromoted
    await promote(mesh, "shout", 1, by=Human("ana"))
    assert await program_problems(mesh, iter(spec.nodes)) == []
    run = await run_graph(spec, "ana", mesh=mesh)
    assert run.output == {"text": "hello ANA hello ANA"}


async def test_a_program_node_runs_durably_with_the_same_trajectory(mesh: Mesh) -> None:
    spec = graph("sample-greet")
    in_session = await run_graph(spec, "bo")
    await store(mesh, spec)
    async with hosting(mesh):
        runs = Runs(mesh)
        rec = await runs.start("assistant", "greeting", input="bo")
        done = await settle(runs, rec.run_id)
        assert done.status == "done", done.error
        assert await runs.output(done) == in_session.output
        durable = await runs.trajectory(rec.run_id)
    assert commits(durable) == commits(in_session.trajectory)


async def test_a_saved_program_runs_durably(mesh: Mesh) -> None:
    """A durable run's program nodes read saved programs from the run's mesh."""
    await save_program(mesh, "shout", "return {'text': payload.name.upper()}")
    await promote(mesh, "shout", 1, by=Human("ana"))
    await store(mesh, graph("shout"))
    async with hosting(mesh):
        runs = Runs(mesh)
        rec = await runs.start("assistant", "greeting", input="ana")
        done = await settle(runs, rec.run_id)
        assert done.status == "done", done.error
        assert await runs.output(done) == {"text": "hello ANA hello ANA"}
