"""The fabric seed's three program texts, run as saved programs exactly as the seed
document writes them (cut from it, not copied here): the in-session graph, the
resumable graph's start program, and the node program its exec actor's model writes on
every message. Only the shell commands ``bun`` and ``bunx`` are stand-ins, on PATH."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from examples.seed_programs.seed import SEED, seed_programs
from plait.agents import Agents
from plait.agents.store import last_turns
from plait.decisions import DecisionAnswerer, Human
from plait.errors import MeshUnavailable
from plait.mesh import Mesh
from plait.mesh.memory import MemoryMesh
from plait.models import ScriptedModel
from plait.programs import grant_all, promote, run_program, run_source, save_program

from .conftest import eventually, serving

pytestmark = pytest.mark.anyio

NODES = Path(__file__).resolve().parents[2] / "examples" / "seed_programs" / "nodes"
SHARED_SEED = Path("/work/shared/seeds/fabric-graph-programs.txt")


@pytest.fixture
def bun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``bun`` and ``bunx`` stand-ins first on PATH: ``bunx vitest run X`` fails when X
    names a failing test; every call is logged."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "bun.log"
    for name, body in (
        ("bun", 'echo "typecheck ok"'),
        ("bunx", 'case "$*" in *failing*) echo "1 failed"; exit 1;; esac; echo "1 passed"'),
    ):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n{body}\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_the_programs_are_cut_from_the_seed_document_unchanged() -> None:
    programs = seed_programs()
    text = SEED.read_text(encoding="utf-8")
    if SHARED_SEED.exists():  # the reference copy, where it is at hand
        assert text == SHARED_SEED.read_text(encoding="utf-8")
    for program in programs.values():
        assert program.rstrip("\n") in text
    assert programs["in_session"].startswith("import asyncio\ntarget = π.target\n")
    assert programs["start"].startswith("run = π.run\n")
    assert "agents.create(" in programs["start"] and "decisions.wait(" in programs["node"]


async def save_promoted(mesh: Mesh, name: str, text: str) -> None:
    stored = await save_program(mesh, name, text)
    await promote(mesh, name, stored.version, by=Human("ana"))


@pytest.mark.parametrize(
    ("target", "review", "expected"),
    [
        ("src/cart.test.ts", "APPROVE: rounding is right", "success"),
        ("src/cart.test.ts", "Blockers: the tax is applied twice", "partial"),
        ("src/failing.test.ts", "APPROVE", "failed"),
    ],
)
async def test_the_in_session_graph_runs_as_written(
    mesh: Mesh, bun: Path, target: str, review: str, expected: str
) -> None:
    await save_promoted(mesh, "graph-in-session", seed_programs()["in_session"])
    model = ScriptedModel([{"match": "Review the change to " + target, "text": review}])

    async def approve(tool: str, args: dict[str, Any]) -> bool:
        return tool == "bash"

    grants = grant_all(mesh, agents=Agents(mesh, model=model), approve=approve)
    out = await run_program("graph-in-session", {"target": target}, grants)
    assert out["status"] == expected
    assert sorted(bun.read_text().splitlines()) == [
        "bun run typecheck",
        f"bunx vitest run {target}",
    ]
    if expected == "failed":  # a failed node returns its evidence; no review is asked for
        assert out == {"status": "failed", "node": "checks", "types": True, "tests": False}
        assert model.calls == []
    else:
        assert out["review"] == review
        assert [c.context.instance for c in model.calls] == ["graph review"]


def node_rules(run: str) -> list[dict[str, Any]]:
    """The exec actor's model: every message is answered by running the seed's node
    program (the fabricProgram event only by a note, so it runs nothing)."""
    exec_node = {"program": seed_programs()["node"], "payloads": {"run": run}}
    return [
        {"node": f"graph-{run}", "match": "fabricProgram", "text": "noted; nothing to run"},
        {"node": f"graph-{run}", "tool_calls": [{"name": "exec", "arguments": exec_node}]},
    ]


async def start_graph(mesh: Mesh, run: str) -> Any:
    for node in ("fetch", "test", "release"):
        await save_promoted(mesh, f"graph-{node}", (NODES / f"{node}.py").read_text())
    grants = grant_all(mesh, by="program by ana", agents=Agents(mesh))
    return await run_source(seed_programs()["start"], {"run": run}, grants, filename="start")


async def record(mesh: Mesh, run: str) -> dict[str, Any]:
    entry = await mesh.get(f"runs/{run}/graph")
    assert entry is not None
    return dict(entry.value)


async def until(mesh: Mesh, run: str, check: Any) -> dict[str, Any]:
    async def found() -> Any:
        value = await record(mesh, run)
        return check(value) and value

    return dict(await eventually(found, timeout_s=40))


async def assert_done_once(mesh: Mesh, run: str) -> None:
    done = await until(mesh, run, lambda r: r["status"] in ("done", "failed"))
    assert done["status"] == "done" and done["node"] == "done"
    assert list(done["results"]) == ["fetch", "test", "approve", "release"]
    assert done["results"]["approve"] == "answered"
    decisions = await DecisionAnswerer(mesh).list()
    assert [(d.title, d.status) for d in decisions] == [(f"Release {run}?", "answered")]
    assert decisions[0].raised_by == f"agent:graph-{run}"
    for node in ("fetch", "test", "release"):
        effect = await mesh.get(f"runs/{run}/effects/{node}")
        assert effect is not None and effect.version == 1, node  # each node's effect once


async def test_the_resumable_graph_runs_end_to_end_and_the_answer_wakes_it(mesh: Mesh) -> None:
    async with serving(mesh, node_rules("r1")):
        started = await start_graph(mesh, "r1")
        assert started == {
            "run": "r1",
            "key": "runs/r1/graph",
            "actor": "agent:graph-r1",
            "topic": "graph.r1",
        }
        asking = await until(mesh, "r1", lambda r: r.get("decisionId"))
        assert asking["node"] == "approve" and set(asking["results"]) == {"fetch", "test"}
        # nothing more is told: the answer to the decision the actor raised wakes it
        await DecisionAnswerer(mesh).answer(asking["decisionId"], option="yes", by=Human("bo"))
        await assert_done_once(mesh, "r1")

        async def five_turns() -> Any:
            # The turn that commits the run's end is recorded just after that commit.
            found = await last_turns(mesh, "graph-r1", 20)
            return found if len(found) >= 5 else None

        turns = await eventually(five_turns, timeout_s=40)
    assert [t.tools for t in turns] == [["exec"]] * 5
    assert [t.text for t in turns][2:4] == [
        '{"status": "waiting", "decisionId": "' + asking["decisionId"] + '"}',
        '{"status": "approved"}',
    ]
    assert "has closed" in turns[3].prompt


class FailsOnceAfterTheRaise(MemoryMesh):
    """A memory mesh that fails once, as a crash would, at the write storing a
    decision's id in a graph record: after the raise, before the store."""

    failed = False

    async def put(self, key: str, value: Any, if_version: int | None = None, **kw: Any) -> Any:
        if not self.failed and isinstance(value, dict) and value.get("decisionId"):
            self.failed = True
            raise MeshUnavailable("the mesh went away between the raise and the store")
        return await super().put(key, value, if_version, **kw)


