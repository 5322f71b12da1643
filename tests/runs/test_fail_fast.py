"""Fail fast, fail honestly: what cannot work is refused or fails at once, with its reason.

- a bad model spec is refused before a run is queued (exit 2, one line);
- configuration errors fail their node at once (``configuration_error``), no retries;
- ``graph run``/``resume`` exit 1 for a failed or cancelled run, ``--json`` says why;
- ``cancel`` of a finished run and ``runs --status bogus`` are refused;
- a poison commit (an output over the mesh's limit, a wake that cannot heal) fails its
  node or run once instead of looping.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait.errors import ConfigError
from plait.graphs import run_graph
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.profiles import AgentProfile
from plait.runs import Runs
from plait.runs.audit import read_events

from .helpers import EXAMPLES, Cli, agent_chain, hosting, settle, store

GRAPH = EXAMPLES / "research_and_verify.json"
SCRIPT = EXAMPLES / "research_and_verify.model.yaml"

# -- a bad model spec is refused before anything is written ------------------------------


def _cli_with_graph(tmp_path: Path, *, in_process: bool = True) -> Cli:
    cli = Cli(tmp_path, in_process=in_process)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        cli.env.pop(name, None)
    cli("graph", "import", str(GRAPH))
    return cli


def _refused(cli: Cli, *args: str) -> str:
    done = cli(*args, ok=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.anyio
async def test_runs_start_writes_nothing_for_a_bad_spec(mesh: Mesh) -> None:
    await store(mesh, agent_chain("g", ["a"]))
    runs = Runs(mesh)
    with pytest.raises(ConfigError, match="expected PREFIX:NAME"):
        await runs.start("assistant", "g", "x", model="gpt-4o")
    assert await runs.list() == []


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("gpt-4o", "expected PREFIX:NAME"),
        ("scripted:nosuch.yaml", "nosuch.yaml"),
        ("anthropic:claude-x", "ANTHROPIC_API_KEY"),
    ],
)
def test_graph_run_refuses_a_bad_model_before_queueing(
    tmp_path: Path, spec: str, says: str
) -> None:
    cli = _cli_with_graph(tmp_path)
    line = _refused(
        cli, "graph", "run", "assistant", "research-and-verify", "--input", "x", "--model", spec
    )
    assert says in line
    assert cli.json("graph", "runs") == []


def test_openai_without_its_package_says_how_to_install_it(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker" / "openai"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('openai is not installed here')\n")
    cli = _cli_with_graph(tmp_path, in_process=False)  # its imports see PYTHONPATH
    cli.env["PYTHONPATH"] = f"{blocker.parent}:{cli.env.get('PYTHONPATH', '')}"
    cli.env["OPENAI_API_KEY"] = "sk-test"
    argv = ("graph", "run", "assistant", "research-and-verify", "--model", "openai:gpt-4o")
    assert "pip install 'plait[openai]'" in _refused(cli, *argv)
    assert cli.json("graph", "runs") == []
    assert "pip install 'plait[openai]'" in _refused(cli, "worker", "--model", "openai:gpt-4o")


def test_worker_refuses_a_bad_model(tmp_path: Path) -> None:
    cli = _cli_with_graph(tmp_path)
    assert "expected PREFIX:NAME" in _refused(cli, "worker", "--model", "gpt-4o")


# -- configuration errors fail the node at once ------------------------------------------


@pytest.mark.anyio
async def test_a_model_that_cannot_load_in_the_worker_fails_the_node_once(
    mesh: Mesh, tmp_path: Path
) -> None:
    script = tmp_path / "gone.yaml"
    script.write_text("- text: ok\n")
    await store(mesh, agent_chain("g", ["a", "b"]))
    runs = Runs(mesh)
    run_id = (await runs.start("assistant", "g", "x", model=f"scripted:{script}")).run_id
    script.unlink()  # the serving process cannot load what the run names
    async with hosting(mesh):
        rec = await settle(runs, run_id)
    assert (rec.status, rec.ended_detail) == ("failed", "configuration_error")
    assert "gone.yaml" in (rec.error or "")
    committed = [e for e in await read_events(mesh, run_id) if e.type == "node.committed"]
    assert [(e.node, e.visit) for e in committed] == [("a", 1)]
    assert rec.usage.retries == 0


async def _bad_args_run(model: ScriptedModel) -> Any:
    nodes = [
        {"id": "a", "type": "agent", "prompt": "size?", "next": "t"},
        {"id": "t", "type": "tool", "tool": "read_file",
         "args": {"path": "x.txt", "max_bytes": "{{a}}"}, "retry": {"initial_s": 0.01}},
    ]  # fmt: skip
    return await run_graph({"name": "g", "agent": "assistant", "entry": "a", "nodes": nodes}, "x",
                           model=model)  # fmt: skip


@pytest.mark.anyio
async def test_bad_tool_arguments_and_an_unknown_model_are_configuration_errors() -> None:
    model = ScriptedModel([{"node": "a", "text": "a lot"}])
    run = await _bad_args_run(model)
    assert (run.status, run.ended_detail) == ("failed", "configuration_error")
    assert [(s.node, s.visit) for s in run.trajectory] == [("a", 1), ("t", 1)]
    assert len(model.calls) == 1 and run.usage.retries == 0

    profile = AgentProfile(name="assistant", model="scripted:missing.yaml")
    nodes = [{"id": "a", "type": "agent", "prompt": "hi"}]
    unknown = await run_graph(
        {"name": "g", "agent": "assistant", "entry": "a", "nodes": nodes},
        profiles={"assistant": profile},
    )
    assert (unknown.status, unknown.ended_detail) == ("failed", "configuration_error")
    assert unknown.usage.retries == 0


# -- exit codes and the JSON error -----------------------------------------------------


def test_graph_run_exits_1_when_the_run_fails_and_json_says_why(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    (tmp_path / "g.json").write_text(json.dumps(agent_chain("chain", ["a", "b"])))
    (tmp_path / "m.yaml").write_text("- node: a\n  text: fine\n- node: b\n  error: melted\n")
    cli("graph", "import", str(tmp_path / "g.json"))
    argv = ("graph", "run", "assistant", "chain", "--model", f"scripted:{tmp_path / 'm.yaml'}")
    done = cli(*argv, "--json", ok=False)
    assert done.returncode == 1, done.stderr
    body = json.loads(done.stdout)
    assert body["status"] == "failed"
    assert body["error"] == {
        "node": "b",
        "visit": 1,
        "type": "node_failed",
        "message": "b: melted",
    }
    plain = cli(*argv, ok=False)
    assert plain.returncode == 1 and "melted" in plain.stdout
    assert "Traceback" not in plain.stderr
    # cancel of a run that is over says so, and exits 1
    over = cli("graph", "cancel", body["run_id"], ok=False)
    assert over.returncode == 1 and "already over (failed)" in over.stderr


def test_graph_run_exits_0_when_done_or_parked_and_help_lists_the_codes(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    cli("graph", "import", str(GRAPH))
    parked = cli.json(
        "graph", "run", "assistant", "research-and-verify", "--model", f"scripted:{SCRIPT}"
    )
    assert parked["status"] == "waiting_human" and "error" not in parked
    done = cli.json("graph", "resume", parked["run_id"], "yes")
    assert done["status"] == "done"
    for command in ("run", "resume"):
        shown = cli("graph", command, "--help").stdout
        assert "Exit codes" in shown and "waiting_" in shown


def test_runs_with_an_unknown_status_is_a_usage_error(tmp_path: Path) -> None:
    done = Cli(tmp_path, in_process=True)("graph", "runs", "--status", "bogus", ok=False)
    assert done.returncode == 2
    assert "unknown status 'bogus'" in done.stderr
    assert "waiting_human" in done.stderr and "cancelled" in done.stderr


# -- a poison commit fails once instead of looping ----------------------------------------


@pytest.mark.anyio
async def test_an_output_over_the_mesh_limit_fails_its_node_once(tmp_path: Path) -> None:
    limit = 64 * 1024
    async with open_mesh(f"sqlite:///{tmp_path / 'm.db'}", max_value_bytes=limit) as mesh:
        await store(mesh, agent_chain("g", ["big", "after"]))
        model = ScriptedModel([{"node": "big", "text": "x" * (2 * limit)}, {"text": "ok"}])
        runs = Runs(mesh)
        async with hosting(mesh, model):
            rec = await settle(runs, (await runs.start("assistant", "g", "x")).run_id)
        assert (rec.status, rec.ended_detail) == ("failed", "output_too_large")
        assert str(limit) in (rec.error or "") and "bytes encoded" in (rec.error or "")
        assert len(model.calls) == 1  # the node, model call included, ran once
        await runs.verify(rec.run_id)


@pytest.mark.anyio
async def test_a_wake_that_cannot_heal_fails_its_run_with_the_reason(mesh: Mesh) -> None:
    await store(mesh, agent_chain("g", ["a"]))
    runs = Runs(mesh)
    rec = await runs.start("assistant", "g", "x")
    stored = await mesh.get("graphs/assistant/g/1")
    assert stored is not None
    await mesh.put("graphs/assistant/g/1", {**stored.value, "sha256": "0" * 64})
    model = ScriptedModel([{"text": "ok"}])
    async with hosting(mesh, model):
        done = await settle(runs, rec.run_id)
    assert (done.status, done.ended_detail) == ("failed", "internal_error")
    assert "GraphError" in (done.error or "") and "pinned" in (done.error or "")
    assert model.calls == []
