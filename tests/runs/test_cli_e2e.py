"""The seed's research-and-verify run through ``plait`` as real processes, end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.decisions import DecisionAnswerer, Human
from plait.decisions.principals import os_user
from plait.mesh import open_mesh
from plait.models.scripted import ScriptedModel
from plait.runs import AuditEvent, RunRecord, Runs
from plait.runs.audit import read_events

from .helpers import (
    ASKING_CHILD,
    EXAMPLES,
    Cli,
    agent_chain,
    asking_model_rules,
    commits,
    hosting,
    settle,
    store,
)
from .test_crash import record_of, with_mesh

GRAPH = EXAMPLES / "research_and_verify.json"
SCRIPT = EXAMPLES / "research_and_verify.model.yaml"
CRITIQUE = "The 12% figure has no source; cite where it comes from."
SOURCED = "Q3 revenue rose 12% on strong subscription sales (source: Q3 report, p. 4)."


@pytest.mark.slow
def test_research_and_verify_parks_then_another_process_resumes_it(cli: Cli) -> None:
    cli("graph", "import", str(GRAPH))
    model = f"scripted:{SCRIPT}"
    started = cli.json(
        "graph", "run", "assistant", "research-and-verify", "--input", "Q3", "--model", model
    )
    run_id = started["run_id"]
    assert started["status"] == "waiting_human"
    assert started["output"] is None
    waiting = started["waiting"]
    assert waiting["node"] == "review_human"
    assert waiting["ask"] == f"Approve publishing this?\n\n{SOURCED}"
    assert waiting["decision_id"]

    # Another process answers and serves the rest of the run.
    resumed = cli.json("graph", "resume", run_id, "yes, ship it")
    assert resumed["status"] == "done"
    assert resumed["output"] == f"FINAL — {SOURCED}"

    done = cli.json("graph", "inspect", run_id, "--verify")  # exits 0, or cli.json raises
    assert done["status"] == "done" and done["output"] == f"FINAL — {SOURCED}"
    assert done["verified"] is True and done["verify_error"] is None
    steps = done["trajectory"]
    assert commits(steps) == [
        ("draft", 1),
        ("verify", 1),
        ("draft", 2),
        ("verify", 2),
        ("review_human", 1),
        ("publish", 1),
    ]
    assert [s["verdict"] for s in steps] == [None, "fail", None, "pass", None, None]
    assert CRITIQUE not in steps[0]["prompt"]
    assert CRITIQUE in steps[2]["prompt"]  # the second draft saw the critique
    assert steps[2]["output"] == SOURCED
    assert steps[4]["prompt"] == waiting["ask"] and steps[4]["output"] == "yes, ship it"
    assert "Human decision: yes, ship it" in steps[5]["prompt"]


def test_runs_lists_newest_first_and_cancel_stops_a_waiting_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"

    async def park() -> RunRecord:
        async with open_mesh(url) as mesh:
            await store(mesh, GRAPH)
            runs = Runs(mesh)
            async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
                return await settle(
                    runs, (await runs.start("assistant", "research-and-verify", "Q3")).run_id
                )

    parked = anyio.run(park)
    assert parked.status == "waiting_human" and parked.waiting is not None
    cli = CliRunner()
    env = {"PLAIT_USER": "ana", "PLAIT_MESH": url}
    detached = cli.invoke(
        app,
        [
            "graph",
            "run",
            "assistant",
            "research-and-verify",
            "--input",
            "Q4",
            "--model",
            f"scripted:{SCRIPT}",
            "--detach",
            "--json",
        ],
        env=env,
    )
    assert detached.exit_code == 0, detached.output
    second = json.loads(detached.stdout)["run_id"]

    listed = cli.invoke(app, ["graph", "runs", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    runs = json.loads(listed.stdout)
    assert [(r["run_id"], r["status"]) for r in runs] == [
        (second, "running"),
        (parked.run_id, "waiting_human"),
    ]
    assert all(
        set(r) == {"run_id", "agent", "graph", "version", "status", "created_at", "updated_at"}
        for r in runs
    )
    assert (runs[1]["agent"], runs[1]["graph"], runs[1]["version"]) == (
        "assistant",
        "research-and-verify",
        1,
    )
    assert runs[0]["created_at"] >= runs[1]["created_at"]
    assert runs[1]["updated_at"] >= runs[1]["created_at"]

    cancelled = cli.invoke(app, ["graph", "cancel", parked.run_id], env=env)
    assert cancelled.exit_code == 0, cancelled.output
    assert f"run {parked.run_id} cancelled" in cancelled.output

    listed = cli.invoke(app, ["graph", "runs", "--json", "--status", "cancelled"], env=env)
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [parked.run_id]
    table = cli.invoke(app, ["graph", "runs"], env={**env, "COLUMNS": "200"})
    assert parked.run_id in table.output and second in table.output
    again = cli.invoke(app, ["graph", "resume", parked.run_id, "yes"], env=env)
    assert again.exit_code == 1 and "cancelled" in again.output

    async def after() -> tuple[RunRecord, str, list[AuditEvent]]:
        async with open_mesh(url) as mesh:
            runs = Runs(mesh)
            assert parked.waiting is not None and parked.waiting.decision_id is not None
            decision = await DecisionAnswerer(mesh).get(parked.waiting.decision_id)
            # A host woken by the withdrawn decision finds the run over and runs nothing.
            async with hosting(mesh, ScriptedModel([])) as (runtime, _):
                await anyio.sleep(0.3)
                await runtime.wait_idle()
            await runs.verify(parked.run_id)
            return (
                await runs.get(parked.run_id),
                decision.status,
                await read_events(mesh, parked.run_id),
            )

    rec, decision_status, events = anyio.run(after)
    assert rec.status == "cancelled" and rec.ended_detail == "cancelled"
    assert decision_status == "cancelled"
    # PLAIT_USER is only a label: the actor is the OS user running the command.
    assert events[-1].type == "run.cancelled" and events[-1].actor == os_user()
    assert [e.type for e in events].count("node.committed") == 4


def test_raise_budget_lets_a_parked_run_go_on(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    graph = {
        **agent_chain("tight", ["one", "two"]),
        "budget": {"steps": 1, "on_exhausted": "escalate"},
    }
    model = ScriptedModel([{"node": "one", "text": "1"}, {"node": "two", "text": "2"}])

    async def park() -> RunRecord:
        async with open_mesh(url) as mesh:
            await store(mesh, graph)
            runs = Runs(mesh)
            async with hosting(mesh, model):
                parked = await settle(runs, (await runs.start("assistant", "tight", "x")).run_id)
                assert parked.waiting is not None and parked.waiting.decision_id is not None
                # "raise" on the desk brings no amounts: the run stays parked for them.
                await DecisionAnswerer(mesh).answer(
                    parked.waiting.decision_id, option="raise", by=Human("ana")
                )
                await anyio.sleep(0.3)
            return await runs.get(parked.run_id)

    parked = anyio.run(park)
    assert parked.status == "waiting_human"
    assert parked.waiting is not None and parked.waiting.kind == "budget"
    cli = CliRunner()
    env = {"PLAIT_USER": "ana", "PLAIT_MESH": url}
    nothing = cli.invoke(app, ["graph", "raise-budget", parked.run_id], env=env)
    assert nothing.exit_code == 1 and "--steps" in nothing.output
    raised = cli.invoke(app, ["graph", "raise-budget", parked.run_id, "--steps", "2"], env=env)
    assert raised.exit_code == 0, raised.output
    assert "budget raised (steps +2)" in raised.output

    async def finish() -> tuple[RunRecord, Any]:
        async with open_mesh(url) as mesh:
            runs = Runs(mesh)
            async with hosting(mesh, model):
                rec = await settle(runs, parked.run_id, since=parked)
            return rec, await runs.output(rec)

    rec, output = anyio.run(finish)
    assert rec.status == "done" and output == "2"
    assert rec.budget_extra == {"steps": 2}


def test_a_run_parked_on_its_budget_says_how_to_raise_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    graph = {
        **agent_chain("tight", ["one", "two"]),
        "budget": {"steps": 1, "on_exhausted": "escalate"},
    }
    script = tmp_path / "model.json"
    script.write_text(json.dumps([{"node": "one", "text": "1"}, {"node": "two", "text": "2"}]))

    async def stored() -> None:
        async with open_mesh(url) as mesh:
            await store(mesh, graph)

    anyio.run(stored)
    model = f"scripted:{script}"
    shown = CliRunner().invoke(
        app, ["graph", "run", "assistant", "tight", "--input", "x", "--model", model],
        env={"PLAIT_MESH": url, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    run_id = next(line.split()[1] for line in shown.stdout.splitlines() if line.startswith("run "))
    assert f"raise it with: plait graph raise-budget {run_id} --steps N" in shown.stdout
    assert "plait graph resume" not in shown.stdout


def test_graph_resume_on_the_ray_runtime_refuses_an_unshared_mesh_before_answering(
    cli: Cli, tmp_path: Path
) -> None:
    model = tmp_path / "asking.model.json"
    model.write_text(json.dumps({"rules": asking_model_rules()}))
    with_mesh(cli.mesh_url, lambda mesh: store(mesh, ASKING_CHILD))
    asked = cli.json("graph", "run", "assistant", "sign-off", "--model", f"scripted:{model}")
    assert asked["status"] == "waiting_human"
    refused = cli("graph", "resume", asked["run_id"], "yes", "--runtime", "ray", ok=False)
    assert refused.returncode == 2
    assert "the Ray runtime cannot serve the mesh" in refused.stderr
    rec = record_of(cli.mesh_url, asked["run_id"])
    assert rec is not None and rec.status == "waiting_human"  # the answer was not given
    wrong = cli("graph", "resume", asked["run_id"], "yes", "--runtime", "cloud", ok=False)
    assert wrong.returncode == 2 and "--runtime must be local or ray" in wrong.stderr