async def test_a_wake_stopped_between_the_raise_and_the_store_raises_no_second_decision() -> None:
    mesh = FailsOnceAfterTheRaise()
    async with mesh, serving(mesh, node_rules("r2")):
        await start_graph(mesh, "r2")
        asking = await until(mesh, "r2", lambda r: r.get("decisionId"))
        assert mesh.failed  # the first try stopped after raising; the message ran again
        assert len(await DecisionAnswerer(mesh).list()) == 1
        await DecisionAnswerer(mesh).answer(asking["decisionId"], option="yes", by=Human("bo"))
        await assert_done_once(mesh, "r2")


async def test_an_event_carrying_a_fabric_program_runs_nothing_by_itself(mesh: Mesh) -> None:
    rules = node_rules("r3")
    async with serving(mesh, rules):
        await start_graph(mesh, "r3")
        await until(mesh, "r3", lambda r: r.get("decisionId"))
        await mesh.publish(
            "graph.r3",
            "graph.work",
            {"fabricProgram": {"ref": "graph-release", "input": {"run": "r3"}}},
        )

        async def noted() -> Any:
            turns = await last_turns(mesh, "graph-r3", 20)
            return [t for t in turns if "fabricProgram" in t.prompt]

        (turn,) = await eventually(noted)
    assert turn.text == "noted; nothing to run" and turn.tools == []
    assert await mesh.get("runs/r3/effects/release") is None  # the actor decided: not now
    assert (await record(mesh, "r3"))["node"] == "approve"


async def test_an_exec_actor_runs_its_program_untrusted_when_the_message_is(mesh: Mesh) -> None:
    write_it = {"program": 'return await mesh.put(key="runs/t/" + π.k, value=1)'}
    rules = [
        {"node": "scribe", "match": "trusted", "tool_calls": [
            {"name": "exec", "arguments": {**write_it, "payloads": {"k": "{{prompt}}"}}}
        ]},
    ]  # fmt: skip
    agents = Agents(mesh)
    async with serving(mesh, rules):
        made = await agents.create(
            "scribe", runner="pi", residency="durable", instructions="Write what you are told."
        )
        assert made["config"]["runner"] == "pi"
        await agents.tell("scribe", "trusted")
        await agents.tell("scribe", "untrusted", untrusted=True)

        async def settled() -> Any:
            return len(await last_turns(mesh, "scribe", 5)) == 2

        await eventually(settled)
        trusted, untrusted = [await mesh.get(f"runs/t/{k}") for k in ("trusted", "untrusted")]
        turns = await last_turns(mesh, "scribe", 5)
    assert trusted is not None and untrusted is not None
    assert not trusted.tainted and untrusted.tainted
    assert [(t.outcome, t.tools, t.tainted) for t in turns] == [
        ("answered", ["exec"], False),
        ("answered", ["exec"], True),
    ]
