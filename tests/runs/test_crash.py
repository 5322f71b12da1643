"""A process killed while a node is in flight: a worker takes over and the run commits once.

``plait graph run`` runs in a subprocess until the slow second node has been claimed,
then gets SIGKILL. ``plait worker --visibility-timeout 1`` takes the unacked wake over
and applies the node's ``on_indeterminate`` policy.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import pytest

from plait.decisions import DecisionAnswerer
from plait.errors import RunNotFound
from plait.mesh import Mesh, open_mesh
from plait.runs import AuditEvent, RunRecord, Runs
from plait.runs.audit import read_events
from plait.runs.record import child_run_id
from tests._support.timing import scaled

from .helpers import DATA, Cli, commits, poll

pytestmark = pytest.mark.slow

SCRIPT = DATA / "slow_chain.model.yaml"
T = TypeVar("T")


def with_mesh(url: str, body: Callable[[Mesh], Awaitable[T]]) -> T:
    async def main() -> T:
        async with open_mesh(url) as mesh:
            return await body(mesh)

    return anyio.run(main)


def only_record(url: str) -> RunRecord | None:
    async def read(mesh: Mesh) -> RunRecord | None:
        runs = Runs(mesh)
        found = await runs.list()
        return await runs.get(found[0].run_id) if found else None

    return with_mesh(url, read)


def record_when(url: str, check: Callable[[RunRecord], bool]) -> RunRecord:
    """Poll the run's record until ``check`` holds for it."""

    def found() -> RunRecord | None:
        rec = only_record(url)
        return rec if rec is not None and check(rec) else None

    return poll(found)


def history(url: str, run_id: str) -> tuple[RunRecord, list[AuditEvent], list[dict[str, Any]]]:
    async def read(mesh: Mesh) -> tuple[RunRecord, list[AuditEvent], list[dict[str, Any]]]:
        runs = Runs(mesh)
        await runs.verify(run_id)
        return (
            await runs.get(run_id),
            await read_events(mesh, run_id),
            await runs.trajectory(run_id),
        )

    return with_mesh(url, read)


def sigkill_when(doomed: subprocess.Popen[str], until: Callable[[], T]) -> T:
    """SIGKILL ``doomed`` once ``until`` returns (what it returned); reap it either way."""
    try:
        found = until()
        os.kill(doomed.pid, signal.SIGKILL)
        assert doomed.wait(timeout=scaled(10)) == -signal.SIGKILL
    finally:
        if doomed.poll() is None:
            doomed.kill()
        doomed.communicate()
    return found


def kill_while_second_runs(cli: Cli, graph: str) -> RunRecord:
    """Run ``graph`` in a process and SIGKILL it while ``second`` is in flight."""
    cli.setup("graph", "import", str(DATA / f"{graph.replace('-', '_')}.json"))
    doomed = cli.spawn(
        "graph",
        "run",
        "assistant",
        graph,
        "--input",
        "x",
        "--model",
        f"scripted:{SCRIPT}",
        "--json",
    )
    rec = sigkill_when(doomed, lambda: record_when(cli.mesh_url, lambda r: "second" in r.attempts))
    assert rec.visits == {"first": 1} and rec.attempts["second"].visit == 1
    assert str(doomed.pid) in rec.attempts["second"].host
    return rec


def stop(worker: subprocess.Popen[str]) -> str:
    """SIGTERM the worker; it must drain and exit 0. Its stderr."""
    worker.send_signal(signal.SIGTERM)
    try:
        _, err = worker.communicate(timeout=scaled(15))
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    return err


def assert_each_visit_committed_once(events: list[AuditEvent]) -> None:
    committed = Counter((e.node, e.visit) for e in events if e.type == "node.committed")
    assert committed == {("first", 1): 1, ("second", 1): 1, ("third", 1): 1}


def test_a_killed_model_node_is_retried_once_by_a_worker(cli: Cli) -> None:
    interrupted = kill_while_second_runs(cli, "slow-chain")
    worker = cli.spawn("worker", "--visibility-timeout", "1")
    try:
        rec = record_when(cli.mesh_url, lambda r: r.terminal)
    finally:
        err = stop(worker)
    assert rec.status == "done", (rec, err)
    assert "draining" in err and "stopped after handling" in err

    rec, events, steps = history(cli.mesh_url, rec.run_id)
    assert_each_visit_committed_once(events)
    assert commits(steps) == [("first", 1), ("second", 1), ("third", 1)]
    assert [s.output for s in steps] == ["one", "two", "three"]
    assert rec.usage.retries == 1  # the retry policy of a model node ran once
    assert rec.visits == {"first": 1, "second": 1, "third": 1}
    second = next(e for e in events if e.type == "node.committed" and e.node == "second")
    assert str(worker.pid) in second.actor and interrupted.attempts["second"].host != second.actor
    assert rec.attempts == {} and rec.ended_detail == "completed"
    cli("graph", "inspect", rec.run_id, "--verify")


