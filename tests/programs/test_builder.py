"""The Python graph builder: the same spec as a file, run in-session and durably."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

import plait
from plait.decisions import Human
from plait.errors import GraphValidationError
from plait.graphs import load_graph
from plait.graphs.store import import_graph
from plait.ids import RunId, new_id
from plait.mesh import Mesh, open_mesh
from plait.runs import Runs
from tests._support.timing import scaled
from tests.runs.helpers import EXAMPLES, Cli, commits, hosting, settle

from . import builder_graphs
from .builder_graphs import CALLS, HELD, release

pytestmark = pytest.mark.anyio


def test_a_python_graph_compiles_to_the_spec_its_file_gives() -> None:
    g = plait.Graph("research-and-verify", agent="assistant")
    g.agent("draft", "Write about {{input}}. Earlier critique: {{verify?}}", next="verify")
    g.verifier(
        "verify",
        "Review for unsourced claims:\n\n{{draft}}",
        verdicts={"pass": "review_human", "fail": "draft"},
    )
    g.human("review_human", "Approve publishing this?\n\n{{draft}}", next="publish")
    g.agent("publish", "Format as final output:\n\n{{draft}}\n\nHuman decision: {{review_human}}")
    from_file = load_graph(str(EXAMPLES / "research_and_verify.json"))
    assert g.compile().sha256() == from_file.sha256()


def test_function_nodes_are_program_nodes_named_by_import_path() -> None:
    spec = release.compile(durable=True)
    fetch = spec.node("fetch")
    assert fetch.type == "program"
    assert fetch.model_dump()["ref"] == f"{builder_graphs.__name__}:fetch"
    route = spec.node("check_route").model_dump()
    assert route["verdicts"] == {"approve": "approve", "fix": "fix"}
    assert spec.node("check").next == "check_route"
    assert spec.node("check").model_dump()["input"] == {
        "input": "{{input}}",
        "fetch": "{{fetch}}",
        "fix": "{{fix?}}",
    }


def test_every_problem_is_reported_at_once() -> None:
    g = plait.Graph("broken")

    @g.node(next="nowhere")
    async def first(input: str, missing_node: str) -> str:
        return input

    def sync_node(first: str) -> str:
        return first

    g.node(sync_node)  # type: ignore[type-var]
    g.route(sync_node, lambda first: "first")  # no targets declared
    g.human("ask", "ok?", options=[])
    with pytest.raises(GraphValidationError) as caught:
        g.compile(durable=True)
    text = "\n".join(caught.value.problems)
    assert "nodes[0].next" in text and '"nowhere"' in text
    assert "asks for 'missing_node'" in text
    assert "sync_node must be an async def" in text
    assert "say where it may lead" in text
    assert "nodes[3].options" in text
    assert "cannot be imported by another process" in text  # functions local to this test
    assert len(caught.value.problems) >= 6


async def test_in_session_the_graph_loops_parks_and_resumes(mesh: Mesh) -> None:
    key = f"in-session-{new_id()}-small"
    run = await release.run(key, mesh=mesh)
    assert run.status == "waiting_human", run.error
    assert run.waiting is not None and run.waiting.ask == f"Release {key} with 3 files?"
    run = await release.resume(run, "yes")
    assert run.status == "done", run.error
    assert run.output == {"version": key, "approved": "yes"}
    steps = [(s.node, s.verdict) for s in run.trajectory]
    assert steps == [
        ("fetch", None),
        ("check", None),
        ("check_route", "fix"),
        ("fix", None),
        ("check", None),
        ("check_route", "approve"),
        ("approve", None),
        ("ship", None),
    ]
    assert CALLS[key] == ["fetch", "check", "fix", "check", "ship"]


async def test_durably_parked_at_the_human_node_across_a_restart(mesh: Mesh) -> None:
    key = f"durable-{new_id()}-small"
    in_session = await release.run(f"peer-{new_id()}-small", mesh=mesh)
    in_session = await release.resume(in_session, "yes")
    await import_graph(mesh, release.compile(durable=True))
    runs = Runs(mesh)
    async with hosting(mesh):
        rec = await runs.start("assistant", "py-release", input=key)
        parked = await settle(runs, rec.run_id)
        assert parked.status == "waiting_human", parked.error
    ran_before = list(CALLS[key])
    async with hosting(mesh):  # a fresh host: nothing of the first one survives but the mesh
        await runs.resume(rec.run_id, "yes", by=Human("ana"))
        done = await settle(runs, rec.run_id, since=parked)
        assert done.status == "done", done.error
        assert await runs.output(done) == {"version": key, "approved": "yes"}
        durable = await runs.trajectory(rec.run_id)
    assert ran_before == ["fetch", "check", "fix", "check"]
    assert CALLS[key] == [*ran_before, "ship"]  # the passed nodes did not run again
    assert commits(durable) == commits(in_session.trajectory)
    assert [s.verdict for s in durable] == [s.verdict for s in in_session.trajectory]


def _fresh_attempt(calls: list[str], seen: int) -> bool:
    """A node entered since ``seen`` calls on a fresh attempt (so it waits, held)."""
    return len(calls) > seen and (len(calls) == 1 or calls[-1] != calls[-2])


async def test_a_restart_between_each_pair_of_nodes(mesh: Mesh) -> None:
    """Every function node is cut off at its start by a host stopping, then run on the
    next host: each commits once, and the trajectory is the in-session one."""
    key = f"held-{new_id()}-small"
    HELD.add(key)
    in_session = await release.resume(await release.run(f"peer-{key}", mesh=mesh), "yes")
    await import_graph(mesh, release.compile(durable=True))
    runs = Runs(mesh)
    run_id: RunId | None = None
    hosts = 0
    answered = False
    with anyio.fail_after(scaled(60)):
        while True:
            seen = len(CALLS.get(key, []))
            async with hosting(mesh, drain_timeout_s=0.01):
                hosts += 1
                if run_id is None:
                    run_id = (await runs.start("assistant", "py-release", input=key)).run_id
                while not _fresh_attempt(CALLS.get(key, []), seen):  # until a node waits
                    rec = await runs.get(run_id)
                    if rec.status in ("done", "failed", "cancelled"):
                        break
                    if rec.status == "waiting_human" and not answered:
                        await runs.resume(run_id, "yes", by=Human("ana"))
                        answered = True
                    await anyio.sleep(0.02)
            rec = await runs.get(run_id)
            if rec.status in ("done", "failed", "cancelled"):
                break
    assert rec.status == "done", rec.error
    assert CALLS[key] == [n for n in ["fetch", "check", "fix", "check", "ship"] for _ in (1, 2)]
    assert hosts == 6  # one per function node visit, and the last finishing the run
    durable = await runs.trajectory(run_id)
    assert commits(durable) == commits(in_session.trajectory)
    assert await runs.output(rec) == {"version": key, "approved": "yes"}


async def test_a_node_input_that_breaks_its_model_fails_the_run_naming_it() -> None:
    g = plait.Graph("typed")

    @g.node(next="use")
    async def make(input: str) -> dict[str, str]:
        return {"version": input}  # no "files": Fetched needs one

    @g.node
    async def use(make: builder_graphs.Fetched) -> int:
        return make.files

    run = await g.run("v1")
    assert run.status == "failed"
    assert run.error is not None and "make does not fit Fetched" in run.error
    assert "files" in run.error
    assert [s.node for s in run.trajectory] == ["make", "use"]


GRAPH_MODULE = """
from typing import Any, Literal
import plait

