"""Chaos that must keep holding: workers SIGKILLed at random moments, racing answers.

Runs of a graph with a revise loop and a person's sign-off are queued on SQLite and on
Redis and served by one or three ``plait worker`` processes with a short visibility
timeout; a random worker, preferably one with a node in flight, is SIGKILLed a few
times as the runs go on and started again. Every run ends done, its audit chain
verifies, and each (node, visit) is committed once. A worker may take over a node a
live one still runs (the visibility timeout is short), so a model may be called twice
for one visit: only commits are counted, never calls.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.decisions import Agent, DecisionAnswerer, Human
from plait.mesh import Mesh, open_mesh
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from tests._support.processes import LoggedProcess, stop_all
from tests._support.timing import scaled

from .helpers import Cli, commits, poll, store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RUNS = 12
KILLS = 3
GRAPH = {
    "name": "chaos",
    "agent": "assistant",
    "entry": "draft",
    "budget": 20,
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft {{input}}", "next": "review"},
        {"id": "review", "type": "verifier", "prompt": "Review {{draft}}",
         "verdicts": {"again": "draft", "ok": "approve"}},
        {"id": "approve", "type": "human", "ask": "Ship {{draft}}?", "next": "ship"},
        {"id": "ship", "type": "agent", "prompt": "Ship {{draft}} ({{approve}})"},
    ],
}  # fmt: skip
# The review sends the first draft back once; the person signs the second one off.
TRAJECTORY = [("draft", 1), ("review", 1), ("draft", 2), ("review", 2), ("approve", 1), ("ship", 1)]
STEPS = RUNS * len(TRAJECTORY)


def script(path: Path) -> str:
    """A model file whose answers name the run's item, so outputs cannot cross runs.

    The model nodes take a moment, so that a kill often lands on one in flight.
    """
    rules: list[dict[str, Any]] = [
        {"node": "review", "visit": 1, "text": "again"},
        {"node": "review", "text": "ok"},
    ]
    for i in range(RUNS):
        rules += [
            {"node": "draft", "visit": 1, "match": f"<{i}>", "text": f"draft<{i}>.1",
             "delay_ms": 150},
            {"node": "draft", "visit": 2, "match": f"<{i}>", "text": f"draft<{i}>.2",
             "delay_ms": 150},
            {"node": "ship", "match": f"draft<{i}>.2 (yes)", "text": f"ship<{i}>",
             "delay_ms": 150},
        ]  # fmt: skip
    path.write_text(json.dumps({"rules": rules}))
    return f"scripted:{path}"


class Workers:
    """``plait worker`` processes, each logging to a file of its own."""

    def __init__(self, cli: Cli, model: str) -> None:
        self.cli = cli
        self.model = model
        self.procs: list[LoggedProcess] = []
        """The workers alive."""
        self.started: list[LoggedProcess] = []
        """Every worker started, killed or not."""

    def start(self) -> None:
        """One more worker."""
        proc = LoggedProcess(
            self.cli.argv("worker", "--visibility-timeout", "1", "--model", self.model),
            self.cli.cwd / f"worker-{len(self.started)}.log",
            cwd=self.cli.cwd, env=self.cli.env, stdout=False,
        )  # fmt: skip
        self.procs.append(proc)
        self.started.append(proc)

    def kill(self, victim: LoggedProcess) -> None:
        """SIGKILL ``victim``, reap it, and start a worker in its place."""
        victim.sigkill()
        self.procs.remove(victim)
        self.start()

    def stop_all(self) -> None:
        """SIGTERM every live worker once it serves: each must drain and exit 0."""
        for proc in self.procs:
            poll(lambda proc=proc: "serving" in proc.text())
        for proc, code in zip(self.procs, stop_all(self.procs), strict=True):
            assert code == 0, proc.text()

    def close(self) -> None:
        """Kill whatever still runs."""
        for proc in self.procs:
            proc.kill()

    def log_text(self) -> str:
        """Every worker's stderr so far, for a failure's message."""
        return "\n".join(proc.text() for proc in self.started)


def busy(workers: Workers, records: list[RunRecord]) -> list[LoggedProcess]:
    """The workers that hold a node in flight (an attempt's host names its pid)."""
    # A host id reads hostname:pid:random; an entry node claimed at start has none yet.
    hosts = [a.host.split(":") for rec in records for a in rec.attempts.values()]
    pids = {host[-2] for host in hosts if len(host) >= 3}
    return [p for p in workers.procs if str(p.pid) in pids]


async def drive(mesh: Mesh, workers: Workers, rng: random.Random) -> list[RunRecord]:
    """Queue the runs, answer each sign-off, and kill a worker at random commit counts."""
    runs = Runs(mesh)
    ids = [(await runs.start("assistant", "chaos", f"item <{i}>")).run_id for i in range(RUNS)]
    # Not in the last two waves: the runs' last nodes commit within one poll of each
    # other (in-process continuation made each transition fast), so a kill drawn
    # there could find every run already done.
    kill_at = sorted(rng.sample(range(2, STEPS - 2 * RUNS), KILLS))
    answered: set[str] = set()
    with anyio.fail_after(scaled(45)):
        while True:
            records = [await runs.get(run_id) for run_id in ids]
            for rec in records:
                asked = rec.waiting.decision_id if rec.waiting else None
                if asked and asked not in answered:
                    await runs.resume(rec.run_id, "yes", by=Human("tester"))
                    answered.add(asked)
            if all(rec.terminal for rec in records):
                assert not kill_at, f"the runs ended before kills at steps {kill_at}"
                return records
            steps = sum(rec.usage.steps for rec in records)
            victims = busy(workers, records)
            # A kill waits for a worker holding a node in flight: with in-process
            # continuation the gaps between a run's nodes are short, but they exist.
            if kill_at and steps >= kill_at[0] and victims:
                kill_at.pop(0)
                workers.kill(rng.choice(victims))
            await anyio.sleep(0.05)


@pytest.mark.parametrize("worker_count", [1, 3])
@pytest.mark.parametrize(
    "mesh_url",
    [
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
async def test_sigkilled_workers_lose_nothing_and_commit_each_visit_once(
    mesh_url: str, worker_count: int, tmp_path: Path
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    cli = Cli(tmp_path, mesh_url)
    workers = Workers(cli, script(tmp_path / "chaos.model.json"))
    async with open_mesh(mesh_url) as mesh:
        await store(mesh, GRAPH)
        try:
            for _ in range(worker_count):
                workers.start()
            try:
                records = await drive(mesh, workers, rng)
            except TimeoutError:
                pytest.fail(f"runs did not finish (seed {seed}):\n{workers.log_text()}")
            workers.stop_all()
        finally:
            workers.close()

        runs = Runs(mesh)
        desk = DecisionAnswerer(mesh)
        assert sum(rec.usage.retries for rec in records) > 0, "no kill hit a node in flight"
        for i, rec in enumerate(records):
            assert rec.status == "done", (seed, i, rec.error, workers.log_text())
            assert rec.attempts == {} and rec.ended_detail == "completed"
            assert await runs.output(rec) == f"ship<{i}>"
            assert await runs.verify(rec.run_id) > len(TRAJECTORY)
            assert commits(await runs.trajectory(rec.run_id)) == TRAJECTORY, seed
            events = await read_events(mesh, rec.run_id)
            committed = Counter((e.node, e.visit) for e in events if e.type == "node.committed")
            assert committed == Counter(TRAJECTORY), (seed, i, committed)
            assert rec.visits == {"draft": 2, "review": 2, "approve": 1, "ship": 1}
            (decision_id,) = rec.decisions.values()
            decision = await desk.get(decision_id)
            assert decision.status == "answered" and decision.value == "yes"


# ``plait`` as its console script runs it, but held at a barrier once imported, so that
# the four answers race at once rather than one process start after another.
ANSWERER = textwrap.dedent(
    """
    import sys

    from plait.cli import main

    print("ready", flush=True)
    sys.stdin.readline()
    sys.argv[0] = "plait"
    sys.exit(main())
    """
)
OPTIONS = ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "mesh_url",
    [
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
async def test_four_processes_answer_one_decision_and_exactly_one_wins(
    mesh_url: str, tmp_path: Path
) -> None:
    async with open_mesh(mesh_url) as mesh:
        desk = DecisionAnswerer(mesh)
        raised = await desk.raise_("Which?", "choice", OPTIONS, by=Agent("chaos-node"))
    cli = Cli(tmp_path, mesh_url)
    answerers = [
        subprocess.Popen(
            [sys.executable, "-c", ANSWERER, *cli.argv("decisions", "answer", raised.id,
                                                       "--option", option)[1:]],
            cwd=tmp_path,
            env={**cli.env, "PLAIT_USER": f"person-{option}"},
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for option in OPTIONS
    ]  # fmt: skip
    try:
        for proc in answerers:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in answerers:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        ended = [(proc.communicate(timeout=scaled(30)), proc.returncode) for proc in answerers]
    finally:
        for proc in answerers:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    won = [option for option, (_, code) in zip(OPTIONS, ended, strict=True) if code == 0]
    assert len(won) == 1, ended
    async with open_mesh(mesh_url) as mesh:
        decision = await DecisionAnswerer(mesh).get(raised.id)
    assert decision.status == "answered" and decision.value == won[0]
    assert decision.answer is not None and decision.answer.label == f"person-{won[0]}"
    for option, ((_, err), code) in zip(OPTIONS, ended, strict=True):
        if option == won[0]:
            continue
        assert code == 1, (option, err)
        assert f"decision {raised.id} was already answered by {decision.closed_by} at" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
