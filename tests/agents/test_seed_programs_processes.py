"""The fabric seed's programs through the CLI and real processes, as the example's
README runs them: ``plait exec`` on the in-session graph (its model from PLAIT_MODEL or
``--model``), and the resumable graph started with ``plait exec``, its exec actor served
by ``plait worker`` processes SIGKILLed between nodes, between the raise of the decision
and the store of its id (a trigger on the SQLite file holds the store back until the
kill), and while a wake waits on the decision. The graph ends done, each node's effect
lands once, and exactly one decision is raised."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from examples.seed_programs.seed import write
from plait.agents.store import data_prefix
from plait.decisions import DecisionAnswerer
from plait.mesh import Mesh, open_mesh
from tests._support.processes import LoggedProcess
from tests._support.timing import scaled
from tests.runs.helpers import Cli

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed_programs"


def cli_with_bun(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path)
    cli.env["PATH"] = f"{EXAMPLE / 'bin'}{os.pathsep}{cli.env['PATH']}"
    return cli


def test_plait_exec_runs_the_in_session_graph_with_the_model_it_is_given(tmp_path: Path) -> None:
    cli = cli_with_bun(tmp_path)
    write(tmp_path / "seed", "r1")
    program, model = (
        str(tmp_path / "seed" / "in_session.py"),
        f"scripted:{tmp_path}/seed/model.json",
    )
    args = ("exec", program, "--payload", "target=src/cart.test.ts", "--approve-tools")
    refused = cli(*args, ok=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0 and "has no model" in refused.stderr
    out = cli.json(*args, "--model", model)["result"]
    assert out == {"status": "success", "review": "APPROVE: the change is correct."}
    cli.env["PLAIT_MODEL"] = model
    failing = cli.json(
        "exec", program, "--payload", "target=src/failing.test.ts", "--approve-tools"
    )
    assert failing["result"] == {
        "status": "failed",
        "node": "checks",
        "types": True,
        "tests": False,
    }
    bad = cli("exec", program, "--model", "nosuch:x", ok=False)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    twice = tmp_path / "twice.py"
    twice.write_text('await mesh.put(key="runs/x", value=1, ifVersion=0, if_version=0)\n')
    failed = cli("exec", str(twice), ok=False)
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        f"error: {twice}:1: TypeError: mesh.put: if_version is given twice, "
        "as ifVersion and if_version"
    )


def test_a_graph_of_program_nodes_needs_no_model(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    cli.setup("programs", "save", "graph-fetch", str(EXAMPLE / "nodes" / "fetch.py"))
    cli.setup("programs", "promote", "graph-fetch", "--version", "1")
    spec = {
        "name": "fetch-only",
        "agent": "assistant",
        "entry": "fetch",
        "nodes": [{"id": "fetch", "type": "program", "ref": "graph-fetch", "input": {"run": "g1"}}],
    }
    (tmp_path / "g.json").write_text(json.dumps(spec))
    cli.setup("graph", "import", str(tmp_path / "g.json"))
    ran = cli("graph", "run", "assistant", "fetch-only", "--json", timeout=60)
    assert json.loads(ran.stdout)["status"] == "done", ran.stdout + ran.stderr


class Worker:
    """One ``plait worker`` at a time, answered by the example's scripted model."""

    def __init__(self, cli: Cli, logs: Path, model: str) -> None:
        self.cli, self.logs, self.model = cli, logs, model
        self.proc: LoggedProcess | None = None
        self.started = 0

    def start(self) -> None:
        argv = self.cli.argv("worker", "--model", self.model, "--lease-s", "1")
        self.proc = LoggedProcess(
            [*argv, "--visibility-timeout", "1", "--drain-timeout", "1"],
            self.logs / f"worker{self.started}.log", cwd=self.cli.cwd, env=self.cli.env,
        )  # fmt: skip
        self.started += 1

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.sigkill()

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


async def until(check: Any, what: str, timeout_s: float = 60.0) -> Any:
    """Poll ``check()`` until it is truthy; its value (deadline stretched when busy)."""
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await anyio.sleep(0.01)
    raise AssertionError(f"not {what} within {timeout_s}s")