graph = plait.Graph("tiny")

@graph.node(next="ask")
async def measure(input: str) -> dict[str, Any]:
    return {"length": len(input)}

graph.human("ask", "Keep {{measure.length}}?", next="keep")

@graph.node
async def keep(measure: dict[str, Any], ask: str) -> str:
    return f"kept {measure['length']} ({ask})"
"""


def test_cli_imports_a_python_graph_and_runs_it_durably(tmp_path: Path) -> None:
    (tmp_path / "tiny_graphs.py").write_text(GRAPH_MODULE)
    (tmp_path / "none.model.yaml").write_text("rules: []\n")  # no node calls a model
    cli = Cli(tmp_path)
    cli.env["PLAIT_MODEL"] = "scripted:none.model.yaml"
    checked = cli("graph", "validate", "tiny_graphs:graph")
    assert "tiny_graphs:graph: ok (assistant/tiny version 1)" in checked.stdout
    imported = cli("graph", "import", "tiny_graphs:graph")
    assert "imported assistant/tiny version 1" in imported.stdout
    bad = cli("graph", "import", "tiny_graphs:nothing", ok=False)
    assert "tiny_graphs.nothing is nothing, not a plait.Graph" in bad.stderr
    shown = cli.json("graph", "show", "assistant", "tiny")
    assert "tiny_graphs:measure" in json.dumps(shown)
    started = cli.json("graph", "run", "assistant", "tiny", "--input", "hello")
    assert started["status"] == "waiting_human", started
    resumed = cli.json("graph", "resume", started["run_id"], "yes")
    assert resumed["status"] == "done", resumed
    assert resumed["output"] == "kept 5 (yes)"


async def test_the_stored_version_is_pinned_by_its_sha256(tmp_path: Path) -> None:
    async with open_mesh(f"sqlite:///{tmp_path / 'm.db'}") as mesh:
        first = await import_graph(mesh, release.compile(durable=True))
        again = await import_graph(mesh, release.compile(durable=True))
    assert first.sha256 == again.sha256 == release.compile().sha256()
    assert json.loads(release.compile().canonical_json())["name"] == "py-release"