def test_a_killed_escalate_node_asks_a_person_and_retry_finishes_it(cli: Cli) -> None:
    kill_while_second_runs(cli, "slow-escalate")
    worker = cli.spawn("worker", "--visibility-timeout", "1")
    try:
        parked = record_when(cli.mesh_url, lambda r: r.waiting is not None)
        assert parked.status == "waiting_human"
        assert parked.waiting is not None and parked.waiting.kind == "indeterminate"
        assert parked.waiting.node == "second" and parked.attempts == {}
        decisions = cli.json("decisions", "list")
        assert len(decisions) == 1
        asked = decisions[0]
        assert asked["id"] == parked.waiting.decision_id and asked["status"] == "open"
        assert asked["options"] == ["retry", "fail"] and "second" in asked["title"]

        cli("decisions", "answer", asked["id"], "--option", "retry")
        rec = record_when(cli.mesh_url, lambda r: r.terminal)
    finally:
        stop(worker)
    assert rec.status == "done"

    rec, events, steps = history(cli.mesh_url, rec.run_id)
    assert_each_visit_committed_once(events)
    assert [s.output for s in steps] == ["one", "two", "three"]
    assert rec.visits["second"] == 1
    assert rec.usage.retries == 1
    assert [(e.type, e.node) for e in events if e.type != "run.resumed"] == [
        ("run.started", None),
        ("node.committed", "first"),
        ("node.indeterminate", "second"),
        ("node.committed", "second"),
        ("node.committed", "third"),
        ("run.done", None),
    ]

    async def answered(mesh: Mesh) -> str | None:
        return (await DecisionAnswerer(mesh).get(asked["id"])).value

    assert with_mesh(cli.mesh_url, answered) == "retry"
    cli("graph", "inspect", rec.run_id, "--verify")


def run_of_graph(url: str, graph: str) -> RunRecord | None:
    """The newest run of ``graph``, if any (a child run may be newer than its parent)."""

    async def read(mesh: Mesh) -> RunRecord | None:
        runs = Runs(mesh)
        found = [s for s in await runs.list() if s.graph == graph]
        return await runs.get(found[0].run_id) if found else None

    return with_mesh(url, read)


def record_of(url: str, run_id: str) -> RunRecord | None:
    async def read(mesh: Mesh) -> RunRecord | None:
        try:
            return await Runs(mesh).get(run_id)
        except RunNotFound:
            return None

    return with_mesh(url, read)


def test_a_child_run_killed_mid_node_is_finished_and_wakes_its_parent(cli: Cli) -> None:
    cli.setup("graph", "import", str(DATA / "slow_chain.json"))
    cli.setup("graph", "import", str(DATA / "slow_parent.json"))
    doomed = cli.spawn(
        "graph", "run", "assistant", "slow-parent", "--input", "x",
        "--model", f"scripted:{DATA / 'slow_parent.model.yaml'}", "--json",
    )  # fmt: skip

    def child_in_flight() -> tuple[RunRecord, str]:
        parent = poll(lambda: run_of_graph(cli.mesh_url, "slow-parent"))
        child_id = child_run_id(parent.run_id, "sub", 1)
        poll(lambda: (c := record_of(cli.mesh_url, child_id)) and "second" in c.attempts)
        return parent, child_id

    parent, child_id = sigkill_when(doomed, child_in_flight)
    assert (record_of(cli.mesh_url, parent.run_id) or parent).status == "waiting_child"

    worker = cli.spawn("worker", "--visibility-timeout", "1")
    try:
        done = poll(lambda: (r := record_of(cli.mesh_url, parent.run_id)) and r.terminal and r)
    finally:
        stop(worker)
    assert done.status == "done", done
    child, child_events, _ = history(cli.mesh_url, child_id)
    assert child.status == "done" and child.usage.retries == 1
    assert_each_visit_committed_once(child_events)
    done, events, steps = history(cli.mesh_url, parent.run_id)
    assert commits(steps) == [("lead", 1), ("sub", 1), ("tail", 1)]
    assert [s.output for s in steps] == ["lead", "three", "tail"]
    assert Counter(e.node for e in events if e.type == "node.committed") == {
        "lead": 1,
        "sub": 1,
        "tail": 1,
    }