def store_blocked(db: Path, blocked: bool) -> None:
    """Make the SQLite mesh at ``db`` refuse (or again accept) a write of the graph
    record holding a ``decisionId``: the raise lands, the store of its id does not."""
    with sqlite3.connect(db) as conn:
        if blocked:
            conn.execute(
                "CREATE TRIGGER block_store BEFORE UPDATE ON kv WHEN NEW.key = 'runs/r1/graph' "
                "AND instr(NEW.value, CAST('decisionId' AS BLOB)) > 0 "
                "BEGIN SELECT RAISE(ABORT, 'the store is blocked'); END"
            )
        else:
            conn.execute("DROP TRIGGER block_store")


def waiting_on_a_decision(db: Path) -> bool:
    """Whether a ``decisions.wait`` is under way (its consumer group on the decisions
    topic exists) in the SQLite mesh at ``db``."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT count(*) FROM consumer_groups WHERE topic = 'decisions' "
            "AND grp LIKE 'decision-wait-%'"
        ).fetchone()
    return bool(rows[0])


async def test_the_resumable_graph_survives_sigkills_with_one_decision_and_effects_once(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    seed = tmp_path / "seed"
    write(seed, "r1")
    for node in ("fetch", "test", "release"):
        cli.setup("programs", "save", f"graph-{node}", str(EXAMPLE / "nodes" / f"{node}.py"))
        cli.setup("programs", "promote", f"graph-{node}", "--version", "1")
    started = cli.json("exec", str(seed / "start.py"), "--payload", "run=r1")["result"]
    assert started == {
        "run": "r1",
        "key": "runs/r1/graph",
        "actor": "agent:graph-r1",
        "topic": "graph.r1",
    }
    db = tmp_path / "mesh.db"
    store_blocked(db, True)
    worker = Worker(cli, tmp_path, f"scripted:{seed / 'model.json'}")

    async def graph(mesh: Mesh) -> dict[str, Any]:
        entry = await mesh.get("runs/r1/graph")
        assert entry is not None
        return dict(entry.value)

    async with open_mesh(cli.mesh_url) as mesh:
        desk = DecisionAnswerer(mesh)
        try:
            worker.start()
            for node in ("fetch", "test"):  # between nodes: each result recorded
                await until(lambda n=node: _has(graph(mesh), n), f"past {node}")
                worker.restart()
            # between the raise and the store: the store cannot land until the worker
            # is killed (the trigger refuses it), so the kill comes after the raise
            await until(desk.list, "asked")
            assert "decisionId" not in await graph(mesh)
            worker.kill()
            store_blocked(db, False)
            worker.start()
            asking = await until(lambda: _decision_id(graph(mesh)), "asking")
            # during the wait: a wake while the decision is open waits on it
            cli("agents", "tell", "graph-r1", "Continue runs/r1/graph.")
            await until(lambda: _sync(waiting_on_a_decision(db)), "waiting on it")
            worker.restart()
            answered = cli("decisions", "answer", asking, "--option", "yes").stdout
            assert "answered" in answered
            done = await until(lambda: _done(graph(mesh)), "done")
            decisions = await desk.list()
            effects = {
                n: await mesh.get(f"runs/r1/effects/{n}") for n in ("fetch", "test", "release")
            }

            async def settled() -> bool:  # every message delivered again is settled
                prefix = data_prefix("graph-r1") + "inflight/"
                return not [e async for e in mesh.scan(prefix)]

            await until(settled, "every message settled")
        finally:
            worker.stop()
    assert list(done["results"]) == ["fetch", "test", "approve", "release"]
    assert [(d.id, d.status) for d in decisions] == [(asking, "answered")]  # exactly one
    for node, effect in effects.items():
        assert effect is not None and effect.version == 1, node  # each node's effect once


async def _has(record: Any, node: str) -> bool:
    return node in (await record)["results"]


async def _decision_id(record: Any) -> Any:
    return (await record).get("decisionId")


async def _done(record: Any) -> Any:
    found = await record
    return found["status"] == "done" and found


async def _sync(value: Any) -> Any:
    return value
