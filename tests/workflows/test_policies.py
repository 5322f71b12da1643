"""A step's ``on_indeterminate`` after a crash, budgets, a parked run's size and cancel."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from plait.decisions import DecisionAnswerer, Human
from plait.mesh import Mesh
from plait.runs import Runs, serve
from plait.runs.record import dump
from plait.workflows import journal, start_workflow
from plait.workflows.journal import digest
from plait.workflows.replay import started_key
from tests._support.timing import scaled
from tests.workflows import flows

pytestmark = pytest.mark.anyio

ME = Human("tester")


@pytest.mark.parametrize(("answer", "status"), [("retry", "done"), ("fail", "failed")])
async def test_an_escalating_step_found_started_asks_a_person(
    mesh: Mesh, tmp_path: Path, answer: str, status: str
) -> None:
    rec = await start_workflow(mesh, flows.careful, "app", workspace=tmp_path)
    # What a process killed inside the step leaves: its mark, no entry.
    args = digest({"args": ["app"], "kwargs": {}})
    await mesh.put(started_key(rec.run_id, 0), {"name": "deploy", "args": args})
    async with serve(mesh, beat=False):
        runs = Runs(mesh)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
        assert rec.waiting is not None
        assert rec.waiting.ask.startswith("Step 0 (deploy) was interrupted mid-flight")
        await runs.resume(rec.run_id, answer, by=ME)
        rec = await runs.wait(rec.run_id, timeout=scaled(30), since=rec)
    assert rec.status == status
    if status == "done":
        assert await runs.output(rec) == "deployed app"
    else:
        assert rec.error is not None and "a person chose not to run it again" in rec.error
        assert [s.error for s in await journal(mesh, rec.run_id)] == [
            "StepFailed: step 0 (deploy) failed: a person chose not to run it again"
        ]


async def test_a_step_that_ran_unmarked_asks_no_one(mesh: Mesh, tmp_path: Path) -> None:
    async with serve(mesh, beat=False):
        runs = Runs(mesh)
        rec = await start_workflow(mesh, flows.careful, "app", workspace=tmp_path)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
        assert rec.status == "done" and await runs.output(rec) == "deployed app"
    assert await DecisionAnswerer(mesh).list() == []


async def test_the_step_budget_counts_visits(mesh: Mesh, tmp_path: Path) -> None:
    async with serve(mesh, beat=False):
        runs = Runs(mesh)
        rec = await start_workflow(mesh, flows.long, 2, workspace=tmp_path)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
        assert rec.status == "done" and await runs.output(rec) == 1
        rec = await start_workflow(mesh, flows.long, 5, workspace=tmp_path)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
    assert rec.status == "failed"
    assert rec.ended_detail == "budget_exhausted"
    assert [s.value for s in await journal(mesh, rec.run_id)] == [0, 1, 2]


async def test_a_parked_workflow_is_a_small_record_and_cancels(mesh: Mesh, tmp_path: Path) -> None:
    async with serve(mesh, beat=False):
        runs = Runs(mesh)
        rec = await start_workflow(mesh, flows.asks, workspace=tmp_path)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
        assert rec.waiting is not None and rec.waiting.ask == "Proceed?"
        assert len(msgpack.packb(dump(rec))) <= 2048
        rec = await runs.cancel(rec.run_id, by=ME)
    assert rec.status == "cancelled"
    [decision] = await DecisionAnswerer(mesh).list()
    assert decision.status == "cancelled"


async def test_a_fork_is_refused_rather_than_run_again_from_nothing(
    mesh: Mesh, tmp_path: Path
) -> None:
    async with serve(mesh, beat=False):
        runs = Runs(mesh)
        rec = await start_workflow(mesh, flows.long, 2, workspace=tmp_path)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
        assert rec.status == "done"
        fork = await runs.fork(rec.run_id, "workflow:1", by=ME)
        fork = await runs.wait(fork.run_id, timeout=scaled(30))
    assert fork.status == "failed"
    assert fork.error is not None and "a fork of a workflow run is not supported" in fork.error
